"""RecompileProfiler: every compile and recompile inside a block, and every guard that caused it.

torch 2.13 removed ``torch._dynamo.utils.CompileProfiler`` (the PT2 FAQ's "recompilation
profiler"), and ``TORCH_LOGS=recompiles`` names only the first failing guard
(pytorch#147428). This module gives PT2 users what PyTorch/XLA's compilation analysis
gave theirs, one :class:`CompileRecord` per compile:

- its cause: first compile, recompile, or a recompile torch refused (recompile limit);
- for a recompile, *all* the guards the call failed, per cached graph it was checked
  against, naming the input (``x``, ``n``, global ``N``) and the change (size, dtype,
  value...), with torch's own first-failure text kept alongside;
- the graph hash, the number of graph inputs and outputs, the user frame whose call
  triggered it, and the compile time.

Per code object, :class:`FunctionCompiles` counts compiles and recompiles, says when a
recompile limit was hit and what that cost (calls that fit no cached graph run eagerly),
and suggests remedies where the failures make one clear (``mark_dynamic`` or
``dynamic=True`` for varying sizes, a tensor instead of a changing Python scalar...).

The profiler listens at the seats of :mod:`explain.hooks`, so it sees every compile on
every thread while armed -- including functions ``torch.compile``\\ d before the block --
without the user changing their ``torch.compile`` calls. Used as a backend
(``torch.compile(fn, backend=prof)``, as old ``CompileProfiler`` users did) it arms itself
on its first graph, runs the graph eagerly, and reports the code objects it compiled
until :meth:`RecompileProfiler.close`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import types
from collections.abc import Callable
from typing import Any

import torch

from . import hooks
from .breaks import UserFrame
from .graphs import GraphSummary, summarize_graph
from .guards import GuardFailure
from .hooks import FrameCompile, RecompileLimit


@dataclasses.dataclass(frozen=True)
class EntryFailures:
    """Why a call did not fit one cached graph (by that graph's compile id)."""

    against: str
    failures: tuple[GuardFailure, ...]
    torch_reason: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "against": self.against,
            "failures": [failure.to_dict() for failure in self.failures],
            "torch_reason": self.torch_reason,
        }


@dataclasses.dataclass(frozen=True)
class CompileRecord:
    """One compile of one code object: its cause, graph, trigger and cost."""

    compile_id: str
    cause: str
    outcome: str
    detail: str | None
    function: str
    filename: str
    firstlineno: int
    resumed_at: int | None
    graph: GraphSummary | None
    triggered_by: UserFrame | None
    seconds: float | None
    backend_seconds: float | None
    failed_guards: tuple[EntryFailures, ...]
    limit: RecompileLimit | None
    thread: str

    @property
    def is_recompile(self) -> bool:
        return self.cause != "first compile"

    @property
    def failures(self) -> list[GuardFailure]:
        """Every failed guard, over all the cached graphs the call was checked against."""
        return [failure for entry in self.failed_guards for failure in entry.failures]

    @classmethod
    def from_frame(cls, frame: FrameCompile) -> CompileRecord:
        reasons = {reason.partition(":")[0]: reason for reason in frame.torch_reasons}
        failed = tuple(
            EntryFailures(entry.compile_id, tuple(entry.failures), reasons.get(entry.compile_id))
            for entry in frame.prior_entries
        )
        if frame.outcome == "refused":
            cause = "recompile refused"
        elif frame.is_recompile:
            cause = "recompile"
        else:
            cause = "first compile"
        return cls(
            compile_id=frame.compile_id,
            cause=cause,
            outcome=frame.outcome,
            detail=frame.detail,
            function=frame.function,
            filename=frame.filename,
            firstlineno=frame.firstlineno,
            resumed_at=frame.resumed_at,
            graph=frame.graphs[0] if frame.graphs else None,
            triggered_by=frame.triggered_by,
            seconds=frame.seconds,
            backend_seconds=frame.backend_seconds,
            failed_guards=failed,
            limit=frame.limit,
            thread=frame.thread,
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "compile_id": self.compile_id,
            "cause": self.cause,
            "outcome": self.outcome,
            "detail": self.detail,
            "graph": self.graph.to_dict() if self.graph else None,
            "graph_hash": self.graph.hash if self.graph else None,
            "graph_inputs": self.graph.inputs if self.graph else None,
            "graph_outputs": self.graph.outputs if self.graph else None,
            "triggered_by": self.triggered_by.to_dict() if self.triggered_by else None,
            "seconds": self.seconds,
            "backend_seconds": self.backend_seconds,
            "failed_guards": [entry.to_dict() for entry in self.failed_guards],
            "limit": dataclasses.asdict(self.limit) if self.limit else None,
            "thread": self.thread,
        }


@dataclasses.dataclass
class FunctionCompiles:
    """All compiles of one code object (a function, or a resume function after a graph break)."""

    function: str
    filename: str
    firstlineno: int
    resumed_at: int | None
    records: list[CompileRecord]

    @property
    def compiles(self) -> int:
        """Compiles that produced a cache entry."""
        return sum(1 for record in self.records if record.outcome == "compiled")

    @property
    def recompiles(self) -> int:
        return sum(1 for record in self.records if record.outcome == "compiled" and record.is_recompile)

    @property
    def limit_hit(self) -> CompileRecord | None:
        """The first compile torch refused because a recompile limit was reached."""
        return next((record for record in self.records if record.cause == "recompile refused"), None)

    @property
    def lost_to_eager(self) -> str | None:
        refused = self.limit_hit
        if refused is None or refused.limit is None:
            return None
        cached = len(refused.failed_guards)
        return (
            f"{refused.limit.limit_type} ({refused.limit.value}) reached at {refused.compile_id}: that call and every "
            f"later call of `{self.function}` whose inputs fit none of its {cached} cached graphs run eagerly "
            f"(uncompiled); dynamo does not try to compile `{self.function}` again"
        )

    @property
    def remedies(self) -> list[str]:
        return suggest_remedies(self)

    def to_dict(self) -> dict[str, object]:
        refused = self.limit_hit
        return {
            "function": self.function,
            "filename": self.filename,
            "firstlineno": self.firstlineno,
            "resumed_at": self.resumed_at,
            "compiles": self.compiles,
            "recompiles": self.recompiles,
            "limit_hit": None
            if refused is None
            else {
                "compile_id": refused.compile_id,
                "limit_type": refused.limit.limit_type if refused.limit else None,
                "limit": refused.limit.value if refused.limit else None,
                "lost_to_eager": self.lost_to_eager,
            },
            "remedies": self.remedies,
            "records": [record.to_dict() for record in self.records],
        }


def suggest_remedies(function: FunctionCompiles) -> list[str]:
    """Remedies for the recompiles of one function, only where its failed guards make one clear."""
    failures = [failure for record in function.records for failure in record.failures]
    remedies: list[str] = []

    def changes_by_input(kind: str) -> dict[str, list[GuardFailure]]:
        """The failures of one kind, grouped by the input that changed, in order of appearance."""
        grouped: dict[str, list[GuardFailure]] = {}
        for failure in failures:
            if failure.kind == kind:
                grouped.setdefault(failure.name, []).append(failure)
        return grouped

    for name, changes in changes_by_input("size").items():
        dims = sorted({f.dim for f in changes if f.dim is not None})
        seen = ", ".join(f"{f.expected} → {f.actual}" for f in changes[:3])
        marks = "; ".join(f"torch._dynamo.mark_dynamic({name}, {dim})" for dim in dims)
        remedies.append(
            f"`{name}` changes size in dim {', '.join(map(str, dims))} ({seen}): call `{marks}` before the first "
            f"compiled call, or compile with `torch.compile(..., dynamic=True)`, so one graph serves every size."
        )
    for name, changes in changes_by_input("dynamic_shape").items():
        dims = sorted({f.dim for f in changes if f.dim is not None})
        marks = "; ".join(f"torch._dynamo.mark_unbacked({name}, {dim})" for dim in dims)
        marks = marks or "torch._dynamo.mark_unbacked"
        remedies.append(
            f"`{name}` reached a size of 0 or 1, which dynamic shapes compile separately: if those sizes must share "
            f"the graph, use `{marks}`."
        )
    for name, changes in changes_by_input("value").items():
        change = changes[0]
        if not _is_number(change.expected):
            continue
        if change.scope == "global":
            remedies.append(
                f"Global `{name}` changed ({change.expected} → {change.actual}); dynamo bakes globals into the graph "
                f"as constants. Pass it to the function as an argument (a tensor if it changes often)."
            )
        else:
            remedies.append(
                f"`{name}` is a Python scalar that changes between calls ({change.expected} → {change.actual}); "
                f"dynamo specializes on its value. Pass it as a tensor (`torch.tensor({name})`) instead, or "
                f"compile with `dynamic=True` so numbers stay symbolic."
            )
    for name, changes in changes_by_input("dtype").items():
        kinds = ", ".join(dict.fromkeys(f"{f.expected} → {f.actual}" for f in changes))
        remedies.append(
            f"`{name}` switches dtype ({kinds}): each dtype needs its own graph. Cast it to one dtype before the "
            f"call if you do not need both."
        )
    for name, _changes in changes_by_input("identity").items():
        remedies.append(
            f"`{name}` is a different object from call to call (e.g. a new module or function each time): create it "
            f"once and reuse it."
        )
    refused = function.limit_hit
    if refused is not None and refused.limit is not None:
        remedies.append(
            f"Fix the changing inputs above, or raise the limit: `torch._dynamo.config.{refused.limit.limit_type} = N` "
            f"(or `torch.compile(..., recompile_limit=N)`)."
        )
    return remedies


def _is_number(text: str | None) -> bool:
    try:
        float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


class RecompileProfiler:
    """Records every dynamo compile while armed; ``report()`` explains each recompile.

    Usage::

        with RecompileProfiler() as prof:
            model(x)            # any torch.compile'd code, compiled before the block or not
        print(prof.report())    # rich text; prof.to_json() for tools

    or, as with the removed ``CompileProfiler``, ``torch.compile(fn, backend=prof)``.
    Thread-safe: compiles on any thread are recorded, and instances can be nested or
    re-entered; each armed instance sees every compile.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._records: list[CompileRecord] = []
        self._functions: dict[types.CodeType, FunctionCompiles] = {}
        self._depth = 0
        self._listening = False
        self._backend_armed = False
        self._backend_codes: set[types.CodeType] = set()

    # -- arming ------------------------------------------------------------------------

    def __enter__(self) -> RecompileProfiler:
        with self._lock:
            self._depth += 1
            self._arm()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            self._disarm_if_idle()

    def close(self) -> None:
        """Stop recording compiles for the code this profiler compiled as a backend."""
        with self._lock:
            self._backend_armed = False
            self._disarm_if_idle()

    def _arm(self) -> None:
        if not self._listening:
            hooks.add_listener(self)
            self._listening = True

    def _disarm_if_idle(self) -> None:
        if self._listening and self._depth == 0 and not self._backend_armed:
            hooks.remove_listener(self)
            self._listening = False

    # -- the old CompileProfiler interface: a backend ------------------------------------

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        """Act as a ``torch.compile`` backend: record the compile and run the graph eagerly."""
        from torch._dynamo.symbolic_convert import InstructionTranslator

        frame = hooks.current_frame()
        with self._lock:
            code = frame.code if frame is not None else InstructionTranslator.current_tx().f_code
            self._backend_codes.add(code)
            if not self._listening:
                # This compile began before we listened, so its end will not reach us:
                # record it from what is known now, and arm for the compiles after it.
                self._record_unobserved(code, gm, frame)
            if not self._backend_armed:
                self._backend_armed = True
                self._arm()
        return gm.forward

    def _record_unobserved(self, code: types.CodeType, gm: torch.fx.GraphModule, frame: FrameCompile | None) -> None:
        if frame is None:
            compile_id = str(gm.meta.get("dynamo_compile_id", "?"))
            frame = FrameCompile(
                sequence=-1,
                code=code,
                compile_id=compile_id,
                thread=threading.current_thread().name,
                private=False,
                is_recompile=not compile_id.endswith("/0"),
                prior_entries=[],
                limit=None,
                triggered_by=None,
                started=0.0,
                graphs=[summarize_graph(gm)],
            )
        record = dataclasses.replace(
            CompileRecord.from_frame(frame),
            outcome="compiled",
            detail="recorded from the backend call that armed the profiler (no timing)",
            seconds=None,
            backend_seconds=None,
        )
        self._add(code, record)

    # -- listening ---------------------------------------------------------------------

    def frame_compiled(self, frame: FrameCompile) -> None:
        with self._lock:
            if self._depth == 0 and frame.code not in self._backend_codes:
                return
            self._add(frame.code, CompileRecord.from_frame(frame))

    def _add(self, code: types.CodeType, record: CompileRecord) -> None:
        self._records.append(record)
        function = self._functions.get(code)
        if function is None:
            function = self._functions[code] = FunctionCompiles(
                record.function, record.filename, record.firstlineno, record.resumed_at, []
            )
        function.records.append(record)

    # -- results -----------------------------------------------------------------------

    @property
    def records(self) -> list[CompileRecord]:
        """Every compile seen, in the order they ended."""
        with self._lock:
            return list(self._records)

    @property
    def functions(self) -> list[FunctionCompiles]:
        """Compiles grouped per code object, in order of first compile."""
        with self._lock:
            return [dataclasses.replace(f, records=list(f.records)) for f in self._functions.values()]

    def for_function(self, fn: Callable[..., Any] | types.CodeType) -> FunctionCompiles | None:
        """The compiles of one function (its code object; resume functions are separate)."""
        code = fn if isinstance(fn, types.CodeType) else _code_of(fn)
        with self._lock:
            found = self._functions.get(code)
            return dataclasses.replace(found, records=list(found.records)) if found else None

    def size_forecast(self, fn: Callable[..., Any], ranks: list[int], box: Any, **options: Any) -> dict[str, Any]:
        """Which input sizes of ``fn`` will still recompile: its size classes no cache entry accepts yet.

        See ``validation.recompile_forecast`` (one tensor argument per rank; ``box`` bounds
        every dimension, e.g. ``(1, 64)``).
        """
        from validation import recompile_forecast

        return recompile_forecast(fn, ranks, box, **options)

    def to_dict(self) -> dict[str, object]:
        functions = self.functions
        records = [record for function in functions for record in function.records]
        return {
            "compile_count": sum(f.compiles for f in functions),
            "recompile_count": sum(f.recompiles for f in functions),
            "refused_count": sum(1 for r in records if r.cause == "recompile refused"),
            "functions": [function.to_dict() for function in functions],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text (the schema of :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent)

    def report(self, width: int = 120) -> str:
        """The report as rich-rendered plain text, for ``print``."""
        from .report import recompiles_renderable, to_text

        return to_text(recompiles_renderable(self.functions), width=width)

    def __rich__(self) -> Any:
        from .report import recompiles_renderable

        return recompiles_renderable(self.functions)


def _code_of(fn: Callable[..., Any]) -> types.CodeType:
    """The code object dynamo compiles for ``fn``, seeing through ``torch.compile``'s wrappers."""
    fn = getattr(fn, "_orig_mod", fn)  # an OptimizedModule
    fn = getattr(fn, "_torchdynamo_orig_callable", fn)
    if isinstance(fn, torch.nn.Module):
        fn = type(fn).forward
    return fn.__code__  # type: ignore[union-attr]


__all__ = ["RecompileProfiler", "CompileRecord", "FunctionCompiles", "EntryFailures", "suggest_remedies"]
