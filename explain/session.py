"""``explain.explain(fn, *args)``: the graphs and graph breaks of one call, as an :class:`ExplainReport`.

An explanation is a list of frame compiles (:class:`explain.hooks.FrameCompile`) turned into
what a user asks about: the graphs dynamo captured (ops, guards, compile time) and the places
it broke them (line, reason, remedy). Two things produce those frame compiles:

- :func:`explain` runs the function once under :class:`explain.isolation.IsolatedAnalysis`,
  listening *privately* on its thread, so neither the user's caches nor a user's armed
  :class:`~explain.RecompileProfiler` notice the analysis;
- ``python -m explain SCRIPT`` listens publicly while the script runs and reports the
  script's own compiles (:class:`Collector` is shared by both).

Like ``torch._dynamo.explain``, :func:`explain` really runs ``fn`` (once, compiled), so its
side effects happen; unlike it, the report counts every op and break, and nothing is reset.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from pt2kit.seams.convert_frame import original_callable

from . import hooks
from .breaks import GraphBreak, merge_breaks
from .graphs import CapturedGraph
from .hooks import FrameCompile
from .isolation import IsolatedAnalysis, Isolation
from .recompiles import RecompileReport
from .report import explain_renderable, to_text


@dataclasses.dataclass
class ExplainReport:
    """The graphs and graph breaks of a run, and how they were obtained."""

    target: str
    graphs: list[CapturedGraph]
    breaks: list[GraphBreak]
    isolation: Isolation
    recompiles: Any = None
    """For ``python -m explain``: the :class:`~explain.RecompileProfiler` that watched the script (read back
    from JSON: a :class:`~explain.recompiles.RecompileReport` of what it recorded)."""
    error: str | None = None
    """For ``python -m explain``: the exception the script ended with, if any."""

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def compile_seconds(self) -> float:
        return sum(graph.compile_seconds for graph in self.graphs)

    @classmethod
    def from_frames(cls, target: str, frames: list[FrameCompile], isolation: Isolation) -> ExplainReport:
        ordered = sorted(frames, key=lambda frame: frame.sequence)
        graphs = [
            CapturedGraph(
                index=0,
                compile_id=frame.compile_id,
                function=frame.function,
                filename=frame.filename,
                firstlineno=frame.firstlineno,
                resumed_at=frame.resumed_at,
                summary=summary,
                guards=tuple(frame.guards),
                compile_seconds=frame.seconds,
                backend_seconds=frame.backend_seconds,
            )
            for frame in ordered
            if frame.outcome == "compiled"  # a compile that failed, or ran eagerly, installed no graph
            for summary in frame.graphs
        ]
        graphs = [dataclasses.replace(graph, index=index) for index, graph in enumerate(graphs)]
        breaks = merge_breaks(brk for frame in ordered for brk in frame.breaks)
        return cls(target=target, graphs=graphs, breaks=breaks, isolation=isolation)

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "target": self.target,
            "graph_count": self.graph_count,
            "break_count": self.break_count,
            "compile_seconds": self.compile_seconds,
            "graphs": [graph.to_dict() for graph in self.graphs],
            "breaks": [brk.to_dict() for brk in self.breaks],
            "isolation": self.isolation.to_dict(),
        }
        if self.recompiles is not None:
            data["recompiles"] = self.recompiles.to_dict()
        if self.error is not None:
            data["error"] = self.error
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExplainReport:
        """The report :meth:`to_dict` wrote. ``graph_count``, ``break_count`` and ``compile_seconds`` follow
        from the graphs and breaks again (the JSON keeps every float exactly); ``recompiles`` is read as a
        :class:`~explain.recompiles.RecompileReport`. Without recompiles, the report read back equals
        the one written."""
        recompiles = data.get("recompiles")
        return cls(
            target=data["target"],
            graphs=[CapturedGraph.from_dict(graph) for graph in data["graphs"]],
            breaks=[GraphBreak.from_dict(brk) for brk in data["breaks"]],
            isolation=Isolation.from_dict(data["isolation"]),
            recompiles=RecompileReport.from_dict(recompiles) if recompiles is not None else None,
            error=data.get("error"),
        )

    @classmethod
    def from_json(cls, text: str) -> ExplainReport:
        """:meth:`from_dict` of the JSON text :meth:`to_json` wrote."""
        return cls.from_dict(json.loads(text))

    def __rich__(self) -> Any:
        return explain_renderable(self)

    def __str__(self) -> str:
        return to_text(explain_renderable(self))


class Collector:
    """A compile listener that keeps every frame compile it is given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frames: list[FrameCompile] = []

    def frame_compiled(self, frame: FrameCompile) -> None:
        with self._lock:
            self._frames.append(frame)

    @property
    def frames(self) -> list[FrameCompile]:
        with self._lock:
            return list(self._frames)


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ExplainReport:
    """Compile and run ``fn(*args, **kwargs)`` once; report its graphs and graph breaks.

    ``fn`` may be a plain function, an ``nn.Module`` or something ``torch.compile`` already
    returned (its original function is analysed). The user's compiled state is left as it
    was: see :mod:`explain.isolation` and the report's ``isolation`` field.
    """
    target = original_callable(fn)  # analyse the user's function, not dynamo's wrapper of it
    collector = Collector()
    with IsolatedAnalysis() as analysis:
        try:
            with hooks.privately(collector):
                analysis.compile(target)(*args, **kwargs)
        finally:
            analysis.release(frame.code for frame in collector.frames)
    return ExplainReport.from_frames(_describe_target(target), collector.frames, analysis.describe())


def _describe_target(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code is not None else name


__all__ = ["explain", "ExplainReport", "CapturedGraph", "Collector"]
