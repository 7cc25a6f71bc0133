"""The records of a recompile report: one per compile, grouped per code object.

A :class:`CompileRecord` is one compile of one code object as :class:`~explain.RecompileProfiler`
keeps it (from the :class:`~explain.hooks.FrameCompile` the seats observed):

- its cause: first compile, recompile, or a recompile torch refused (recompile limit);
- for a recompile, *all* the guards the call failed, per cached graph it was checked
  against (:class:`EntryFailures`), with torch's own first-failure text kept alongside;
- the graph hash, the number of graph inputs and outputs, the user frame whose call
  triggered it, and the compile time.

:class:`FunctionCompiles` groups the records of one code object: it counts compiles and
recompiles, says when a recompile limit was hit and what that cost, and carries the
remedies of :mod:`explain.remedies`. Every record has a ``to_dict`` (the ``--json`` schema);
laying them out for people is :mod:`explain.report`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .breaks import UserFrame
from .graphs import GraphSummary
from .guards import GuardFailure
from .hooks import FrameCompile, RecompileLimit
from .names import without_comment
from .remedies import suggest_remedies


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EntryFailures:
        """What :meth:`to_dict` wrote (every field: it reads back as an equal value)."""
        return cls(
            against=data["against"],
            failures=tuple(GuardFailure.from_dict(failure) for failure in data["failures"]),
            torch_reason=data["torch_reason"],
        )


@dataclasses.dataclass(frozen=True)
class DistinctFailure:
    """One reason a call fit no cached graph, told once, with every cached graph it held for."""

    text: str
    failure: GuardFailure | None
    """None where explain found no failing guard and ``text`` is torch's own reason."""
    against: tuple[str, ...]


def distinct_failures(entries: Sequence[EntryFailures]) -> list[DistinctFailure]:
    """The failures of a recompile's call, each once: checked against several cached graphs, a call often fails
    the same guard of each (``x: size[0] 4 → 8`` against a float32 graph and a float64 one)."""
    found: dict[tuple[object, ...], DistinctFailure] = {}
    for entry in entries:
        reasons: list[tuple[tuple[object, ...], str, GuardFailure | None]] = [
            ((f.source, f.kind, f.dim, f.expected, f.actual, f.text), f.text, f) for f in entry.failures
        ]
        if not reasons:
            text = entry.torch_reason or "no guard failed (torch gave no reason)"
            reasons = [((text,), text, None)]
        for key, text, failure in reasons:
            seen = found.get(key)
            against = (seen.against if seen else ()) + (
                (entry.against,) if not seen or entry.against not in seen.against else ()
            )
            found[key] = DistinctFailure(text, failure, against)
    return list(found.values())


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
            graph=frame.graphs[-1] if frame.graphs else None,  # the graph of its last (installed) attempt
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

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        function: str = "",
        filename: str = "",
        firstlineno: int = 0,
        resumed_at: int | None = None,
    ) -> CompileRecord:
        """The record :meth:`to_dict` wrote. Its code object (``function``, ``filename``, ``firstlineno``,
        ``resumed_at``) is written once per :class:`FunctionCompiles`, not per record: pass it, as
        :meth:`FunctionCompiles.from_dict` does, and the record read back equals the one written.
        ``graph_hash``, ``graph_inputs`` and ``graph_outputs`` repeat ``graph`` and are read from it."""
        graph, trigger, limit = data["graph"], data["triggered_by"], data["limit"]
        return cls(
            compile_id=data["compile_id"],
            cause=data["cause"],
            outcome=data["outcome"],
            detail=data["detail"],
            function=function,
            filename=filename,
            firstlineno=firstlineno,
            resumed_at=resumed_at,
            graph=GraphSummary.from_dict(graph) if graph is not None else None,
            triggered_by=UserFrame.from_dict(trigger) if trigger is not None else None,
            seconds=data["seconds"],
            backend_seconds=data["backend_seconds"],
            failed_guards=tuple(EntryFailures.from_dict(entry) for entry in data["failed_guards"]),
            limit=RecompileLimit.from_dict(limit) if limit is not None else None,
            thread=data["thread"],
        )


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
    def failures(self) -> list[GuardFailure]:
        """Every guard failure of every compile, in order."""
        return [failure for record in self.records for failure in record.failures]

    @property
    def break_line(self) -> str | None:
        """For a resume function, the source of the line whose graph break it resumes after.

        dynamo calls a resume function from that very line, so its compiles were triggered there."""
        lines = (
            record.triggered_by.line
            for record in self.records
            if record.triggered_by is not None
            and (record.triggered_by.filename, record.triggered_by.lineno) == (self.filename, self.resumed_at)
        )
        found = next((line for line in lines if line), None) if self.resumed_at is not None else None
        return without_comment(found) if found else None

    @property
    def remedies(self) -> list[str]:
        refused = self.limit_hit
        limit = refused.limit.limit_type if refused is not None and refused.limit else None
        return suggest_remedies(self.failures, limit, self.resumed_at, self.break_line)

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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FunctionCompiles:
        """The compiles :meth:`to_dict` wrote. Everything else it writes (``compiles``, ``recompiles``,
        ``limit_hit``, ``remedies``) follows from the records again, which read back whole: the
        object read back equals the one written."""
        code = {key: data[key] for key in ("function", "filename", "firstlineno", "resumed_at")}
        return cls(**code, records=[CompileRecord.from_dict(record, **code) for record in data["records"]])


__all__ = ["CompileRecord", "DistinctFailure", "EntryFailures", "FunctionCompiles", "distinct_failures"]
