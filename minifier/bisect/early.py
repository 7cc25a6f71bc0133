"""The stages of the graphs a program has saved so far, asked while the program still runs.

The program runs on one core; once pt2kit's worker is warm, the other core is idle until
the program ends. :class:`EarlyStages` fills it with the stage queries the bisection
(:mod:`minifier.bisect.steps`) would ask anyway, then hands their answers over.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .implied import VOUCHING, voucher
from ..capture.events import AotGraphSaved, Event, GraphSaved, Ran, parse_events
from ..capture.result import CaptureResult
from ..isolation.executor import Handle
from ..isolation.session import Session
from ..repro.files import load_repro
from ..stages.run import Outcome, run_case, stages_for
from ..unit.case import Boundary, GraphCase
from pt2kit.errors import plural

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


class EarlyStages:
    """The stages of each graph the program has saved so far, run while the program still runs.

    The program runs on one core; once pt2kit's worker is warm, the other core is
    idle until the program ends. Every query the bisection asks anyway and that does
    not wait on the program's own verdict can run there, one at a time, in this
    order: each dynamo graph's eager stages as soon as it is saved (the costliest, ``aot_eager_decomp_partition``,
    first); each aot graph's eager stage once its file holds its real inputs (or its compile failed); then
    the final stage of a dynamo graph whose first run returned. The final stage of
    the graph a program crashes in is left alone: the program is about to answer it
    (:func:`minifier.bisect.culprit.seen_in_the_program`), and compiling a whole graph twice
    is what a run should not pay for. (With ``--accuracy`` neither runs early: the
    capture judges the program's own compiled runs, and runs each aot graph eagerly.)

    When the program ends (:meth:`finish`), the eager stages still queued go out in
    one batch over every core, beside the query still running: the dynamo graphs', and
    the aot graph the program failed in (or, with ``--accuracy``, was judged wrong: its
    eager stage is not asked, since the judge ran it eagerly already). The query still
    running goes on beside the bisection's next batch, which then settles it
    (:meth:`settle`). :attr:`outcomes` holds the answers by graph file and stage.

    ``imply`` (a minification of a crash): a stage that a higher one vouches for is not
    asked at all here; its answer is an implied pass, asked once the repro is ready
    (:mod:`minifier.bisect.implied`); one still running when the program's answer implies
    it is stopped.
    """

    def __init__(
        self,
        session: Session,
        events: Path,
        *,
        accuracy: Accuracy,
        roots: list[str],
        imply: bool = False,
    ) -> None:
        self.session, self.events, self.accuracy, self.roots, self.imply = session, events, accuracy, roots, imply
        self._read = 0
        self._partial = b""
        self._cheap: list[tuple[str, GraphCase, str]] = []  # (graph file, case, stage), in the order saved
        self._final: list[tuple[str, GraphCase, str]] = []
        self._dynamo: dict[str, tuple[str, GraphCase]] = {}  # label (g0) -> its file and case
        # (graph file, stage, handle, the version asked about)
        self._running: list[tuple[str, str, Any, GraphCase]] = []
        self.outcomes: dict[str, dict[str, Outcome]] = {}
        self.cases: dict[str, GraphCase] = {}  # graph file -> the case read from it (the bisection reads no file twice)
        self.profiled: dict[str, Handle] = {}  # graph file -> its profile, started in :meth:`finish`
        self._compile_failed: dict[int, str] = {}  # dynamo graph index -> its aot graph whose compile failed

    def poll(self) -> None:
        """Take in new events and finished queries; start the next query if none runs."""
        self.session.worker.poll(0.2)
        self._collect()
        for event in self._new_events():
            self._on_event(event)
        self._cheap = [e for e in self._cheap if not self._vouched(*e)]
        early = [e for e in self._cheap if not (self.accuracy and e[1].boundary == Boundary.AOT)]
        if not self._running and (early or self._final):
            path, case, stage = entry = (early or self._final)[0]
            (self._cheap if early else self._final).remove(entry)
            label = f"{case.label()} ({plural(case.node_count, 'node')}) through {stage}, while the program runs"
            query = functools.partial(run_case, case, stage, accuracy=self.accuracy)
            handle = self.session.start(query, label)
            self._running.append((path, stage, handle, case))

    def finish(self, captured: CaptureResult, *, profile: bool = False) -> None:
        """The program ended: the eager stages still queued that the bisection needs, in one batch now
        (with ``profile``, the profile of the aot graph the program failed in is started beside them, and
        left running: :attr:`profiled`)."""
        self._collect()
        for event in self._new_events():  # (what the program logged after the last poll)
            self._on_event(event)
        failed = {captured.failed_graph, *(label for label, verdict in captured.judged.items() if verdict is not None)}
        for entry in [e for e in self._running if self._vouched(e[0], e[3], e[1])]:
            self.session.stop([entry[2]])  # (implied now: asked again once the repro is ready)
            self._running.remove(entry)
        failing = (
            next(
                (
                    path
                    for path, case in self.cases.items()
                    if case.boundary == Boundary.AOT and Path(path).parent.name in failed
                ),
                None,
            )
            if profile
            else None
        )
        if failing is not None:  # (started, not waited for: the bisection reads its graphs meanwhile)
            from ..stages.profile import profile_or_why

            values = self.session.run_dir / "work" / "values.pt"
            values.parent.mkdir(parents=True, exist_ok=True)
            profiling = functools.partial(profile_or_why, self.cases[failing], values)
            self.profiled[failing] = self.session.start(profiling, "profiling the graph (one eager run)")
        self._await_vouchers()
        wanted = [
            (path, case, stage)
            for path, case, stage in self._cheap
            if (case.boundary == Boundary.DYNAMO or Path(path).parent.name in failed)
            and not self._vouched(path, case, stage)
        ]
        for path, case, stage in [
            w for w in wanted if w[1].boundary == Boundary.AOT and Path(w[0]).parent.name in captured.judged
        ]:
            # The judge ran this graph eagerly, and in fp64, without error, and an eager
            # run is its own reference: the isolated query could only say "pass".
            self.outcomes.setdefault(path, {})[stage] = Outcome(stage, None, 0.0)
            wanted.remove((path, case, stage))
        self._cheap.clear()
        self._final.clear()
        queries: list[tuple[Callable[[], Any], str]] = [
            (
                functools.partial(run_case, case, stage, accuracy=self.accuracy),
                f"{case.label()} ({plural(case.node_count, 'node')}) through {stage}",
            )
            for _, case, stage in wanted
        ]
        alongside = [handle for _, _, handle, _ in self._running] + list(self.profiled.values())
        results = self.session.query_all(queries, alongside=alongside) if queries else []
        for (path, _, stage), result in zip(wanted, results):
            if result is not None:
                self.outcomes.setdefault(path, {})[stage] = Outcome.of_query(stage, result)

    def _await_vouchers(self) -> None:
        """With ``imply``: wait for a running query of the vouching stage whose graph has lower stages still
        queued (its own, or those of the aot graphs lowered from it). Started first, it ends first; its pass spares
        them (queries on every core, beside it) until the repro is ready; only its failure costs the wait."""
        queued = {case.graph_id.owner for _, case, _ in self._cheap}
        vouching = [
            h
            for _, stage, h, case in self._running
            if self.imply and stage == VOUCHING and case.boundary == Boundary.DYNAMO and case.graph_id in queued
        ]
        if vouching:
            self._wait_for(vouching)

    def _vouched(self, path: str, case: GraphCase, stage: str) -> bool:
        """With ``imply``: does a higher stage vouch for this one (:func:`~minifier.bisect.implied.voucher`)? Its
        implied pass is then the answer, and the query is not asked before the reduction."""
        if not self.imply:
            return False
        owner = next(
            (
                self.outcomes.get(p, {})
                for p, c in self.cases.items()
                if c.boundary == Boundary.DYNAMO and c.graph_id == case.graph_id.owner
            ),
            {},
        )
        by = voucher(case, stage, self.outcomes.get(path, {}), owner, self._compile_failed.get(case.graph_id.index))
        if by is not None:
            self.outcomes.setdefault(path, {})[stage] = Outcome(stage, None, 0.0, implied_by=by)
        return by is not None

    def running(self) -> dict[tuple[str, str], Any]:
        """The queries still running, by (graph file, stage)."""
        return {(path, stage): handle for path, stage, handle, _ in self._running}

    def settle(self) -> dict[str, dict[str, Outcome]]:
        """Wait for the queries still running; every outcome, by graph file and stage."""
        self._wait_for([handle for _, _, handle, _ in self._running])
        return self.outcomes

    def _wait_for(self, handles: list[Any]) -> None:
        """Wait for these running queries, then take in every finished one's answer."""
        if handles:
            self.session.worker.wait(handles, on_wait=self.session.progress.tick)
        self._collect()

    def _collect(self) -> None:
        for entry in [e for e in self._running if e[2].done]:
            self._running.remove(entry)
            path, stage, handle, asked = entry
            if asked is not self.cases.get(path):
                continue  # (about a version of the graph saved again since: asked again)
            try:
                result = handle.result()
            except Exception:  # noqa: BLE001 - left to the bisection's batch, which reports it
                continue
            self.session.mark(handle.label, result.seconds, ago=result.ended_ago)
            self.outcomes.setdefault(path, {})[stage] = Outcome.of_query(stage, result)

    def _new_events(self) -> list[Event]:
        try:
            with open(self.events, "rb") as log:
                log.seek(self._read)
                chunk = log.read()
        except OSError:
            return []
        self._read += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return parse_events(lines)

    def _on_event(self, event: Event) -> None:
        if isinstance(event, AotGraphSaved) and event.failure is not None and event.path:
            self._compile_failed[event.owner] = Path(event.path).parent.name
        if isinstance(event, Ran) and event.graph in self._dynamo:
            path, case = self._dynamo.pop(event.graph)
            if not self.accuracy:  # (with --accuracy the capture judges the program's own run instead)
                self._final.append((path, case, stages_for(case)[-1]))
            return
        final_version = isinstance(event, GraphSaved) or (
            isinstance(event, AotGraphSaved) and (event.real or event.failure)
        )
        if not final_version or not isinstance(event, (GraphSaved, AotGraphSaved)) or not event.path:
            return
        path = event.path
        if path in self.cases:  # saved again, on a later call's inputs: what the old version answered no longer holds
            self.outcomes.pop(path, None)
            self._cheap = [e for e in self._cheap if e[0] != path]
            self._final = [e for e in self._final if e[0] != path]
        roots = event.roots if isinstance(event, GraphSaved) else []
        sys.path.extend(root for root in [*self.roots, *roots] if root not in sys.path)
        try:
            case = self.cases[path] = load_repro(Path(path)).case
        except Exception:  # noqa: BLE001 - the bisection reads every graph again and says what is wrong
            return
        stages = stages_for(case)
        # the costliest first: started early, it ends soonest; the cheap ones fill the cores once the program ends
        self._cheap.extend((path, case, stage) for stage in reversed(stages[:-1]))
        if isinstance(event, GraphSaved):
            self._dynamo[case.label()] = (path, case)
