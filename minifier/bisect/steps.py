"""The steps of a stage bisection: the program once under capture, then its graphs through their stages.

Each step runs something and returns what it saw; none of them chooses a culprit
(that is :mod:`minifier.bisect.culprit`):

- :func:`capture` runs the user's script as a fresh process with capture armed
  (:mod:`minifier.capture.recorder`), while pt2kit's worker warms up on the other core; a
  torchrun job runs every rank under capture (:func:`capture_ranks`) and the lowest
  failing rank is the one kept. How the program ended is the *original* failure
  the rest of the bisection looks for; :func:`read_capture_again` runs it once more
  when only a second run can tell a flaky failure.
- :func:`run_stages_of` turns graph cases into rows (:class:`~minifier.bisect.report.Row`).
  Every (case, stage) pair is one isolated query (:func:`run_each`, through the
  session's worker), all of them in one batch over the cores, each case's final
  stage first: it is usually the slow one and usually where the failure is, so the
  cheap eager stages run beside it. A batch can end as soon as some row fails with
  a wanted signature, and it skips outcomes already known (the program's own run
  of a graph through its final backend).
- :func:`aot_rows` does the same for aot graphs read back from their repro files;
  :func:`frame_row` stands for a frame that dynamo failed to turn into a graph.

A crash or a hang inside a query is an outcome like any other, a failure with a
signature (:mod:`minifier.isolation.worker` isolates it), never an exception here.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from .early import EarlyStages
from .report import Row, signature_of
from ..capture.events import Failed, parse_events
from ..capture.result import CaptureResult, read_capture
from ..unit.case import Boundary, GraphCase
from pt2kit.errors import CorruptRecord, UnknownBackend, plural
from ..repro.files import load_repro
from ..capture.program import ProgramRun
from ..isolation.session import Session
from pt2kit.signature import Failure, Kind, Signature
from ..stages.run import Outcome, run_case, stages_for
from ..stages import elsewhere, flaky
from ..isolation.worker import QueryResult

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


def capture(session: Session, program: ProgramRun, *, again: bool = False, profile: bool = False) -> CaptureResult:
    """Run the user's script once under capture, as a fresh process, and warm up meanwhile.

    The script runs on one core while pt2kit's worker warms up on the other, then
    runs the stages of the graphs saved so far there (:class:`~minifier.bisect.early.EarlyStages`). (The
    script may run for hours; hangs in compiled code are caught inside.) With
    ``nproc`` > 1 it is a distributed job: every rank runs under capture (see
    :func:`capture_ranks`), and the lowest failing rank is the one minified.
    ``profile`` (a minification follows): the aot graph the program failed in is profiled in the
    same batch as the last stages (:attr:`EarlyStages.profiled`), its repro's interpreter started.
    """
    script = program.script
    command, out, log = program.plan(session.run_dir, session.timeout, again=again)
    if not again:
        session.warm_up(inductor=program.warms_inductor, preload=[__name__])
    label = (
        f"running {script.name} again: checking it is not flaky"
        if again
        else f"running {script.name} with capture armed"
    )
    if program.nproc > 1:
        captured = capture_ranks(session, program, out, label)
    else:
        roots = [str(script.parent)]
        early = (
            None
            if again
            else EarlyStages(
                session,
                out / "events.jsonl",
                accuracy=program.accuracy,
                roots=roots,
                imply=profile and not program.accuracy,
            )
        )
        # (started already, when `minify run` could: see pt2kit.script.start_capture)
        ended = session.run_program(command, label, log=log, while_running=early.poll if early else None)
        captured = read_capture(out, ended)
        if profile and captured.failure is not None:
            elsewhere.get_ready_early(session, inductor=program.warms_inductor)
        if early is not None:
            early.finish(captured, profile=profile)
            captured.early = early
    if captured.unknown_backend:
        raise UnknownBackend(captured.unknown_backend)
    # The graphs import the user's modules as the script did: from its directory and
    # wherever those modules live (queries inherit this process's sys.path).
    sys.path.extend(p for p in (str(script.parent), *captured.roots) if p not in sys.path)
    return captured


def capture_ranks(session: Session, program: ProgramRun, out: Path, label: str) -> CaptureResult:
    """Every rank of the job under capture (``captured/rank<r>``); the lowest rank that failed is the result."""
    from ..stages.distributed import launch_ranks
    from pt2kit.signature import signature_of_crash, signature_of_exit
    from pt2kit.processes import pt2kit_env

    nproc = program.nproc
    outs = [out / f"rank{rank}" for rank in range(nproc)]
    commands = [program.command(o, session.timeout) for o in outs]
    logs = [session.run_dir / "logs" / f"{out.name}-rank{rank}.log" for rank in range(nproc)]
    session.progress.update(f"{label} ({nproc} ranks)")
    start = time.monotonic()
    codes = launch_ranks(
        commands, pt2kit_env(), logs, failed=lambda rank: _logged_failure(outs[rank]), on_wait=session.progress.tick
    )
    session.mark(f"{label} ({nproc} ranks)", time.monotonic() - start)
    results = []
    for o, code, log in zip(outs, codes, logs):
        tail = log.read_bytes()[-4000:].decode(errors="replace") if log.exists() else ""
        ended = (
            signature_of_crash(-code, tail)
            if code < 0 and code != -9
            else signature_of_exit(code, tail)
            if code > 0
            else None
        )
        results.append(read_capture(o, ended))
    failing = [rank for rank, r in enumerate(results) if r.failure is not None]
    chosen = results[failing[0]] if failing else results[0]
    chosen.rank = failing[0] if failing else 0
    chosen.ranks = {
        rank: (str(r.failure.signature) if r.failure else "ran to the end or was stopped")
        for rank, r in enumerate(results)
    }
    return chosen


def _logged_failure(out: Path) -> bool:
    try:
        return any(isinstance(e, Failed) for e in parse_events((out / "events.jsonl").read_text().splitlines()))
    except OSError:
        return False


def run_stages(session: Session, case: GraphCase, *, accuracy: Accuracy, path: Path | None = None) -> Row:
    """Run ``case`` through all its stages, side by side; the first failure in stage order counts."""
    return run_stages_of(session, [(case, path)], accuracy=accuracy)[0]


def run_stages_of(
    session: Session,
    cases: Sequence[tuple[GraphCase, Path | None]],
    *,
    accuracy: Accuracy,
    stop_at: Signature | None = None,
    known: dict[tuple[int, str], Outcome] | None = None,
    early: EarlyStages | None = None,
    hung: bool = False,
) -> list[Row]:
    """Rows for several cases, every (case, stage) query in one batch over the cores.

    ``hung``: the program itself ran out of time, so a stage that runs out of time too
    is what is looked for, and not asked again with a longer limit (:func:`run_each`).

    Each case's final stage goes first: it is usually the slow one (a real compile)
    and usually where the failure is, so the cheap eager stages run beside it. With
    ``stop_at``, the batch ends once some case's first failure has that signature
    (the stages of the rest are left unrun: their rows say so). ``known``: outcomes
    already seen, by ``(id(case), stage)`` (the program's own run of its final stage),
    which are not asked again. ``early``: queries started while the program ran; those
    still running keep their core, and are waited for after the batch.
    """
    known = {**(known or {}), **_early_outcomes(early, cases)}
    running = early.running() if early is not None else {}
    plan = [
        (case, stage)
        for case, path in cases
        for stage in reversed(stages_for(case))
        if (id(case), stage) not in known and (str(path), stage) not in running
    ]

    def found(results: list[QueryResult[Any] | None]) -> bool:
        done = {
            **known,
            **{
                key: Outcome.of_query(stage, result)
                for (case, stage), result in zip(plan, results)
                if result is not None
                for key in [(id(case), stage)]
            },
        }
        return any(
            signature_of(first) == stop_at for case, _ in cases if (first := _first_failure(case, done)) is not None
        )

    outcomes = {
        **known,
        **run_each(
            session,
            plan,
            accuracy=accuracy,
            enough=found if stop_at is not None else None,
            alongside=list(running.values()),
            longer=not hung and not (stop_at is not None and stop_at.kind == Kind.TIMEOUT),
        ),
    }
    if early is not None:
        early.settle()
        outcomes |= _early_outcomes(early, cases)
        # one that raised inside pt2kit is asked again here, where the error is reported
        outcomes |= run_each(
            session,
            [
                (case, stage)
                for case, path in cases
                for stage in stages_for(case)
                if (str(path), stage) in running and (id(case), stage) not in outcomes
            ],
            accuracy=accuracy,
        )
    rows = []
    for case, path in cases:
        label = case.label()
        if case.boundary == Boundary.AOT and path is not None and path.parent.name.startswith(label):
            label = path.parent.name  # (g0.inference2: the second inference graph of g0)
        row = Row(label, case.boundary, case.kind, case.node_count, case.frame, {}, case, path)
        for stage in stages_for(case):
            if (id(case), stage) in outcomes:
                row.outcomes[stage] = outcomes[(id(case), stage)]
        rows.append(row)
    return rows


def _early_outcomes(
    early: EarlyStages | None, cases: Sequence[tuple[GraphCase, Path | None]]
) -> dict[tuple[int, str], Outcome]:
    """The answers :class:`EarlyStages` has for ``cases``, by ``(id(case), stage)``."""
    if early is None:
        return {}
    return {
        (id(case), stage): outcome
        for case, path in cases
        for stage, outcome in early.outcomes.get(str(path), {}).items()
    }


def _first_failure(case: GraphCase, outcomes: dict[tuple[int, str], Outcome]) -> Outcome | None:
    """The first failing stage of a case, once every stage before it is known to pass."""
    for stage in stages_for(case):
        outcome = outcomes.get((id(case), stage))
        if outcome is None:
            return None
        if not outcome.passed:
            return outcome
    return None


def run_each(
    session: Session,
    plan: list[tuple[GraphCase, str]],
    *,
    accuracy: Accuracy,
    labels: list[str] | None = None,
    enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
    alongside: list[Any] | None = None,
    slots: int | None = None,
    longer: bool = True,
) -> dict[tuple[int, str], Outcome]:
    """Isolated queries, one per (case, stage); crashes and timeouts become outcomes (``alongside``: see :meth:`Session.query_all`).

    ``slots=1``: one after another, in ``plan``'s order (questions about a flaky failure,
    whose answers may depend on which compile reaches some state of the program's first).
    ``longer``: a query that runs out of time gets a second look with a longer limit
    (:func:`~minifier.stages.flaky.longer_look`).
    """
    queries = [
        (
            functools.partial(run_case, case, stage, accuracy=accuracy),
            labels[i] if labels else f"{case.label()} ({plural(case.node_count, 'node')}) through {stage}",
        )
        for i, (case, stage) in enumerate(plan)
    ]
    results = session.query_all(queries, enough=enough, alongside=alongside or (), slots=slots) if queries else []
    asked = [(fn, label, stage) for (fn, label), (_, stage) in zip(queries, plan)]
    outcomes = [None if r is None else Outcome.of_query(s, r) for (_, s), r in zip(plan, results)]
    outcomes = flaky.longer_look(session, asked, outcomes) if longer else outcomes
    return {(id(case), stage): outcome for (case, stage), outcome in zip(plan, outcomes) if outcome is not None}


def aot_rows(
    session: Session,
    paths: list[str],
    *,
    accuracy: Accuracy,
    stop_at: Signature | None,
    passed: set[str] | frozenset[str] = frozenset(),
    failed: dict[str, Failure] | None = None,
    early: EarlyStages | None = None,
) -> list[Row]:
    """Rows for aot graphs (captured, or written by a lowering), until one fails with ``stop_at``.

    ``passed``: graphs whose final stage the program's own run showed to pass (they ran
    without failing; with ``--accuracy``, their first run was judged right); it is not
    asked again.
    ``failed``: the graph the program failed to compile, and how; that final stage is
    not asked again either (the outcome says it was only seen in the program).
    ``early``: the queries asked while the program ran.
    """
    cases, unreadable = readable_cases([Path(p) for p in paths], early.cases if early is not None else None)
    for why in unreadable:  # (a constant or argument its repro cannot hold: the graph is not asked about)
        session.log(f"note: an aot graph pt2kit cannot read back is left out: {escape(why)}")
    failed = failed or {}
    known = {(id(case), case.backend): Outcome(case.backend, None, 0.0) for case, path in cases if str(path) in passed}
    known |= {
        (id(case), case.backend): Outcome(case.backend, failed[str(path)], 0.0, seen_in_program=True)
        for case, path in cases
        if str(path) in failed
    }
    return run_stages_of(session, cases, accuracy=accuracy, stop_at=stop_at, known=known, early=early)


def readable_cases(
    paths: list[Path], read: dict[str, GraphCase] | None = None
) -> tuple[list[tuple[GraphCase, Path]], list[str]]:
    """The captured graphs pt2kit can read back (``read``: those read already, by file); the others, named."""
    cases, unreadable = [], []
    for path in paths:
        try:
            cases.append(((read or {}).get(str(path)) or load_repro(path).case, path))
        except CorruptRecord as e:
            unreadable.append(f"{path.parent.name}: {e}")
    return cases, unreadable


def frame_row(session: Session, captured: CaptureResult, *, accuracy: Accuracy) -> Row:
    """The row of a frame that dynamo failed to turn into a graph: it fails at ``eager``.

    When capture could lift the frame to a graph (its torch calls, then the aten ops
    ``make_fx`` traces: :mod:`minifier.capture.frames`) that fails at ``eager`` with the
    program's signature, the first such graph stands for the frame and can be minified;
    otherwise the row has no graph.
    """
    assert captured.failure is not None
    frame, label = captured.failure_frame, f"frame {(captured.failure_frame or {}).get('name', '?')}"
    if (
        frame and captured.failed_in_compiled_autograd
    ):  # (its frame is a graph compiled autograd wrote, not the program's code)
        label, frame = f"compiled autograd's backward graph ({label})", {**frame, "compiled_autograd": True}
    for path in captured.frame_paths:
        row = run_stages(session, load_repro(path).case, accuracy=accuracy, path=path)
        first = row.first_failure
        if first is not None and first.failure is not None and first.failure.signature == captured.failure.signature:
            row.label, row.frame = label, frame
            return row
    if (
        frame and captured.lift_errors and not captured.frame_paths
    ):  # (said with the verdict: why no graph stands for it)
        frame = {**frame, "lift_error": captured.lift_errors[0]}
    return Row(label, "dynamo", "dynamo", None, frame, {"eager": Outcome("eager", captured.failure, 0.0)})


def failed_while_tracing(captured: CaptureResult) -> bool:
    """Did the program fail inside dynamo's tracing, before its graph reached a backend?"""
    return any(isinstance(e, Failed) and e.where == "tracing" for e in captured.events)


def read_capture_again(session: Session, program: ProgramRun) -> CaptureResult:
    """The program under capture once more: does it fail the same way? (Asked of its failure alone: nothing judged.)"""
    return capture(session, dataclasses.replace(program, accuracy=False), again=True)
