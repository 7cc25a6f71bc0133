"""Below the stage: the subsystem that breaks, and a workaround the user can apply today.

A failure "at inductor" could come from any pass, decomposition, lowering or config
choice of the stage. torch's ``CompilerBisector`` finds which
(:mod:`pt2kit.seams.compiler_bisector`); pt2kit drives it from the failing stage
down, every test an isolated query of the minimized graph (cheap, and a segfault costs
a query): :func:`drill_down` gives a :class:`Subsystem`, with the application of it
that breaks the graph and what that was (an op, a pass).

Then the user's question: what can I change today so that my program runs?
:func:`workarounds` proposes, from the narrowest to the broadest, Python to run before
the unchanged program: the config key the bisector flipped, the one op falling back
to ATen (a lowering), the one decomposition dropped, the one pass disabled
(``disabled_passes``), and as a last resort the program compiled with a lighter
backend. :func:`find_workaround` asks each about the repro's graph, then runs the original
program after the first that fixes it, as its user will (torch alone, its own
directory, their own Inductor cache, whose whole-graph caches the workaround turns
off); the first under which it runs to the end is the :class:`Workaround`. ``report.json`` carries
both (``subsystem``, ``workaround``), and the summary and the repro's header say them.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..unit.case import Boundary, GraphCase
from pt2kit.seams import compiler_bisector
from pt2kit.seams.compile_fx import FALLBACK_RANDOM
from pt2kit.seams.config import AUTOTUNE_CHOICES, MODULES as CONFIG_MODULES, NEVER_DROPPED, held_at_default
from ..isolation.session import Session
from pt2kit.signature import Signature
from ..stages.run import raises_in_eager, run_case
from ..unit.check import Stage, stage_below
from ..unit.float64 import has_random_ops
from . import program_check
from .probes import AskAhead, disabled_whole, passes_with_bisector

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


@dataclass(frozen=True)
class Subsystem:
    """The part of a stage that breaks a graph: torch's subsystem name, the application that breaks it, what that was."""

    backend: str
    name: str
    application: int
    detail: str | None
    config: tuple[str, str, Any] | None = None  # a config-change subsystem: (owner, key, value)
    ops: tuple[str, ...] = ()  # the ops a lowering's node name may be (a body's node can share it): a workaround each

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        where = f" #{self.application}" if self.application else ""
        return f"{self.backend} · {self.name}{where}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class Workaround:
    """Python to run before the unchanged program, what it does, and what was seen to run right with it.

    ``verified_on``: ``program`` (the program ran to the end: torch alone, its own
    directory, the user's Inductor cache) or ``graph`` (the graph it failed in ran right;
    the program was too long to run again, see :data:`PROGRAM_RERUN_LIMIT`, or did not
    end in time with it); ``repro`` (the repro's graph runs right with it: said while the
    program runs with it, and for an upgrade of torch, :mod:`minifier.releases`).
    """

    code: str
    what: str
    verified_on: str

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verified": self.verified_on == "program"}


def drill_down(
    session: Session, case: GraphCase, stage: str, target: Signature, accuracy: Accuracy
) -> Subsystem | None:
    """The subsystem of ``stage`` that breaks ``case`` (None: a stage the bisector does not know, or none of its subsystems)."""
    if stage not in compiler_bisector.DRILLABLE:
        return None
    # (in the run directory: the queries' children read the bisector's state there; removed once done)
    directory = tempfile.mkdtemp(prefix="pt2kit-subsystem-", dir=session.run_dir)
    asked = functools.partial(passes_with_bisector, case, stage, target, accuracy, directory)
    names = compiler_bisector.subsystems(stage)
    ahead = session.while_verifying
    disabled = ahead.answered(case, stage, target, accuracy) if isinstance(ahead, AskAhead) else {}

    def passes() -> bool:
        name, run_state = compiler_bisector.state(stage)
        if run_state == "test_disable" and name in names:  # (the next unasked ones, side by side)
            ahead = [n for n in names[names.index(name) :] if n not in disabled][: session.jobs] if name not in disabled else []
            disabled.update(zip(ahead, passes_disabled(session, case, stage, target, accuracy, ahead)))
            return disabled[name]
        result = session.query(asked, f"{case.label()}: which part of {stage} breaks it")
        return bool(result.value)  # (a crash is a failure: False)

    try:
        found = compiler_bisector.drill(stage, directory, passes)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if found is None:
        return None
    detail, ops = _detail(found, case)
    return Subsystem(found.backend, found.subsystem, found.application, detail, found.config_change, ops)


def passes_disabled(
    session: Session,
    case: GraphCase,
    stage: str,
    target: Signature,
    accuracy: Accuracy,
    names: list[str],
) -> list[bool]:
    """Does ``case`` pass with each of ``names`` (subsystems of ``stage``) disabled whole? Side by side.

    The bisector's first question about each subsystem, in the state it would set for it
    (:func:`~pt2kit.seams.compiler_bisector.disable_whole`), so its search reads the same
    answers, in its own order, whatever the ``--jobs``. (Each query's label says "which part
    of": the page's timeline files that, and "confirming", under below the stage.)
    """
    asked = [disabled_whole(session, case, stage, target, accuracy, name) for name in names]
    try:
        results = session.query_all(
            [(query, f"{case.label()}: which part of {stage} breaks it: without {name}") for name, (query, _) in zip(names, asked)]
        )
        return [bool(r is not None and r.value) for r in results]  # (a crash is a failure: False)
    finally:
        for _, directory in asked:
            shutil.rmtree(directory, ignore_errors=True)


def _detail(found: compiler_bisector.Found, case: GraphCase) -> tuple[str | None, tuple[str, ...]]:
    """What the guilty application was, in a user's words (an op ``aten.relu.default``, a pass, a config key), and the ops it may be.

    A lowering names the node it lowered (``relu``), in the graph or a body: its op, or the name where ops share it.
    """
    text = found.detail or ""
    op = re.search(r"target=torch\.ops\.([\w.]+)", text) or re.search(
        r"OpOverload\(op='([\w.]+)', overload='(\w+)'\)", text
    )
    if op:
        return ".".join(op.groups()), (".".join(op.groups()),)
    if found.subsystem != "lowerings" or not text:
        return text or None, ()
    from pt2kit.names import ops_of_nodes_named

    ops = ops_of_nodes_named(case.gm, text)
    return (ops[0] if len(ops) == 1 else text), ops


@dataclass(frozen=True)
class Option:
    """A workaround to try: the code, what it does, and the stage the failing graph is asked under with it."""

    code: str
    what: str
    stage: str


def workarounds(
    subsystem: Subsystem | None,
    stage: str,
    backend: str,
    *,
    donated: bool = False,
    weighed: bool = False,
    draws: bool = False,
    config: dict[str, dict[str, Any]] | None = None,
) -> list[Option]:
    """What to try, narrowest first; the last, a lighter backend (the stage below ``stage``), always applies.

    A failure in dynamo itself (``stage`` eager) has no lighter backend. ``donated``: a backward graph whose
    inputs AOTAutograd donates to Inductor, which may reuse their memory: first, without that reuse.
    ``weighed``: a graph whose outputs the program's loss gave gradients that weigh their elements differently
    (:attr:`GraphCase.output_grads`): first, with those gradients laid out densely. ``draws``: the graph draws
    random numbers, which Inductor (and its decompositions, which aot_eager_decomp_partition runs) draws otherwise
    than eager by design: first, torch's documented switch, ``fallback_random``.
    """
    found: list[Option] = []
    if draws and stage in (Stage.INDUCTOR, Stage.AOT_EAGER_DECOMP_PARTITION):
        what = "let Inductor draw eager's random numbers (torch._inductor.config.fallback_random = True)"
        found.append(Option(FALLBACK_RANDOM + compiler_bisector.CACHES_OFF, what, stage))
    if weighed and stage != Stage.EAGER:
        what = "let AOTAutograd lay each output's gradient out densely, not as the output (whose elements may overlap)"
        found.append(Option(compiler_bisector.DENSE_TANGENTS, what, stage))
    if donated and stage == Stage.INDUCTOR:
        code = "import torch._functorch.config\ntorch._functorch.config.donated_buffer = False\n" + compiler_bisector.CACHES_OFF
        found.append(Option(code, "let Inductor reuse no backward input's memory (AOTAutograd donates none)", stage))
    if subsystem is not None:
        detail = subsystem.detail or ""
        if subsystem.config is not None:
            owner, key, value = subsystem.config
            module = "torch._inductor.config" if owner == Stage.INDUCTOR else "torch._functorch.config"
            found.append(Option(f"import {module}\n{module}.{key} = {value!r}\n", f"set {module}.{key} = {value!r}", stage))
        elif subsystem.name == "lowerings":
            for op in subsystem.ops or (detail,):
                if op.startswith("aten."):
                    twin = compiler_bisector.in_place_twin(op)
                    what = f"let {op}{f' (and {twin})' if twin else ''} fall back to ATen instead of Inductor's lowering"
                    found.append(Option(compiler_bisector.fallback_code(op), what, stage))
        elif subsystem.name == "decomposition" and detail.startswith("aten."):
            what = f"drop Inductor's decomposition of {detail}"
            found.append(Option(compiler_bisector.no_decomposition_code(detail), what, stage))
        elif subsystem.name.endswith("_passes") and detail and re.fullmatch(r"[\w.]+", detail):
            code = f"import torch._inductor.config\ntorch._inductor.config.disabled_passes = {detail!r}\n"
            found.append(Option(code, f"disable Inductor's {subsystem.name.replace('_', '-')} {detail}", stage))
    # the config the repro needs to fail (freezing, max_autotune...): each held at torch's default, as the user can
    found += [option for module, values in (config or {}).items() for key in values if (option := _config_held(module, key, stage))]
    # the stage before the one that fails (a user's backend: the aot stage below Inductor); eager has none
    lighter = stage_below(stage) if stage in list(Stage) else Stage.AOT_EAGER
    if lighter is not None:
        what = f"compile with {lighter} instead of {backend} (a last resort: slower, but right)"
        found.append(Option(compiler_bisector.lighter_backend_code(lighter), what, lighter))
    return found


def _config_held(module: str, key: str, stage: str) -> Option | None:
    """A workaround: config ``key``, which the repro needs to fail, held at torch's default (None: it cannot be)."""
    if key in NEVER_DROPPED.get(module, ()) + AUTOTUNE_CHOICES.get(module, ()) or module not in CONFIG_MODULES:
        return None  # (the autotuner's pick list held at default still picks by timing: a workaround that comes and goes)
    held = held_at_default(module, key)
    if held is None:
        return None
    code, default = held
    return Option(code + compiler_bisector.CACHES_OFF, f"keep {module}.{key} at torch's default, {default!r} (the failure needs it otherwise)", stage)


def passes_with_code(case: GraphCase, option: Option, accuracy: Accuracy) -> bool:
    """(In a worker child) does ``case`` run right under ``option.stage`` once ``option.code`` has run?

    Right is as eager runs it: a run that raises where plain eager raises too is right (pytorch#195402: eager's
    IndexError, which the program catches, for Inductor's abort). Inductor's cache is off: its key does not see a
    changed lowering or decomposition table.
    """
    import torch._inductor.config as inductor_config
    from pt2kit.seams import compiler_state

    exec(compile(option.code, "<pt2kit workaround>", "exec"), {})  # noqa: S102 - a workaround pt2kit wrote
    compiler_state.refresh()
    with inductor_config.patch(fx_graph_cache=False):
        failure = run_case(case, option.stage, accuracy=accuracy).failure
    return failure is None or raises_in_eager(failure)


#: A program that ran longer than this (seconds) is not run again to check a workaround:
#: the graph it failed in, passing with it, is the evidence then (``verified_on: graph``).
PROGRAM_RERUN_LIMIT = 120.0


def failing_graph(report: Any, case: GraphCase) -> GraphCase:
    """The dynamo graph ``case`` comes from, when the bisection kept it, else ``case``.

    A workaround is asked about the dynamo graph: an aot graph is Inductor's input
    after its decompositions already ran, so dropping one would change nothing there.
    """
    label = str(case.graph_id.owner)
    rows = report.rows if report is not None else []
    row = next((r for r in rows if r.label == label and r.boundary == Boundary.DYNAMO and r.case is not None), None)
    return row.case if row is not None else case


def find_workaround(
    session: Session,
    subsystem: Subsystem | None,
    stage: str,
    graph: GraphCase,
    backend: str,
    accuracy: Accuracy,
    script: Path | None,
    args: list[str],
    minimized: GraphCase | None = None,
    interim: Callable[[Workaround], None] | None = None,
    later: Callable[[program_check.ProgramCheck], None] | None = None,
) -> Workaround | None:
    """The first of :func:`workarounds` under which the repro, the program's failing ``graph`` and the program run right.

    1. Every option is asked about ``minimized`` (the repro's graph: a compile of a few
       ops), side by side: one that does not fix the repro cannot fix the program.
    2. The first that does is asked about ``graph`` (one query) while the unchanged
       program runs with it (when there is one, and it ran within
       :data:`PROGRAM_RERUN_LIMIT`): the two at once, so the program's run, the slow
       part, starts without waiting for the graph's answer.
    3. The program running to the end verifies it (``verified_on: program``); the
       program failing with it drops it, and the next is asked. A program that never
       ends in time with it leaves the graph's word (``verified_on: graph``).

    ``interim`` hears of an option that fixes the repro (``verified_on: repro``) before
    the program runs with it: the slow part, which the user need not wait for. With
    ``later``, neither ``graph`` nor the program is asked now: the first option that fixes
    the repro is the answer (``verified_on: repro``), and ``later`` gets the program's runs
    with it and, should the program still fail, with the others that fix the repro, in
    order, to go on in the background (:mod:`~minifier.bisect.program_check`). (``graph``
    is a compile of the program's whole failing graph: on a model, most of the program.)
    """
    options = workarounds(
        subsystem, stage, backend, donated=bool(graph.donated or (minimized and minimized.donated)),
        weighed=bool(graph.output_grads or (minimized and minimized.output_grads)),
        draws=has_random_ops(minimized.gm if minimized is not None else graph.gm),
        config=minimized.config if minimized is not None else None,
    )
    if minimized is not None and options:
        fixes = session.query_all(
            [(functools.partial(passes_with_code, minimized, o, accuracy), f"repro.py with a workaround: {o.what}") for o in options]
        )
        options = [o for o, fixed in zip(options, fixes) if fixed is not None and fixed.value]
    rerun = script is not None and session.program_seconds <= PROGRAM_RERUN_LIMIT
    if later is not None and rerun and minimized is not None and options:
        first, *others = options
        later(program_check.ProgramCheck(str(script), args, first.code, first.what, session.program_seconds, [[o.code, o.what] for o in others]))
        return Workaround(first.code, first.what, "repro")
    for option in options:
        asked = functools.partial(passes_with_code, graph, option, accuracy)
        label = f"{graph.label()}: trying a workaround: {option.what}"
        if not rerun:
            if session.query(asked, label).value:
                return Workaround(option.code, option.what, "graph")
            continue
        assert script is not None
        on_graph = session.start(asked, label)
        if interim is not None and minimized is not None:
            interim(Workaround(option.code, option.what, "repro"))
        ran = on_the_program(session, script, args, option)
        fixed_graph = bool(session.wait(on_graph).value)
        if ran or (ran is None and fixed_graph):
            return Workaround(option.code, option.what, "program" if ran else "graph")
    return None


def on_the_program(session: Session, script: Path, args: list[str], option: Option) -> bool | None:
    """Does the unchanged program run to the end with ``option``'s code run first? None: it did not end in time."""
    check = program_check.ProgramCheck(str(script), args, option.code, option.what, session.program_seconds)
    return session.timed(f"running {script.name} with the workaround: {option.what}", functools.partial(program_check.run, check)).ok


@dataclass
class Below:
    """What :func:`go_below` found under a failing stage (``report.json``'s ``subsystem`` and ``workaround``)."""

    subsystem: Subsystem | None = None
    confirmed: bool | None = None  # disabling it whole makes the original graph pass
    workaround: Workaround | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        subsystem = self.subsystem and {**self.subsystem.to_json(), "confirmed_on_original": self.confirmed}
        return {"subsystem": subsystem, "workaround": None if self.workaround is None else self.workaround.to_json()}


def go_below(
    session: Session,
    stage: str,
    target: Signature,
    accuracy: Accuracy,
    *,
    original: GraphCase,
    minimized: GraphCase | None,
    report: Any,
    script: Path | None,
    args: list[str],
    interim: Callable[[Below], None] | None = None,
    later: Callable[[program_check.ProgramCheck], None] | None = None,
) -> Below:
    """The subsystem of ``stage`` that breaks the graph, and a workaround for the program.

    Drilled on ``minimized`` (cheap) and confirmed on ``original``, or drilled on
    ``original`` alone (``minify bisect``, which minimizes nothing). A torch whose
    bisector this cannot drive costs a note, never the run. ``interim`` hears what is
    found so far once a workaround fixes the repro, before the program runs with it;
    ``later``, the program's run with it, when that is left to the background.
    """
    from pt2kit import seams

    below = Below()
    status = seams.check("compiler_bisector")
    if not status.ok:
        below.notes.append(
            f"the subsystem search needs torch's CompilerBisector, which this torch changed: {status.error}"
        )
        return below
    below.subsystem = drill_down(session, minimized or original, stage, target, accuracy)
    confirming = None
    if below.subsystem is not None:
        if minimized is None:
            below.confirmed = True
        else:  # (its one query on the original graph runs beside the workaround's search)
            confirming = Confirming(session, below.subsystem, original, target, accuracy)
    elif stage in compiler_bisector.DRILLABLE:
        below.notes.append(f"no subsystem of {stage} that torch's bisector knows breaks the graph alone")
    backend = report.backend if report is not None else original.backend
    if script is not None and report is not None and report.original is None:
        # it ran to the end before too (the wrong answer is --accuracy's finding): running to the end says nothing
        script = None
        below.notes.append("the program checks none of its answers, so the workaround is verified on the failing graph")
    told = None if interim is None else (lambda w: interim(replace(below, workaround=w, notes=list(below.notes))))
    try:
        below.workaround = find_workaround(
            session, below.subsystem, stage, failing_graph(report, original), backend, accuracy, script, args,
            minimized, told, later,
        )  # fmt: skip
    except BaseException:
        if confirming is not None:
            confirming.cancel()
        raise
    if confirming is not None:
        below.confirmed = confirming.passes()
    if below.workaround is None:
        below.notes.append("no workaround found: the failing graph or the program still fails with each one tried")
    return below


class Confirming:
    """Does the original graph pass with the whole subsystem disabled? One query on the graph the program
    failed in, started now, answered by :meth:`passes` (a crash is a failure: False)."""

    def __init__(self, session: Session, subsystem: Subsystem, case: GraphCase, target: Signature, accuracy: Accuracy):
        self.session = session
        asked, self.directory = disabled_whole(session, case, subsystem.backend, target, accuracy, subsystem.name)
        self.handle = session.start(asked, f"{case.label()}: confirming {subsystem.name} on the original graph")

    def passes(self) -> bool:
        try:
            return bool(self.session.wait(self.handle).value)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def cancel(self) -> None:
        self.session.stop([self.handle])
        shutil.rmtree(self.directory, ignore_errors=True)


def add_workaround_to_repro(path: Path, workaround: Workaround) -> None:
    """Say the workaround in the repro's header comment (the code the repro runs is unchanged)."""
    program_check.say_in_header(path, workaround.code, workaround.what, workaround.verified_on)
