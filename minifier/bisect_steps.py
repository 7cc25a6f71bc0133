"""The steps of a stage bisection: the program once under capture, then its graphs through their stages.

Each step runs something and returns what it saw; none of them chooses a culprit
(that is :mod:`minifier.culprit`):

- :func:`capture` runs the user's script as a fresh process with capture armed
  (:mod:`minifier.capture`), while pt2kit's worker warms up on the other core; a
  torchrun job runs every rank under capture (:func:`capture_ranks`) and the lowest
  failing rank is the one kept. How the program ended is the *original* failure
  the rest of the bisection looks for; :func:`read_capture_again` runs it once more
  when only a second run can tell a flaky failure.
- :func:`run_stages_of` turns graph cases into rows (:class:`~minifier.bisect_report.Row`).
  Every (case, stage) pair is one isolated query (:func:`run_each`, through the
  session's worker), all of them in one batch over the cores, each case's final
  stage first: it is usually the slow one and usually where the failure is, so the
  cheap eager stages run beside it. A batch can end as soon as some row fails with
  a wanted signature, and it skips outcomes already known (the program's own run
  of a graph through its final backend).
- :func:`aot_rows` does the same for aot graphs read back from their repro files;
  :func:`frame_row` stands for a frame that dynamo failed to turn into a graph.

A crash or a hang inside a query is an outcome like any other, a failure with a
signature (:mod:`minifier.worker` isolates it), never an exception here.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .bisect_report import Row, signature_of
from .capture import CaptureResult, capture_command, read_capture
from .case import GraphCase
from .errors import UnknownBackend
from .repro_files import load_repro
from .session import Session
from .signature import Failure, Signature
from .stages import Outcome, run_case, stages_for
from .worker import QueryResult


def capture(session: Session, script: Path, args: list[str], backend: str | None, *, again: bool = False, nproc: int = 1) -> CaptureResult:
    """Run the user's script once under capture, as a fresh process, and warm up meanwhile.

    The script runs on one core while pt2kit's worker warms up on the other. (The
    script may run for hours; hangs in compiled code are caught inside.) With
    ``nproc`` > 1 it is a distributed job: every rank runs under capture (see
    :func:`capture_ranks`), and the lowest failing rank is the one minified.
    """
    out = session.run_dir / ("captured-again" if again else "captured")
    if not again:
        session.warm_up(inductor=backend in (None, "inductor"))
    label = f"running {script.name} again: checking it is not flaky" if again else f"running {script.name} with capture armed"
    if nproc > 1:
        captured = capture_ranks(session, script, args, backend, out, nproc, label)
    else:
        command = capture_command(script, args, out, backend=backend, timeout=session.timeout)
        ended = session.run_program(command, label, log=session.run_dir / "logs" / f"{out.name}.log")
        captured = read_capture(out, ended)
    if captured.unknown_backend:
        raise UnknownBackend(captured.unknown_backend)
    # The graphs import the user's modules as the script did: from its directory and
    # wherever those modules live (queries inherit this process's sys.path).
    sys.path.extend(p for p in (str(script.parent), *captured.roots) if p not in sys.path)
    return captured


def capture_ranks(session: Session, script: Path, args: list[str], backend: str | None, out: Path, nproc: int, label: str) -> CaptureResult:
    """Every rank of the job under capture (``captured/rank<r>``); the lowest rank that failed is the result."""
    from .distributed import launch_ranks
    from .signature import signature_of_crash, signature_of_exit
    from .worker import pt2kit_env

    outs = [out / f"rank{rank}" for rank in range(nproc)]
    commands = [capture_command(script, args, o, backend=backend, timeout=session.timeout) for o in outs]
    logs = [session.run_dir / "logs" / f"{out.name}-rank{rank}.log" for rank in range(nproc)]
    session.progress.update(f"{label} ({nproc} ranks)")
    start = time.monotonic()
    codes = launch_ranks(commands, pt2kit_env(), logs, failed=lambda rank: _logged_failure(outs[rank]), on_wait=session.progress.tick)
    session.mark(f"{label} ({nproc} ranks)", time.monotonic() - start)
    results = []
    for o, code, log in zip(outs, codes, logs):
        tail = log.read_bytes()[-4000:].decode(errors="replace") if log.exists() else ""
        ended = signature_of_crash(-code, tail) if code < 0 and code != -9 else signature_of_exit(code, tail) if code > 0 else None
        results.append(read_capture(o, ended))
    failing = [rank for rank, r in enumerate(results) if r.failure is not None]
    chosen = results[failing[0]] if failing else results[0]
    chosen.rank = failing[0] if failing else 0
    chosen.ranks = {rank: (str(r.failure.signature) if r.failure else "ran to the end or was stopped") for rank, r in enumerate(results)}
    return chosen


def _logged_failure(out: Path) -> bool:
    try:
        return '"event": "failed"' in (out / "events.jsonl").read_text()
    except OSError:
        return False


def run_stages(session: Session, case: GraphCase, *, accuracy: bool, path: Path | None = None) -> Row:
    """Run ``case`` through all its stages, side by side; the first failure in stage order counts."""
    return run_stages_of(session, [(case, path)], accuracy=accuracy)[0]


def run_stages_of(
    session: Session,
    cases: list[tuple[GraphCase, Path | None]],
    *,
    accuracy: bool,
    stop_at: Signature | None = None,
    known: dict[tuple[int, str], Outcome] | None = None,
) -> list[Row]:
    """Rows for several cases, every (case, stage) query in one batch over the cores.

    Each case's final stage goes first: it is usually the slow one (a real compile)
    and usually where the failure is, so the cheap eager stages run beside it. With
    ``stop_at``, the batch ends once some case's first failure has that signature
    (the stages of the rest are left unrun: their rows say so). ``known``: outcomes
    already seen, by ``(id(case), stage)`` (the program's own run of its final stage),
    which are not asked again.
    """
    known = known or {}
    plan = [(case, stage) for case, _ in cases for stage in reversed(stages_for(case)) if (id(case), stage) not in known]

    def found(results: list[QueryResult[Any] | None]) -> bool:
        done = {**known, **{key: _as_outcome(stage, result) for (case, stage), result in zip(plan, results) if result is not None for key in [(id(case), stage)]}}
        return any(signature_of(first) == stop_at for case, _ in cases if (first := _first_failure(case, done)) is not None)

    outcomes = {**known, **run_each(session, plan, accuracy=accuracy, enough=found if stop_at is not None else None)}
    rows = []
    for case, path in cases:
        row = Row(case.label(), case.boundary, case.kind, case.node_count, case.frame, {}, case, path)
        for stage in stages_for(case):
            if (id(case), stage) in outcomes:
                row.outcomes[stage] = outcomes[(id(case), stage)]
        rows.append(row)
    return rows


def _first_failure(case: GraphCase, outcomes: dict[tuple[int, str], Outcome]) -> Outcome | None:
    """The first failing stage of a case, once every stage before it is known to pass."""
    for stage in stages_for(case):
        outcome = outcomes.get((id(case), stage))
        if outcome is None:
            return None
        if not outcome.passed:
            return outcome
    return None


def _as_outcome(stage: str, result: QueryResult[Any]) -> Outcome:
    return result.value if result.value is not None else Outcome(stage, result.failure, result.seconds)


def run_each(
    session: Session,
    plan: list[tuple[GraphCase, str]],
    *,
    accuracy: bool,
    labels: list[str] | None = None,
    enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
) -> dict[tuple[int, str], Outcome]:
    """Isolated queries, one per (case, stage); crashes and timeouts become outcomes."""
    queries = [
        (functools.partial(run_case, case, stage, accuracy=accuracy), labels[i] if labels else f"{case.label()} ({case.node_count} nodes) through {stage}")
        for i, (case, stage) in enumerate(plan)
    ]
    results = session.query_all(queries, enough=enough)
    return {(id(case), stage): _as_outcome(stage, result) for (case, stage), result in zip(plan, results) if result is not None}


def aot_rows(
    session: Session,
    paths: list[str],
    *,
    accuracy: bool,
    stop_at: Signature | None,
    passed: set[str] = frozenset(),  # type: ignore[assignment]
    failed: dict[str, Failure] | None = None,
) -> list[Row]:
    """Rows for aot graphs (captured, or written by a lowering), until one fails with ``stop_at``.

    ``passed``: graphs the program compiled and ran without failing; their final stage
    is known to pass and is not asked again (unless answers are judged for accuracy).
    ``failed``: the graph the program failed to compile, and how; that final stage is
    not asked again either (the outcome says it was only seen in the program).
    """
    cases = [(load_repro(Path(p)).case, Path(p)) for p in paths]
    failed = failed or {}
    known = {(id(case), case.backend): Outcome(case.backend, None, 0.0) for case, path in cases if str(path) in passed and not accuracy}
    known |= {(id(case), case.backend): Outcome(case.backend, failed[str(path)], 0.0, seen_in_program=True) for case, path in cases if str(path) in failed}
    return run_stages_of(session, cases, accuracy=accuracy, stop_at=stop_at, known=known)


def frame_row(session: Session, captured: CaptureResult, *, accuracy: bool) -> Row:
    """The row of a frame that dynamo failed to turn into a graph: it fails at ``eager``.

    When capture could lift the frame to a graph (``make_fx`` on its real arguments)
    that fails at ``eager`` with the program's signature, that graph stands for the
    frame and can be minified; otherwise the row has no graph.
    """
    assert captured.failure is not None
    frame = captured.failure_frame
    label = f"frame {frame['name']}" if frame else "frame ?"
    if captured.frame_path is not None:
        lifted = load_repro(captured.frame_path).case
        row = run_stages(session, lifted, accuracy=accuracy, path=captured.frame_path)
        first = row.first_failure
        if first is not None and first.failure is not None and first.failure.signature == captured.failure.signature:
            row.label, row.frame = label, frame
            return row
    return Row(label, "dynamo", "dynamo", None, frame, {"eager": Outcome("eager", captured.failure, 0.0)})


def failed_while_tracing(captured: CaptureResult) -> bool:
    """Did the program fail inside dynamo's tracing, before its graph reached a backend?"""
    return any(e["event"] == "failed" and e.get("where") == "tracing" for e in captured.events)


def read_capture_again(session: Session, script: Path, args: list[str], backend: str | None, nproc: int = 1) -> CaptureResult:
    return capture(session, script, args, backend, again=True, nproc=nproc)
