"""The capture's event log: one typed record per line of ``events.jsonl``.

The capture process writes each event the moment it happens, flushed
(:meth:`minifier.capture.recorder.Recorder.event`), so whatever it saw survives a
segfault or an abort that takes the process down mid-run. Two readers take the log
back: the bisection while the program still runs (``EarlyStages`` in
:mod:`minifier.bisect.steps`), and :func:`minifier.capture.result.read_capture` once it
has ended. Both read it through :func:`parse_events`.

Each event is a frozen dataclass named by its ``NAME``; :func:`to_line` writes one
as a JSON object with that name under ``"event"``. A ``failure`` field holds a
:class:`~pt2kit.signature.Signature`, written as its JSON. A line a crash cut
short, or one of a kind this pt2kit does not know, is skipped on reading.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from pt2kit.signature import Signature


@dataclass(frozen=True)
class GraphSaved:
    """A dynamo graph reached the backend and was saved as a repro."""

    NAME: ClassVar[str] = "graph"
    index: int
    path: str
    frame: dict[str, Any] | None = None
    nodes: int = 0
    backend: str = ""
    roots: list[str] = dataclasses.field(default_factory=list)  # sys.path entries of the user modules it imports


@dataclass(frozen=True)
class GraphNotSaved:
    """A dynamo graph pt2kit could not write as a repro (its own limit: the program runs on as without pt2kit)."""

    NAME: ClassVar[str] = "graph_not_saved"
    index: int
    error: str


@dataclass(frozen=True)
class AotGraphSaved:
    """An aot graph was compiled (``path``), saved again with its real inputs (``real``), or failed to compile."""

    NAME: ClassVar[str] = "aot_graph"
    owner: int  # the dynamo graph's index
    kind: str
    path: str | None  # None: it could not be saved (``error``)
    real: bool = False
    failure: Signature | None = None
    error: str | None = None


@dataclass(frozen=True)
class AotInputsNotSaved:
    """An aot graph's real inputs were too large to keep: its repro keeps random ones."""

    NAME: ClassVar[str] = "aot_inputs"
    path: str | None
    saved: bool
    bytes: int


@dataclass(frozen=True)
class Running:
    """A compiled graph's first run started (a crash leaves it without :class:`Ran`)."""

    NAME: ClassVar[str] = "running"
    graph: str


@dataclass(frozen=True)
class Ran:
    """A compiled graph's first run returned."""

    NAME: ClassVar[str] = "ran"
    graph: str


@dataclass(frozen=True)
class Judged:
    """``--accuracy``: the verdict on an aot graph's first compiled run (``failure`` None: right), or no verdict (``error``)."""

    NAME: ClassVar[str] = "judged"
    graph: str
    failure: Signature | None = None
    details: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Patches:
    """The program's patches of torch, and whether a repro can carry them."""

    NAME: ClassVar[str] = "patches"
    patches: dict[str, str]
    carried: bool


@dataclass(frozen=True)
class StateMissing:
    """Changes to torch's compiler tables no repro can carry."""

    NAME: ClassVar[str] = "state_missing"
    entries: list[str]


@dataclass(frozen=True)
class Unrecoverable:
    """A backend that cannot be written into a repro."""

    NAME: ClassVar[str] = "unrecoverable"
    index: int
    message: str


@dataclass(frozen=True)
class FrameLifted:
    """A frame dynamo failed to trace, lifted to a graph (``path``), or not (``error``)."""

    NAME: ClassVar[str] = "frame"
    path: str | None
    nodes: int = 0
    error: str | None = None


@dataclass(frozen=True)
class Failed:
    """The program failed: its signature, where (``"tracing"``: inside dynamo), and in which graph and kernel."""

    NAME: ClassVar[str] = "failed"
    failure: Signature
    details: str = ""
    graphs: int = 0  # graphs captured before the failure
    where: str | None = None
    traceback: str = ""
    frame: dict[str, Any] | None = None
    graph: str | None = None
    kernel: str | None = None
    #: raised while dynamo traced compiled autograd's backward graph (the frame is that graph's ``forward``)
    compiled_autograd: bool = False
    #: raised while dynamo compiled a frame, past its tracing (building its guards): no graph's run
    compiling_frame: bool = False


@dataclass(frozen=True)
class Exited:
    """The program called ``sys.exit`` with a failing status."""

    NAME: ClassVar[str] = "exit"
    code: str
    graphs: int = 0


@dataclass(frozen=True)
class Finished:
    """The program ran to the end."""

    NAME: ClassVar[str] = "finished"
    graphs: int = 0


@dataclass(frozen=True)
class UnknownBackendNamed:
    """The program named a backend torch does not know."""

    NAME: ClassVar[str] = "unknown_backend"
    message: str


Event = (
    GraphSaved | GraphNotSaved | AotGraphSaved | AotInputsNotSaved | Running | Ran | Judged | Patches | StateMissing
    | Unrecoverable | FrameLifted | Failed | Exited | Finished | UnknownBackendNamed
)  # fmt: skip
KINDS: dict[str, type[Any]] = {kind.NAME: kind for kind in Event.__args__}


def to_line(event: Event) -> str:
    """One line of the log: the event as a JSON object, its kind under ``"event"``."""
    data: dict[str, Any] = {"event": event.NAME}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        data[f.name] = value.to_json() if isinstance(value, Signature) else value
    return json.dumps(data, default=str) + "\n"


def parse_event(line: str | bytes) -> Event | None:
    """The event on one line of the log; None for a line cut short, or a kind or shape this pt2kit does not know."""
    try:
        data = json.loads(line)
        kind = KINDS[data.pop("event")]
        if data.get("failure") is not None:
            data["failure"] = Signature.from_json(data["failure"])
        return kind(**{f.name: data[f.name] for f in dataclasses.fields(kind) if f.name in data})
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def parse_events(lines: Iterable[str | bytes]) -> list[Event]:
    """The events among an event log's ``lines``, in order."""
    return [event for event in map(parse_event, lines) if event is not None]
