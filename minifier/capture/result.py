"""What a capture run saw, read back from its event log: :class:`CaptureResult`, :func:`read_capture`.

The capture process (:mod:`minifier.capture.recorder`) writes one event per line as it
goes (:mod:`minifier.capture.events`: a graph saved, an aot graph compiled or run, the
program's failure, the kernel it failed in, a verdict on a compiled graph's accuracy),
so whatever it saw survives a segfault or an abort that takes the process down
mid-run. :func:`read_capture` assembles those events, with the way the process ended,
into one result.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import blame
from .events import (
    AotGraphSaved, Event, Exited, Failed, FrameLifted, GraphNotSaved, GraphSaved, Judged, Patches, Ran, Running, StateMissing,
    UnknownBackendNamed, Unrecoverable, parse_events,
)  # fmt: skip
from ..unit.case import GraphId
from pt2kit.script import STACK_LINE
from pt2kit.signature import Failure, Kind, Signature


#: Compiles of one frame that make a program one that keeps recompiling: a first compile, then
#: one with the sizes that changed dynamic (automatic dynamic), then one more.
RECOMPILING = 3


@dataclass
class CaptureResult:
    """What a capture run saw: the graphs (as saved repros) and how the program ended."""

    graph_paths: list[Path]
    failure: Failure | None  # None: the program ran to the end
    failure_frame: dict[str, Any] | None = None  # user frame of a failure in dynamo's tracing
    failed_in_compiled_autograd: bool = False  # the failure came through compiled autograd's backward graph
    raised_in: str | None = None  # the innermost torch frame of the failure's traceback (:func:`raised_in`)
    compiling_frame: bool = False  # raised while dynamo compiled a frame, past its tracing (building its guards)
    graphs_at_failure: int = 0  # graphs captured before the failure
    unknown_backend: str | None = None
    unrecoverable: list[str] = field(default_factory=list)  # backends that cannot be written into a repro
    roots: list[str] = field(default_factory=list)  # sys.path entries of the user modules the graphs import
    patches: dict[str, str] = field(default_factory=dict)  # torch targets the script replaced -> its function
    patches_carried: bool = True
    state_missing: list[str] = field(default_factory=list)  # changes to torch's compiler tables no repro can carry
    aot: dict[int, list[AotGraphSaved]] = field(default_factory=dict)  # dynamo graph -> its aot graphs as compiled
    failed_graph: str | None = None  # the graph the program failed in ("g0", "g0.backward"), when known
    ran: set[str] = field(default_factory=set)  # graphs whose first run returned
    rank: int | None = None  # a distributed job: the rank this is
    ranks: dict[int, str] = field(default_factory=dict)  # a distributed job: how each rank ended
    frame_paths: list[Path] = field(default_factory=list)  # a frame dynamo failed to trace, lifted to graphs
    lift_errors: list[str] = field(default_factory=list)  # why each way of lifting it failed
    events: list[Event] = field(default_factory=list)
    early: Any = None  # the queries asked while the program ran (minifier.bisect.steps.EarlyStages)
    kernel: str | None = None  # the Inductor kernel the program failed in, when it says (minifier.capture.blame)
    # --accuracy: aot graph ("g0.forward") -> its first run's verdict
    judged: dict[str, Failure | None] = field(default_factory=dict)
    #: dynamo graph index -> why pt2kit could not save it as a repro (the program compiled it all the same)
    not_saved: dict[int, str] = field(default_factory=dict)

    def most_compiled_frame(self) -> tuple[str, int] | None:
        """The user frame the program compiled most often, as ``"name (file:line)"`` and its count.

        Each compile of one frame saves a graph under that frame (a graph break's resume is a
        frame of its own): a frame compiled :data:`RECOMPILING` times or more is a program that
        keeps recompiling, whatever else it does. ``None`` below that.
        """
        counts = Counter(
            f"{frame.get('name')} ({Path(str(frame.get('filename'))).name}:{frame.get('lineno')})"
            for e in {e.path: e for e in self.events if isinstance(e, GraphSaved)}.values()  # (each graph once)
            if (frame := e.frame)
        )
        if not counts:
            return None
        where, count = counts.most_common(1)[0]
        return (where, count) if count >= RECOMPILING else None

    def recompiling_hint(self, script: str) -> str:
        """What a verdict of "nothing fails" adds for a program that keeps recompiling (:meth:`most_compiled_frame`), or ""."""
        recompiled = self.most_compiled_frame()
        if recompiled is None:
            return ""
        return f"; {recompiled[0]} was compiled {recompiled[1]} times: `python -m explain {script}` says why it recompiles"

    def failing_aot_graphs(self, accuracy: object) -> list[str]:
        """The aot graphs the program failed in (``"g2.inference"``): the one it raised in, else (with ``accuracy``)
        those of a graph pt2kit could not save whose first run was judged wrong. Each stands for its dynamo graph
        where pt2kit has none to rebuild."""
        failed = self.failed_id
        if failed is not None and failed.kind is not None and self.failed_graph is not None:
            return [self.failed_graph]
        judged = [label for label, wrong in self.judged.items() if wrong is not None] if accuracy else []
        return [label for label in judged if GraphId.parse(label).index in self.not_saved]

    def said_not_saved(self) -> str:
        """``g0: why; g2: why``, for each graph pt2kit could not save."""
        return "; ".join(f"{GraphId(index)}: {why}" for index, why in self.not_saved.items())

    @property
    def failed_id(self) -> GraphId | None:
        """The graph the program failed in, when the capture knows it and it is one pt2kit saved
        (not one it could not name: ``failed_graph`` is then its label, ``"a forward graph"``)."""
        try:
            return GraphId.parse(self.failed_graph) if self.failed_graph else None
        except ValueError:
            return None


def read_capture(out_dir: Path, crash: Failure | None = None) -> CaptureResult:
    """Assemble a :class:`CaptureResult` from a capture run's event log."""
    log = out_dir / "events.jsonl"
    events = parse_events(log.read_text().splitlines()) if log.exists() else []
    saved = list({e.path: e for e in events if isinstance(e, GraphSaved)}.values())  # (a graph saved again: one)
    paths = [Path(e.path) for e in saved]
    roots = list(dict.fromkeys(root for e in saved for root in e.roots))
    result = CaptureResult(graph_paths=paths, failure=None, events=events, graphs_at_failure=len(paths), roots=roots)
    running: list[str] = []
    for e in events:
        if isinstance(e, Failed):
            result.failure = Failure(e.failure, e.details)
            result.failure_frame = e.frame
            result.failed_in_compiled_autograd = e.compiled_autograd
            result.raised_in, result.compiling_frame = raised_in(e.traceback), e.compiling_frame
            result.graphs_at_failure = e.graphs
            result.failed_graph = e.graph or result.failed_graph
            result.kernel = e.kernel or blame.kernel_in_trail(out_dir / blame.TRAIL)
        elif isinstance(e, Exited):
            result.failure = Failure(Signature(Kind.RUNTIME_ERROR, "SystemExit", f"exit status {e.code}"))
        elif isinstance(e, UnknownBackendNamed):
            result.unknown_backend = e.message
        elif isinstance(e, AotGraphSaved) and e.path:
            graphs = result.aot.setdefault(e.owner, [])
            known = [k for k, g in enumerate(graphs) if g.path == e.path]
            if known:  # its latest version (with real inputs)
                graphs[known[0]] = dataclasses.replace(e, failure=e.failure or graphs[known[0]].failure)
            else:
                graphs.append(e)
            if e.failure:
                result.failed_graph = Path(e.path).parent.name
        elif isinstance(e, Running):
            running.append(e.graph)
        elif isinstance(e, Ran) and e.graph in running:
            running.remove(e.graph)
            result.ran.add(e.graph)
        elif isinstance(e, Patches):
            result.patches, result.patches_carried = e.patches, e.carried
        elif isinstance(e, StateMissing):
            result.state_missing = e.entries
        elif isinstance(e, Unrecoverable) and e.message not in result.unrecoverable:
            result.unrecoverable.append(e.message)
        elif isinstance(e, Judged) and e.error is None:
            result.judged[e.graph] = Failure(e.failure, e.details) if e.failure else None
        elif isinstance(e, FrameLifted) and e.path:
            result.frame_paths.append(Path(e.path))
        elif isinstance(e, FrameLifted) and e.error:
            result.lift_errors.append(e.error)
        elif isinstance(e, GraphNotSaved) and not any(isinstance(g, GraphSaved) and g.index == e.index for g in saved):
            result.not_saved[e.index] = e.error
    if crash is not None and result.failure is None:
        result.failure, result.kernel = crash, blame.kernel_in_trail(out_dir / blame.TRAIL)
    if result.failure is not None and result.failed_graph is None and running:
        result.failed_graph = running[-1]  # a first run that never returned: a crash or a hang
    return result


def raised_in(traceback: str) -> str | None:
    """Where in torch a traceback ends: ``torch/_dynamo/backends/distributed.py:466, in __init__``, or None."""
    frames = [m for m in STACK_LINE.finditer(traceback) if "/torch/" in m["filename"]]
    if not frames:
        return None
    last = frames[-1]
    return f"torch/{last['filename'].rpartition('/torch/')[2]}:{last['lineno']}, in {last['name']}"
