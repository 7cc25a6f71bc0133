"""Stage bisection: which graph breaks, and at which stage.

The PT2 FAQ's advice for a crashing ``torch.compile`` is to try ``backend="eager"``,
then ``"aot_eager"``, then ``"inductor"`` by hand. :func:`bisect_script` does it per
graph:

1. **capture** the program's dynamo graphs with their real inputs
   (:mod:`minifier.capture`); how the program itself ended is the *original* failure;
2. run each graph through every stage, each in an isolated query
   (:mod:`minifier.stages`, :mod:`minifier.worker`), side by side on the cores; the
   first failure in stage order is the graph's;
3. take as culprit the first graph whose failure has the original signature (with
   ``--accuracy``, the first graph that fails at all);
4. when the culprit fails in an AOTAutograd backend, lower it to its forward/backward
   graphs and run those too, so the table says whether the forward or the backward
   breaks;
5. make sure the failure repeats: the failing compile seen again in an aot graph, or
   else the culprit's query re-run; ``flaky`` otherwise (a program that fails while no
   graph does gets a second look at both).

A failure inside dynamo's own tracing has no dynamo graph: it is reported as its
frame failing at the ``eager`` stage, with the graph capture lifted from that frame
(``make_fx`` on its real arguments) when that graph fails the same way. The result
is a :class:`BisectReport`, printed as a rich table or as JSON (docs/minify.md).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .capture import CaptureResult, capture_command, read_capture
from .case import GraphCase
from .context import missing_config
from .errors import CorruptRecord, FlakyFailure, NoFailure, NotReproducible, ScriptFailedBeforeCompile, UnknownBackend
from .session import Session
from .signature import Failure, Signature
from .stages import Outcome, lower_case, run_case, stage_names, stages_for
from .worker import QueryError, QueryResult
from .repro_files import load_repro


@dataclass
class Row:
    """One captured graph (or a frame that dynamo failed to capture) and its stage outcomes."""

    label: str
    boundary: str
    kind: str
    nodes: int | None
    frame: dict[str, Any] | None
    outcomes: dict[str, Outcome]
    case: GraphCase | None = None
    case_path: Path | None = None

    @property
    def first_failure(self) -> Outcome | None:
        return next((o for o in self.outcomes.values() if not o.passed), None)

    def to_json(self, stages: list[str]) -> dict[str, Any]:
        first = self.first_failure
        return {
            "label": self.label,
            "boundary": self.boundary,
            "kind": self.kind,
            "nodes": self.nodes,
            "frame": self.frame,
            "stages": {s: (self.outcomes[s].status if s in self.outcomes else None) for s in stages},
            "first_failure": None if first is None else first.stage,
            "failure": None if first is None else _failure_json(first.failure, first.stage),
            "repro": str(self.case_path) if self.case_path else None,
        }


def _failure_json(failure: Failure | None, stage: str | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {"stage": stage, **failure.signature.to_json(), "details": failure.details[:2000]}


@dataclass
class BisectReport:
    """Everything ``minify bisect`` found."""

    script: str
    backend: str
    accuracy: bool
    run_dir: Path
    original: Failure | None
    rows: list[Row] = field(default_factory=list)
    culprit: Row | None = None
    queries: int = 0
    seconds: float = 0.0
    note: str = ""
    nproc: int = 1  # a distributed job's ranks
    rank: int | None = None  # the rank minified
    ranks: dict[int, str] = field(default_factory=dict)  # how each rank ended

    def distributed(self) -> dict[str, Any] | None:
        """The ``distributed`` entry of a report (docs/distributed.md)."""
        if self.nproc <= 1:
            return None
        return {"world_size": self.nproc, "rank": self.rank, "process_group": "fake", "ranks": {str(k): v for k, v in self.ranks.items()}}

    @property
    def stages(self) -> list[str]:
        return stage_names(self.backend)

    @property
    def failure(self) -> Outcome | None:
        return self.culprit.first_failure if self.culprit else None

    def to_json(self) -> dict[str, Any]:
        culprit, failure = self.culprit, self.failure
        stages = self.stages
        return {
            "status": "bisected" if culprit else "no-failure",
            "script": self.script,
            "backend": self.backend,
            "accuracy": self.accuracy,
            "failure": None if failure is None else _failure_json(failure.failure, failure.stage),
            "stages": {} if culprit is None else {s: _stage_status(culprit, s) for s in stages_of(culprit, stages)},
            "graph": None
            if culprit is None
            else {"boundary": culprit.boundary, "index": _index(culprit), "kind": culprit.kind, "label": culprit.label},
            "original_failure": None if self.original is None else self.original.signature.to_json(),
            "graphs": [row.to_json(stages) for row in self.rows],
            "queries": self.queries,
            "seconds": round(self.seconds, 2),
            "run_dir": str(self.run_dir),
            "note": self.note,
            **({"distributed": self.distributed()} if self.nproc > 1 else {}),
        }


def stages_of(row: Row, stages: list[str]) -> list[str]:
    return [s for s in stages if s in row.outcomes]


def _stage_status(row: Row, stage: str) -> str:
    outcome = row.outcomes[stage]
    return "pass" if outcome.passed else "fail"


def _index(row: Row) -> int | None:
    return None if row.case is None else row.case.index


# --------------------------------------------------------------------------- #
# The steps
# --------------------------------------------------------------------------- #


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
    session.timeline.append((f"{label} ({nproc} ranks)", round(time.monotonic() - start, 2)))
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
        done = {key: _as_outcome(stage, result) for (case, stage), result in zip(plan, results) if result is not None for key in [(id(case), stage)]}
        return any(_signature(first) == stop_at for case, _ in cases if (first := _first_failure(case, done)) is not None)

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


def aot_rows(session: Session, paths: list[str], *, accuracy: bool, stop_at: Signature | None, passed: set[str] = frozenset()) -> list[Row]:  # type: ignore[assignment]
    """Rows for aot graphs (captured, or written by a lowering), until one fails with ``stop_at``.

    ``passed``: graphs the program compiled and ran without failing; their final stage
    is known to pass and is not asked again (unless answers are judged for accuracy).
    """
    cases = [(load_repro(Path(p)).case, Path(p)) for p in paths]
    known = {(id(case), case.backend): Outcome(case.backend, None, 0.0) for case, path in cases if str(path) in passed and not accuracy}
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


# --------------------------------------------------------------------------- #
# Putting it together
# --------------------------------------------------------------------------- #


def bisect_script(
    session: Session,
    script: Path,
    args: list[str],
    *,
    backend: str | None = None,
    accuracy: bool = False,
    aot_rows: bool = True,
    nproc: int = 1,
) -> BisectReport:
    """Capture ``script``'s graphs and find the first graph and stage that fail (``nproc``: a torchrun job's ranks)."""
    captured = capture(session, script, args, backend, nproc=nproc)
    cases, unreadable = readable_cases(captured.graph_paths)
    final = backend or (cases[0][0].backend if cases else "inductor")
    report = BisectReport(str(script), final, accuracy, session.run_dir, captured.failure, nproc=nproc, rank=captured.rank, ranks=captured.ranks)
    if captured.failure is not None:
        session.log(f"[bold]{script.name}[/] fails: {captured.failure.signature}")

    if captured.failure is not None and failed_while_tracing(captured):
        report.rows = [run_stages(session, c, accuracy=accuracy, path=p) for c, p in cases]
        row = frame_row(session, captured, accuracy=accuracy)
        report.rows.append(row)
        report.culprit = row
        if row.case is not None:
            return pin_down(session, report, accuracy=accuracy, aot_rows_wanted=False)
        report.note = "the failing frame could not be lifted to a graph that fails the same way"
        again = read_capture_again(session, script, args, backend, report.nproc)
        if again.failure is None or again.failure.signature != captured.failure.signature:
            raise FlakyFailure(f"flaky: {script.name} failed in dynamo's tracing once ({captured.failure.signature}), then {again.failure.signature if again.failure else 'passed'}")
        return finish(session, report)

    if unreadable:
        report.note = "some graphs cannot be rebuilt in isolation: " + "; ".join(unreadable)
    if not captured.graph_paths:
        if captured.failure is not None:
            raise ScriptFailedBeforeCompile(
                f"{script.name} raised before torch.compile compiled anything: {captured.failure.signature.exception}: {captured.failure.signature.message}"
            )
        raise NoFailure(f"{script.name} ran to the end without compiling anything")
    if captured.failure is None and not accuracy:
        raise NoFailure(
            f"{script.name} ran to the end without failing ({len(captured.graph_paths)} graphs compiled); "
            "pass --accuracy to check the compiled results against eager"
        )

    for row in run_stages_of(session, cases, accuracy=accuracy, known=seen_in_the_program(captured, cases, final, accuracy)):
        report.rows.append(row)
        first = row.first_failure
        session.log(f"  {row.label}: " + ("all stages pass" if first is None else f"first fails at [bold]{first.stage}[/]: {first.failure.signature}"))  # type: ignore[union-attr]
        if first is not None and matches(first, captured.failure, accuracy):
            # the first graph that fails the program's way, unless the program itself failed in another one
            if report.culprit is None or row.label == failed_owner(captured):
                report.culprit = row

    if report.culprit is None:
        return no_culprit(session, report, script, args, backend, captured)

    return pin_down(session, report, accuracy=accuracy, aot_rows_wanted=aot_rows, captured=captured)


def readable_cases(paths: list[Path]) -> tuple[list[tuple[GraphCase, Path]], list[str]]:
    """The captured graphs pt2kit can read back; the others, named (their aot graphs may still do)."""
    cases, unreadable = [], []
    for path in paths:
        try:
            cases.append((load_repro(path).case, path))
        except CorruptRecord as e:
            unreadable.append(f"{path.parent.name}: {e}")
    return cases, unreadable


def aot_culprit(session: Session, report: BisectReport, captured: CaptureResult) -> Row | None:
    """The failing aot graph the program itself compiled, when no dynamo graph stands for it.

    (The dynamo graph may hold inputs a repro cannot rebuild yet, such as DTensors.)
    """
    if captured.failure is None or captured.failed_graph is None or "." not in captured.failed_graph:
        return None
    owner = int(captured.failed_graph.split(".")[0].removeprefix("g"))
    paths = [g["path"] for g in captured.aot.get(owner, []) if Path(g["path"]).parent.name == captured.failed_graph]
    rows = aot_rows(session, paths, accuracy=report.accuracy, stop_at=captured.failure.signature) if paths else []
    row = next((r for r in rows if r.first_failure is not None and matches(r.first_failure, captured.failure, report.accuracy)), None)
    if row is not None:
        report.rows.extend(rows)
        report.culprit = row
    return row


def failed_owner(captured: CaptureResult) -> str | None:
    """The dynamo graph (``g3``) the program failed in, when the capture knows it."""
    return captured.failed_graph.split(".")[0] if captured.failed_graph else None


def seen_in_the_program(captured: CaptureResult, cases: list[tuple[GraphCase, Path]], final: str, accuracy: bool) -> dict[tuple[int, str], Outcome]:
    """The final-stage outcome the program's own run already showed, so it is not paid for again.

    The program compiled the graph it failed in with its final backend, and failed:
    that graph's row gets that outcome without compiling the whole graph once more
    (the expensive query of a bisection). Its eager stages still run, to say whether
    an earlier stage fails too; its failing aot graph runs once, alone, next.
    """
    if captured.failure is None or accuracy or captured.failed_graph is None:
        return {}
    owner = captured.failed_graph.split(".")[0]
    return {
        (id(case), final): Outcome(final, captured.failure, 0.0)
        for case, _ in cases
        if case.label() == owner and case.backend == final
    }


def bisect_case(session: Session, case: GraphCase, *, accuracy: bool = False, aot_rows: bool = True, path: Path | None = None) -> BisectReport:
    """Stage bisection of one saved graph (``minify repro``): its stages, then its aot graphs."""
    session.warm_up(inductor=case.backend == "inductor")
    row = run_stages(session, case, accuracy=accuracy, path=path)
    report = BisectReport(str(path or case.label()), case.backend, accuracy, session.run_dir, None, [row])
    first = row.first_failure
    if first is None:
        raise NoFailure(f"{path or case.label()} passes every stage" + (" (accuracy checked)" if accuracy else ""))
    session.log(f"  {row.label}: first fails at [bold]{first.stage}[/]: {first.failure.signature}")  # type: ignore[union-attr]
    report.culprit = row
    return pin_down(session, report, accuracy=accuracy, aot_rows_wanted=aot_rows)


def pin_down(session: Session, report: BisectReport, *, accuracy: bool, aot_rows_wanted: bool, captured: CaptureResult | None = None) -> BisectReport:
    """Make sure the culprit fails the same way again, and find its failing aot graph.

    A culprit failing in its final AOTAutograd backend is lowered, and its aot graphs
    run through that backend's compiler: when one fails with the same signature, the
    failing compile has happened again, and that is the check for flakiness. Otherwise
    the culprit's query simply runs once more.
    """
    culprit = report.culprit
    assert culprit is not None and culprit.first_failure is not None and culprit.case is not None
    outcome = culprit.first_failure
    target = _signature(outcome)
    captured_aot = captured_aot_graphs(captured, culprit)
    if aot_rows_wanted and culprit.boundary == "dynamo" and outcome.stage == report.backend:
        paths, lowering_note = (captured_aot[0], None) if captured_aot else lower(session, culprit)
        passed = captured_aot[1] if captured_aot else set()
        rows = aot_rows(session, paths, accuracy=accuracy, stop_at=target, passed=passed) if paths else []
        at = report.rows.index(culprit) + 1
        report.rows[at:at] = rows
        aot_culprit = next((r for r in rows if r.first_failure and _signature(r.first_failure) == target), None)
        if aot_culprit is not None:
            report.culprit = aot_culprit
            return finish(session, report)
        if rows:
            report.note = "the aot graphs do not fail the same way in isolation; the dynamo graph is the smallest unit that does"
        elif lowering_note:
            report.note = lowering_note
        second_look(session, [culprit, *rows], accuracy=accuracy)
    else:
        second_look(session, [culprit], accuracy=accuracy)
    return finish(session, report)


def captured_aot_graphs(captured: CaptureResult | None, row: Row) -> tuple[list[str], set[str]] | None:
    """The aot graphs the program itself compiled for ``row``'s dynamo graph, and those that ran fine."""
    if captured is None or row.case is None or row.label.endswith("(inlined)"):
        return None
    graphs = captured.aot.get(row.case.index) or []
    if not graphs:
        return None
    failed = captured.failed_graph
    passed = {g["path"] for g in graphs if not g.get("failure") and Path(g["path"]).parent.name in captured.ran and Path(g["path"]).parent.name != failed}
    return [g["path"] for g in graphs], passed


def lower(session: Session, row: Row) -> tuple[list[str], str | None]:
    """The aot graphs of a dynamo graph (see :func:`minifier.stages.lower_case`); degrades to none.

    A backend that crashes or hangs while being lowered, or a lowering that fails for
    a reason of pt2kit's own, leaves the dynamo graph as the unit to minify, with a note.
    """
    assert row.case is not None
    try:
        lowered = session.query(functools.partial(lower_case, row.case, session.run_dir / "captured" / "aot"), f"{row.label}: lowering to aot graphs")
    except QueryError as e:
        (session.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        (session.run_dir / "logs" / f"{row.label}-lowering-error.txt").write_text(str(e))
        return [], f"lowering {row.label} to aot graphs failed inside pt2kit; the dynamo graph is the unit to minify"
    if lowered.value is None:
        assert lowered.failure is not None
        return [], f"lowering {row.label} to aot graphs ended in {lowered.failure.signature}; the dynamo graph is the unit to minify"
    return lowered.value


def second_look(session: Session, rows: list[Row], *, accuracy: bool) -> None:
    """Run each row's last stage again; :class:`FlakyFailure` if any outcome changes."""
    looked = [row for row in rows if row.case is not None and row.outcomes]
    plan = [(row.case, list(row.outcomes)[-1]) for row in looked]
    labels = [f"{row.label} through {stage} again: checking it is not flaky" for row, (_, stage) in zip(looked, plan)]
    again = run_each(session, plan, accuracy=accuracy, labels=labels)  # type: ignore[arg-type]
    for row, (case, stage) in zip(looked, plan):
        first, second = row.outcomes[stage], again[(id(case), stage)]
        if _signature(second) != _signature(first):
            raise FlakyFailure(f"flaky: {row.label} through {stage} gave {_describe(first)}, then {_describe(second)}")


def matches(outcome: Outcome, original: Failure | None, accuracy: bool) -> bool:
    """Is a graph's failure the program's failure (or, with --accuracy, any failure)?"""
    if outcome.failure is None:
        return False
    if original is None:
        return accuracy
    return outcome.failure.signature == original.signature or (accuracy and outcome.failure.signature.kind == "accuracy")


def read_capture_again(session: Session, script: Path, args: list[str], backend: str | None, nproc: int = 1) -> CaptureResult:
    return capture(session, script, args, backend, again=True, nproc=nproc)


def inlined_culprit(session: Session, report: BisectReport, captured: CaptureResult) -> Row | None:
    """A graph that fails the program's way once its higher-order ops are inlined.

    torch.compile cannot trace some higher-order ops when a repro calls them directly
    (``autograd_function_apply``: it breaks the graph there), so such a graph can pass
    in isolation. Inlined (see :mod:`minifier.inline`), it runs its bodies' ops
    itself; if it then fails the same way it becomes the culprit, with a note.
    """
    from .inline import variants

    cases = [(row, flat) for row in report.rows if row.case is not None for flat in variants(row.case.gm)]
    for row, flat in cases:
        assert row.case is not None
        candidate = row.case.replace(gm=flat)
        (new,) = run_stages_of(session, [(candidate, None)], accuracy=report.accuracy)
        first = new.first_failure
        if first is not None and matches(first, captured.failure, report.accuracy):
            new.label = f"{row.label} (inlined)"
            report.rows.insert(report.rows.index(row) + 1, new)
            report.culprit = new
            report.note = f"{row.label} fails this way only with its higher-order ops inlined (torch.compile cannot trace them when called directly)"
            return new
    return None


def no_culprit(session: Session, report: BisectReport, script: Path, args: list[str], backend: str | None, captured: CaptureResult) -> BisectReport:
    """No graph fails like the program did: flaky, or a failure that needs the whole program."""
    failing = [r for r in report.rows if r.first_failure is not None]
    if captured.failure is None:
        if failing:  # --accuracy on a program that ran fine, and a graph errors out
            report.culprit = failing[0]
            return finish(session, report)
        raise NoFailure(f"every graph of {script.name} passes every stage" + (" (accuracy checked)" if report.accuracy else ""))
    inlined = inlined_culprit(session, report, captured)
    if inlined is not None:
        return pin_down(session, report, accuracy=report.accuracy, aot_rows_wanted=True)
    if aot_culprit(session, report, captured) is not None:
        report.note = "the program's failing aot graph, run alone (its dynamo graph cannot be rebuilt in isolation)"
        return finish(session, report)
    again = read_capture_again(session, script, args, backend, report.nproc)
    if again.failure is None or again.failure.signature != captured.failure.signature:
        raise FlakyFailure(f"flaky: {script.name} failed with {captured.failure.signature}, then {again.failure.signature if again.failure else 'passed'} on a second run")
    second_look(session, report.rows, accuracy=report.accuracy)  # does any graph fail now?
    detail = (
        f"; graphs fail differently: {', '.join(f'{r.label}: {r.first_failure.failure.signature}' for r in failing)}"  # type: ignore[union-attr]
        if failing
        else ""
    )
    hint = ""
    if captured.unrecoverable:
        hint = "; " + "; ".join(captured.unrecoverable) + " (register it with torch._dynamo.register_backend in an importable module, or pass --backend)"
    elif captured.patches:
        patched = ", ".join(f"{target} (by {fn})" for target, fn in sorted(captured.patches.items()))
        hint = f"; the program patches torch ({patched})" + ("" if captured.patches_carried else ", and the repro cannot carry that patch: move it to a module the repro can import")
    elif missing := sorted({m for r in report.rows if r.case is not None for m in missing_config(r.case.config)}):
        hint = "; it may need compiler config pt2kit could not carry: " + "; ".join(missing) + " (define it in an importable module)"
    elif looks_like_wrong_answer(captured.failure) and not report.accuracy:
        hint = "; the program's failure looks like a wrong answer: run with --accuracy to compare compiled results against an fp64 reference"
    raise NotReproducible(
        f"{script.name} fails ({captured.failure.signature}) but none of its {len(report.rows)} graphs fails that way in isolation{detail}{hint}"
    )


def looks_like_wrong_answer(failure: Failure) -> bool:
    """An assertion about values (``assert torch.allclose``, ``torch.testing.assert_close``)."""
    signature = failure.signature
    text = f"{signature.message} {failure.details}".lower()
    return signature.exception in ("AssertionError", "AccuracyError") or any(
        phrase in text for phrase in ("not close", "mismatched elements", "allclose", "not equal")
    )


def _signature(outcome: Outcome) -> Signature | None:
    return outcome.failure.signature if outcome.failure else None


def _describe(outcome: Outcome) -> str:
    return "pass" if outcome.failure is None else str(outcome.failure.signature)


def finish(session: Session, report: BisectReport) -> BisectReport:
    report.queries = session.queries
    report.seconds = session.seconds
    return report
