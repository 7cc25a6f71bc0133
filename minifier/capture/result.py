"""What a capture run saw, read back from its event log: :class:`CaptureResult`, :func:`read_capture`.

The capture process (:mod:`minifier.capture.recorder`) writes one JSON line per event as it
goes (a graph saved, an aot graph compiled or run, the program's failure, the kernel
it failed in, a verdict on a compiled graph's accuracy), so whatever it saw survives
a segfault or an abort that takes the process down mid-run. :func:`read_capture`
assembles those lines, with the way the process ended, into one result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import blame
from ..unit.signature import Failure, Signature


@dataclass
class CaptureResult:
    """What a capture run saw: the graphs (as saved repros) and how the program ended."""

    graph_paths: list[Path]
    failure: Failure | None  # None: the program ran to the end
    failure_frame: dict[str, Any] | None = None  # user frame of a failure in dynamo's tracing
    graphs_at_failure: int = 0  # graphs captured before the failure
    unknown_backend: str | None = None
    unrecoverable: list[str] = field(default_factory=list)  # backends that cannot be written into a repro
    roots: list[str] = field(default_factory=list)  # sys.path entries of the user modules the graphs import
    patches: dict[str, str] = field(default_factory=dict)  # torch targets the script replaced -> its function
    patches_carried: bool = True
    state_missing: list[str] = field(default_factory=list)  # changes to torch's compiler tables no repro can carry
    aot: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # dynamo graph -> its aot graphs as compiled
    failed_graph: str | None = None  # the graph the program failed in ("g0", "g0.backward"), when known
    ran: set[str] = field(default_factory=set)  # graphs whose first run returned
    rank: int | None = None  # a distributed job: the rank this is
    ranks: dict[int, str] = field(default_factory=dict)  # a distributed job: how each rank ended
    frame_path: Path | None = None  # a frame dynamo failed to trace, lifted to a graph
    events: list[dict[str, Any]] = field(default_factory=list)
    early: Any = None  # the queries asked while the program ran (minifier.bisect.steps.EarlyStages)
    kernel: str | None = None  # the Inductor kernel the program failed in, when it says (minifier.capture.blame)
    judged: dict[str, Failure | None] = field(default_factory=dict)  # --accuracy: aot graph ("g0.forward") -> its first run's verdict


def parse_events(lines: Iterable[str | bytes]) -> list[dict[str, Any]]:
    """The events among an event log's ``lines``; a line cut short by a crash is skipped."""
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def read_capture(out_dir: Path, crash: Failure | None = None) -> CaptureResult:
    """Assemble a :class:`CaptureResult` from a capture run's event log."""
    log = out_dir / "events.jsonl"
    events = parse_events(log.read_text().splitlines()) if log.exists() else []
    paths = [Path(e["path"]) for e in events if e["event"] == "graph"]
    roots = list(dict.fromkeys(root for e in events if e["event"] == "graph" for root in e.get("roots", ())))
    result = CaptureResult(graph_paths=paths, failure=None, events=events, graphs_at_failure=len(paths), roots=roots)
    running: list[str] = []
    for e in events:
        if e["event"] == "failed":
            result.failure = Failure(Signature.from_json(e["failure"]), e.get("details", ""))
            result.failure_frame = e.get("frame")
            result.graphs_at_failure = e.get("graphs", len(paths))
            result.failed_graph = e.get("graph") or result.failed_graph
            result.kernel = e.get("kernel") or blame.kernel_in_trail(out_dir / blame.TRAIL)
        elif e["event"] == "exit":
            result.failure = Failure(Signature("runtime_error", "SystemExit", f"exit status {e['code']}"))
        elif e["event"] == "unknown_backend":
            result.unknown_backend = e["message"]
        elif e["event"] == "aot_graph" and e.get("path"):
            graphs = result.aot.setdefault(e["owner"], [])
            known = [k for k, g in enumerate(graphs) if g["path"] == e["path"]]
            if known:  # its latest version (with real inputs)
                graphs[known[0]] = {**e, "failure": e.get("failure") or graphs[known[0]].get("failure")}
            else:
                graphs.append(e)
            if e.get("failure"):
                result.failed_graph = Path(e["path"]).parent.name
        elif e["event"] == "running":
            running.append(e["graph"])
        elif e["event"] == "ran" and e["graph"] in running:
            running.remove(e["graph"])
            result.ran.add(e["graph"])
        elif e["event"] == "patches":
            result.patches, result.patches_carried = e["patches"], e["carried"]
        elif e["event"] == "state_missing":
            result.state_missing = e["entries"]
        elif e["event"] == "unrecoverable" and e["message"] not in result.unrecoverable:
            result.unrecoverable.append(e["message"])
        elif e["event"] == "judged" and "failure" in e:
            result.judged[e["graph"]] = Failure(Signature.from_json(e["failure"]), e.get("details", "")) if e["failure"] else None
        elif e["event"] == "frame" and e.get("path"):
            result.frame_path = Path(e["path"])
    if crash is not None and result.failure is None:
        result.failure, result.kernel = crash, blame.kernel_in_trail(out_dir / blame.TRAIL)
    if result.failure is not None and result.failed_graph is None and running:
        result.failed_graph = running[-1]  # a first run that never returned: a crash or a hang
    return result
