"""Do the installed guards imply every assumption of the trace? One compile, one Z3 question per assumption.

For one compile we have the guard code dynamo built (:mod:`pt2kit.seams.guard_code`), the
trace's assumptions and facts (:mod:`validation.assumptions`), and -- when dynamo gave them
to us -- the frame's own inputs. :func:`check_compile` then asks, for each assumption ``A``:

    is  guards ∧ facts ∧ domain ∧ ¬A  satisfiable?

A model is a *counterexample*: input sizes the installed guards accept although the trace
assumed otherwise there, so dynamo would run this graph where it is wrong. It is
minimized (smallest sizes first) and put to the installed guards themselves -- read or
not -- before it is reported (:mod:`validation.counterexamples`). The guards also have to accept
the inputs they were built from; when they do not (torch then raises "Guard failed on the
same frame it was created") the failing guard parts are named.

Soundness before completeness, in four rules:

- a shape guard (an epilogue guard part) that cannot be translated makes the compile
  *incomplete*: dropping it would weaken the hypotheses, and a counterexample found
  without it could be spurious -- so refutations then count only when the installed
  guards, run on inputs of those sizes, accept them (or ``--confirm`` reproduces them);
- an assumption that cannot be translated, or a solver timeout, makes it *incomplete*;
- guard parts about anything but integers (types, ids, global state) are not shape
  guards and are left out, which can only make counterexamples easier to find;
- facts (deferred runtime asserts, ranges of data-dependent sizes) are hypotheses
  because the graph checks them itself at run time.

The hypotheses go into one default ``z3.Solver`` per compile; each assumption is one
``push``/``check``/``pop`` with its own timeout. Assumptions that are literally one of the
translated guards are proved without asking.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import z3

from pt2kit.seams import guard_code
from pt2kit.seams import shape_env as shape_env_seam

from . import pyexpr, readable
from .assumptions import Assumption, gather
from .counterexamples import Accepts, installed_guards, search
from .translate import Vocabulary, is_tensor_property
from .z3ops import Ops, Untranslatable, holds_at


@dataclasses.dataclass
class Finding:
    """Something wrong, or something that could not be checked, in one compile."""

    kind: str  # unsound-guard | static-decision | guard-rejects-own-inputs | untranslatable | timeout
    assumption: str  # sympy text of what was assumed (or the guard / expression concerned)
    readable: str = ""  # the same over source names
    origin: str = ""  # evaluate_expr, static, runtime_assert, specialization, duck-sizing, input, range, guard
    counterexample: dict[str, int] | None = None
    confirmed: bool | None = None
    detail: str = ""
    where: str | None = None  # the user's line that led to the assumption
    refuted: bool = False  # the installed guards reject the counterexample (a guard pt2kit could not read)
    accepted: bool | None = None  # the installed guards, run on inputs of these sizes, accept them (None: not run)

    @property
    def unsound(self) -> bool:
        return self.kind in ("unsound-guard", "static-decision", "guard-rejects-own-inputs")

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "kind": self.kind,
            "assumption": self.assumption,
            "readable": self.readable,
            "origin": self.origin,
        }
        if self.counterexample is not None:
            data["counterexample"] = self.counterexample
        data["confirmed"] = self.confirmed
        if self.accepted is not None:
            data["accepted"] = self.accepted
        if self.refuted:
            data["refuted"] = True
        if self.detail:
            data["detail"] = self.detail
        if self.where:
            data["where"] = self.where
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """The finding :meth:`to_dict` wrote: equal to the one written (every field is in the JSON)."""
        return cls(
            kind=data["kind"],
            assumption=data["assumption"],
            readable=data.get("readable", ""),
            origin=data.get("origin", ""),
            counterexample=data.get("counterexample"),
            confirmed=data.get("confirmed"),
            detail=data.get("detail", ""),
            where=data.get("where"),
            refuted=data.get("refuted", False),
            accepted=data.get("accepted"),
        )


@dataclasses.dataclass
class CompileCheck:
    """The verdict on one compile."""

    function: str
    compile_id: str
    filename: str
    firstlineno: int
    status: str  # sound | unsound | incomplete
    guards: int  # shape guard parts translated
    assumptions: int  # assumptions checked
    seconds: float  # spent validating
    compile_seconds: float
    findings: list[Finding]
    installed: bool = True
    refused: str | None = None  # torch's error when it refused the guards it built
    guards_complete: bool = True

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "function": self.function,
            "compile_id": self.compile_id,
            "file": self.filename,
            "line": self.firstlineno,
            "status": self.status,
            "guards": self.guards,
            "assumptions": self.assumptions,
            "seconds": round(self.seconds, 4),
            "compile_seconds": round(self.compile_seconds, 4),
            "installed": self.installed,
            "findings": [finding.to_dict() for finding in self.findings],
        }
        if self.refused:
            data["refused"] = self.refused
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileCheck:
        """The check :meth:`to_dict` wrote, with its ``status`` and (rounded) seconds as written.

        ``guards_complete`` is not in the JSON and reads back as True, so :meth:`settle` is
        meaningful only on a check :func:`check_compile` made; its ``to_dict()`` is the JSON read.
        """
        return cls(
            function=data["function"],
            compile_id=data["compile_id"],
            filename=data["file"],
            firstlineno=data["line"],
            status=data["status"],
            guards=data["guards"],
            assumptions=data["assumptions"],
            seconds=data["seconds"],
            compile_seconds=data["compile_seconds"],
            findings=[Finding.from_dict(finding) for finding in data["findings"]],
            installed=data.get("installed", True),
            refused=data.get("refused"),
        )

    def settle(self) -> None:
        """Compute ``status`` from the findings (again, after ``--confirm`` has run).

        A refutation is trusted when every shape guard was translated (Z3 saw all of
        them), or when the real guards accepted its counterexample (``accepted``, or
        ``--confirm`` ran it). One the real guards reject (``refuted``) proves a guard was
        missed: the compile is then incomplete. A counterexample on which eager and the
        entry happen to agree still breaks an assumption, so it stays unsound
        (``confirmed: false`` says what the run showed).
        """
        unsound = [f for f in self.findings if f.unsound and not f.refuted]
        trusted = [
            f
            for f in unsound
            if self.guards_complete or f.accepted or f.confirmed or f.kind == "guard-rejects-own-inputs"
        ]
        if trusted:
            self.status = "unsound"
        elif (
            unsound
            or any(f.refuted or f.kind in ("untranslatable", "timeout") for f in self.findings)
            or not self.guards_complete
        ):
            self.status = "incomplete"
        else:
            self.status = "sound"


@dataclasses.dataclass
class _Obligation:
    assumption: Assumption
    formula: z3.BoolRef
    local: list[z3.BoolRef]


@dataclasses.dataclass(frozen=True)
class _Guards:
    """The installed guards as Z3 reads them."""

    translated: list[tuple[str, z3.BoolRef]]  # the shape guards, as text and formula
    identities: set[str]  # sources dynamo pins by identity (ID_MATCH)
    complete: bool  # every shape guard in the epilogue was translated
    findings: list[Finding]  # the shape guards that were not


def check_compile(
    *,
    shape_env: Any,
    decisions: list[shape_env_seam.Decision],
    guard_manager: Any,
    where: Any = lambda decision: None,
    f_locals: dict[str, Any] | None,
    timeout_ms: int,
    function: str,
    compile_id: str,
    filename: str,
    firstlineno: int,
    compile_seconds: float,
    installed: bool,
    refused: BaseException | None,
) -> CompileCheck:
    start = time.perf_counter()
    vocab = Vocabulary(shape_env)
    names = _namer(vocab)
    guards = _read_guards(vocab, guard_manager)  # 1. the installed guards
    findings = list(guards.findings)
    # 2. assumptions and facts
    assumptions, fact_exprs = gather(shape_env, decisions, where)
    pinned = [a for a in assumptions if _pinned_elsewhere(a, guards.identities)]
    facts = _facts(vocab, pinned, fact_exprs)
    obligations, untranslatable = _obligations(vocab, [a for a in assumptions if a not in pinned], names)
    findings += untranslatable
    hypotheses = [formula for _, formula in guards.translated] + facts + vocab.domain()
    sizes = sorted((term for name, term in vocab.sources.items() if is_tensor_property(name)), key=str)
    others = sorted((term for name, term in vocab.sources.items() if not is_tensor_property(name)), key=str)
    # 3. the guards must accept the inputs they were built from
    if f_locals is not None and guard_manager is not None:
        findings += _own_inputs(guards.translated, vocab, f_locals, guard_manager, refused)
    # 4. one question per assumption; each counterexample is put to the installed guards themselves
    accepts = installed_guards(guard_manager, f_locals) if f_locals is not None and guard_manager is not None else None
    findings += _refutations(obligations, guards.translated, hypotheses, sizes, others, timeout_ms, names, accepts)
    check = CompileCheck(
        function=function,
        compile_id=compile_id,
        filename=filename,
        firstlineno=firstlineno,
        status="sound",
        guards=len(guards.translated),
        assumptions=len(obligations),
        seconds=time.perf_counter() - start,
        compile_seconds=compile_seconds,
        findings=findings,
        installed=installed,
        refused=_first_line(refused) if refused is not None else None,
        guards_complete=guards.complete,
    )
    check.settle()
    return check


def _read_guards(vocab: Vocabulary, guard_manager: Any) -> _Guards:
    """Which guard parts are shape guards for Z3, which pin a source by identity, and which cannot be read."""
    translated: list[tuple[str, z3.BoolRef]] = []
    identities: set[str] = set()
    complete = True
    findings: list[Finding] = []
    for part in guard_code.code_parts(guard_manager):
        code = pyexpr.strip_comment(part.code)
        pinned = pyexpr.static_sizes(part.code)
        if pinned is not None:
            translated += [(f"{name} == {value}", vocab.source(name) == value) for name, value in pinned]
            continue
        identity = pyexpr.identity_source(part.code)
        if identity is not None:
            identities.add(identity)
            continue
        # A shape guard speaks of the ShapeEnv's inputs only (sizes, strides, offsets, symbolic
        # ints and floats); anything else (types, ids, aliasing, global state) is not one.
        try:
            leaves = pyexpr.leaves(part.code)
        except Untranslatable:
            leaves = []
        if not leaves or not all(vocab.known_source(leaf) or vocab.is_float_source(leaf) for leaf in leaves):
            if part.epilogue and not leaves:
                complete = False
                detail = "not a Python expression pt2kit can read"
                findings.append(Finding("untranslatable", code, code, "guard", detail=detail))
            continue
        try:
            translated.append((code, vocab.code(part.code)))
        except Untranslatable as why:
            if leaves and all(vocab.is_float_source(leaf) for leaf in leaves):
                # A guard on float inputs alone shares no variable with the integer ones: leaving
                # it out cannot change an integer verdict (it holds at the example inputs). A
                # decision on those floats is untranslatable in its own right, in _obligations.
                continue
            complete = False
            findings.append(Finding("untranslatable", code, code, "guard", detail=str(why)))
    return _Guards(translated, identities, complete, findings)


def _pinned_elsewhere(assumption: Assumption, identities: set[str]) -> bool:
    """Whether a binding is a fact, not an obligation: its input is pinned by identity or is module state."""
    # Dynamo puts no such input's sizes in shape guards: it guards it by identity (ID_MATCH on it or on
    # an object holding it), or as a module's parameter or buffer (through the module).
    binding = assumption.binding
    return binding is not None and (_owned_by(binding[0], identities) or _module_state(binding[0]))


def _facts(vocab: Vocabulary, pinned: list[Assumption], fact_exprs: Sequence[Any]) -> list[z3.BoolRef]:
    """The facts that are hypotheses: those Z3 can read (leaving one out only weakens the hypotheses)."""
    facts: list[z3.BoolRef] = []
    for assumption in pinned:
        try:
            facts.append(_formula(vocab, assumption))
        except Untranslatable:
            pass
    for fact in fact_exprs:
        try:
            facts.append(vocab.formula(fact))
        except Untranslatable:
            pass  # a fact left out only weakens the hypotheses
    return facts


def _obligations(
    vocab: Vocabulary, assumptions: list[Assumption], names: Any
) -> tuple[list[_Obligation], list[Finding]]:
    """Each assumption as a formula to prove, or an untranslatable finding when it cannot be one."""
    obligations: list[_Obligation] = []
    findings: list[Finding] = []
    for assumption in assumptions:
        try:
            obligations.append(_Obligation(assumption, _formula(vocab, assumption), _local(vocab, assumption)))
        except Untranslatable as why:
            findings.append(
                Finding(
                    "untranslatable",
                    assumption.text,
                    _readable(assumption, names),
                    assumption.origin,
                    detail=str(why),
                    where=assumption.where,
                )
            )
    return obligations, findings


def _refutations(
    obligations: list[_Obligation],
    guards: Sequence[tuple[str, z3.BoolRef]],
    hypotheses: list[z3.BoolRef],
    sizes: list[z3.ArithRef],
    others: list[z3.ArithRef],
    timeout_ms: int,
    names: Any,
    accepts: Accepts | None = None,
) -> list[Finding]:
    """The obligations the hypotheses do not imply: a counterexample each (:mod:`validation.counterexamples`:
    minimal, and passing the installed guards when ``accepts`` can run them; ``refuted`` when
    they reject every one), or a timeout."""
    solver = z3.Solver()
    solver.set("timeout", int(timeout_ms))
    solver.add(*hypotheses)
    guard_ids = {formula.get_id() for _, formula in guards}  # z3 hash-conses: equal terms, equal ids
    findings: list[Finding] = []
    for obligation in obligations:
        if obligation.formula.get_id() in guard_ids and not obligation.local:
            continue
        solver.push()
        solver.add(*obligation.local)
        solver.add(z3.Not(obligation.formula))
        result = solver.check()
        reason = solver.reason_unknown() if result == z3.unknown else ""
        solver.pop()
        if result == z3.unsat:
            continue
        assumption = obligation.assumption
        if result == z3.unknown:
            findings.append(
                Finding(
                    "timeout",
                    assumption.text,
                    _readable(assumption, names),
                    assumption.origin,
                    detail=f"z3 gave up: {reason} (timeout {timeout_ms} ms)",
                    where=assumption.where,
                )
            )
            continue
        constraints = hypotheses + obligation.local + [z3.Not(obligation.formula)]
        found = search(constraints, sizes, others, timeout_ms=timeout_ms, accepts=accepts)
        detail = ""
        if found.accepted is False:
            detail = (
                f"the installed guards reject every counterexample Z3 found ({found.tried}): "
                "a guard pt2kit could not read excludes them"
            )
        findings.append(
            Finding(
                assumption.kind,
                assumption.text,
                _readable(assumption, names),
                assumption.origin,
                counterexample=found.counterexample,
                where=assumption.where,
                detail=detail,
                refuted=found.accepted is False,
                accepted=found.accepted,
            )
        )
    return findings


def _module_state(quantity: str) -> bool:
    """A parameter or buffer of an ``nn.Module`` (``L['self']._modules['fc']._parameters['weight'].size()[0]``)."""
    return "._parameters[" in quantity or "._buffers[" in quantity


def _owned_by(quantity: str, identities: set[str]) -> bool:
    """Whether ``quantity`` (``B.size()[0]``) belongs to an object guarded by identity, or to one inside it."""
    base = quantity
    for suffix in (".size()[", ".stride()[", ".storage_offset()"):
        index = quantity.rfind(suffix)
        if index > 0:
            base = quantity[:index]
            break
    return any(base == owner or base.startswith((owner + ".", owner + "[")) for owner in identities)


def _formula(vocab: Vocabulary, assumption: Assumption) -> z3.BoolRef:
    if assumption.binding is not None:
        quantity, expr = assumption.binding
        ops = Ops()
        return ops.guarded(vocab.source(quantity) == vocab.term(expr, ops))
    return vocab.formula(assumption.expr)


def _local(vocab: Vocabulary, assumption: Assumption) -> list[z3.BoolRef]:
    """The facts one question was asked under (axioms, ranges of loop indices...)."""
    local = [vocab.formula(h) for h in assumption.hypotheses]
    for symbol, lower, upper in assumption.ranges:
        term = vocab.symbol(symbol)
        for bound, below in ((lower, True), (upper, False)):
            value = shape_env_seam._finite(bound)
            if value is not None:
                local.append(term >= value if below else term <= value)
    return local


def _own_inputs(
    guards: Sequence[tuple[str, z3.BoolRef]],
    vocab: Vocabulary,
    f_locals: dict[str, Any],
    guard_manager: Any,
    refused: BaseException | None,
) -> list[Finding]:
    try:
        accepted = guard_code.passes(guard_manager, f_locals)
    except Exception:  # noqa: BLE001 - a guard that raises rejects
        accepted = False
    if accepted:
        return []
    values: dict[z3.ArithRef, int] = {}
    example: dict[str, int] = {}
    for name, term in vocab.sources.items():
        value = _evaluate_source(name, f_locals)
        if value is not None:
            values[term] = value
            example[name] = value
    failing = [text for text, formula in guards if holds_at(formula, values) is False]
    detail = "the installed guards are false on the very inputs they were built from"
    if refused is not None:
        detail += f"; torch refused them ({_first_line(refused)})"
    return [
        Finding(
            "guard-rejects-own-inputs",
            text,
            readable.short(text),
            "guard",
            counterexample=dict(sorted(example.items())),
            confirmed=True,
            detail=detail,
        )
        for text in failing or ["<installed guards>"]
    ]


def _evaluate_source(name: str, f_locals: dict[str, Any]) -> int | None:
    """The value of a source such as ``L['x'].size()[0]`` in the frame's locals."""
    try:
        value = eval(name, {"__builtins__": {}}, {"L": f_locals})  # noqa: S307 - dynamo's own source text
    except Exception:  # noqa: BLE001
        return None
    try:
        return int(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _namer(vocab: Vocabulary) -> Any:
    def name(symbol: Any) -> str | None:
        source = vocab.source_of(symbol)
        return source if source is not None else None

    return name


def _readable(assumption: Assumption, names: Any) -> str:
    if assumption.binding is not None:
        quantity, expr = assumption.binding
        return f"{quantity} == {readable.expression(expr, names)}"
    return readable.expression(assumption.expr, names)


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".splitlines()[0][:300]


__all__ = ["check_compile", "CompileCheck", "Finding", "is_tensor_property"]
