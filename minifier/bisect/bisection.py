"""Stage bisection: which graph breaks, and at which stage.

The PT2 FAQ's advice for a crashing ``torch.compile`` is to try ``backend="eager"``,
then ``"aot_eager"``, then ``"inductor"`` by hand. :func:`bisect_script` does it per
graph:

1. **capture** the program's dynamo graphs with their real inputs
   (:mod:`minifier.capture.recorder`); how the program itself ended is the *original* failure;
2. run each graph through every stage, each in an isolated query
   (:mod:`minifier.stages.run`, :mod:`minifier.isolation.worker`), side by side on the cores; the
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

Its parts, one job each: :mod:`minifier.bisect.report` (the table: a
:class:`~minifier.bisect.report.Row` per graph, the
:class:`~minifier.bisect.report.BisectReport` and its JSON),
:mod:`minifier.bisect.steps` (capture, and graphs through their stages as isolated
queries) and :mod:`minifier.bisect.culprit` (which failing graph is the program's failure,
made sure of). This module puts them together: :func:`bisect_script` for a
program, :func:`bisect_case` for one saved graph, :func:`bisect_saved` for the graphs one program
saved (:func:`minifier.save_repro`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import functools
from pathlib import Path

from rich.markup import escape
from .report import BisectReport, FailureRecord, Row, first_fails, program_failure
from .plainly import askable, compiles_its_failure_into_no_graph, fails_only_plainly, fails_under_dynamo_alone, traced_on_what_graphs_returned
from .steps import aot_rows, capture, failed_while_tracing, frame_row, read_capture_again, readable_cases, run_stages, run_stages_of
from ..capture.result import CaptureResult
from ..capture.program import ProgramRun
from ..unit.case import Boundary, GraphCase
from ..unit.accuracy import EAGER_DRAWS, accuracy_category
from .culprit import failed_owner, finish, lower, matches, no_culprit, pin_down, seen_in_the_program
from .plainly import around_its_graphs, program_stage
from .untraceable import compiled_whole, handed_culprit, handed_if_refused, replay_breaks_of
from pt2kit.seams import dynamo_exc
from pt2kit.errors import ComparesEagersDraws, FlakyFailure, NoFailure, NotReproducible, ScriptFailedBeforeCompile, WithinTolerance, plural
from ..isolation.session import Session
from pt2kit.signature import Failure, Kind, Signature, shown
from ..unit.check import Stage

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


def bisect_script(
    session: Session,
    script: Path,
    args: list[str],
    *,
    backend: str | None = None,
    accuracy: Accuracy = False,
    aot_rows: bool = True,
    nproc: int = 1,
    trust_program: bool = False,
) -> BisectReport:
    """Capture ``script``'s graphs and find the first graph and stage that fail (``nproc``: a torchrun job's ranks).

    ``trust_program``: take the program's own failing compile of an aot graph as that
    graph's final-stage answer instead of compiling it again (see
    :func:`minifier.bisect.culprit.pin_down`); only for a minification, which confirms it.

    Under ``--accuracy``, a program whose own check fails while every graph is within the
    fp64 rule's tolerance (:class:`~pt2kit.errors.WithinTolerance`: a dtype's own semantics,
    ``nextafter`` on fp16, that the fp64 reference cannot see, or a check as exact as
    ``torch.equal``) is bisected again with each graph judged bit for bit against eager. One that
    compares what its graphs draw with eager's own draws (:class:`~pt2kit.errors.ComparesEagersDraws`)
    is bisected again with each graph judged on its draws (:data:`~minifier.unit.accuracy.EAGER_DRAWS`).
    """
    run = functools.partial(_bisect_script, session, script, args, backend, aot_rows=aot_rows, nproc=nproc, trust_program=trust_program)
    try:
        try:
            return run(accuracy)
        except WithinTolerance:  # (its diagnosis holds only if the bit-for-bit run finds nothing either: that one says)
            session.log(
                "every graph is within the fp64 rule's tolerance, yet the program's own check failed: judging each graph "
                "bit for bit against eager instead (--strict-accuracy)"
            )
            again: Accuracy = "strict"
            note = (
                "every graph was within the fp64 rule's tolerance, yet the program's own check failed: each graph was "
                "judged bit for bit against eager instead (--strict-accuracy)"
            )
        except ComparesEagersDraws as e:
            session.log(f"{escape(str(e))}; judging each graph on its random draws instead, without fallback_random")
            again, note = EAGER_DRAWS, (
                f"{e}: each graph that draws random numbers was judged on those very numbers, against eager's own "
                "draws, without fallback_random"
            )
        report = run(again)
    except NotReproducible as error:  # (its report keeps what was found: the program's failure, each graph's stages)
        session.keeps_found(error)
        raise
    report.add_note(note)
    return report


def _bisect_script(
    session: Session, script: Path, args: list[str], backend: str | None, accuracy: Accuracy, *, aot_rows: bool,
    nproc: int, trust_program: bool,
) -> BisectReport:  # fmt: skip
    program = ProgramRun(script, tuple(args), backend, accuracy, nproc)
    captured = capture(session, program, profile=trust_program)
    cases, unreadable = readable_cases(captured.graph_paths, captured.early.cases if captured.early is not None else {})
    final = backend or (cases[0][0].backend if cases else "inductor")
    report = BisectReport(
        str(script),
        final,
        accuracy,
        session.run_dir,
        captured.failure,
        nproc=nproc,
        rank=captured.rank,
        ranks=captured.ranks,
    )
    report.kernel, report.failed_graph = captured.kernel, captured.failed_graph
    session.found = functools.partial(found_so_far, report)
    report.profiled = captured.early.profiled if captured.early is not None else {}
    if captured.failure is not None:
        session.log(f"[bold]{escape(script.name)}[/] fails: {escape(captured.failure.as_said)}")

    signature = captured.failure.signature if captured.failure is not None else None
    if signature is not None and dynamo_exc.refuses_a_recompile(signature.exception, signature.message):
        raise NotReproducible(
            f"{script.name} recompiles and asks dynamo to fail when it does ({signature}): that is "
            f"a recompilation to explain, not a graph to minify; `python -m explain {script.name}` says why"
        )
    if signature is not None and dynamo_exc.refuses_a_shape_mark(signature.exception):
        raise NotReproducible(
            f"{script.name} marks a size dynamic that its own code makes static ({signature}): dynamo refuses the "
            "mark, as mark_dynamic asks it to, and no graph fails; torch._dynamo.maybe_mark_dynamic lets it specialize"
        )
    if captured.failure is not None and failed_while_tracing(captured):
        return bisect_failed_frame(session, report, captured, cases, program)
    if unreadable:
        report.add_note("some graphs cannot be rebuilt in isolation: " + "; ".join(unreadable))
    if captured.not_saved:
        report.add_note("some graphs the program compiled could not be saved as repros: " + captured.said_not_saved())
    something_failed(captured, program, accuracy)

    known = seen_in_the_program(captured, cases, final, accuracy)
    hung = captured.failure is not None and captured.failure.signature.kind == Kind.TIMEOUT
    for row in run_stages_of(session, cases, accuracy=accuracy, known=known, early=captured.early, hung=hung):
        row = handed_if_refused(session, report, row, captured.failure, accuracy=accuracy)
        report.rows.append(row)
        first = row.first_failure
        verdict = (
            "all stages pass" if first is None else first_fails(first)
        )
        session.log(f"  {row.label}: {verdict}")
        if (otherwise := program_failure(row, captured.failure, accuracy)) is not None:
            first = row.first_failure
            report.add_note(otherwise)
            session.log(f"  {escape(otherwise)}")
        if first is not None and matches(first, captured.failure, accuracy):
            # the first graph that fails the program's way, unless the program itself failed in another
            # one; a wrong value before outputs that only alias otherwise
            if report.culprit is None or row.label == failed_owner(captured) or aliasing_only(report.culprit) > aliasing_only(row):
                report.culprit = row
    if aliasing_only(report.culprit) and captured.failure is not None and fails_under_dynamo_alone(program, captured.failure):
        report.culprit = None  # (the program fails without a compiler: not because its outputs alias otherwise)

    if report.culprit is None:
        return no_culprit(session, report, program, captured)

    try:
        return pin_down(
            session, report, accuracy=accuracy, aot_rows_wanted=aot_rows, captured=captured, trust_program=trust_program
        )
    except FlakyFailure as flaky:
        flaky_or_not_alone(session, program, report, flaky)


def found_so_far(report: BisectReport, stage: str | None = None) -> dict[str, object]:
    """What a run that ends without a repro keeps of the bisection in ``report.json``: the program's failure (as
    ``failure`` too, at ``stage`` where known), each graph's stages, and the program's path (``issue.md`` inlines
    the program where it is the repro)."""
    found = report.to_json()
    failure = FailureRecord.of(report.original, stage)
    return {key: found[key] for key in ("original_failure", "graphs", "script")} | {"failure": failure and failure.to_json()}


def flaky_or_not_alone(session: Session, program: ProgramRun, report: BisectReport, flaky: FlakyFailure) -> NoReturn:
    """A failure the culprit never showed again alone: flaky (exit 1), unless the program, run once more, fails that
    way again. Then it fails on every run, and what pt2kit rebuilds alone is not what it compiled (exit 5)."""
    target = report.original.signature if report.original is not None else None
    again = read_capture_again(session, program)
    if target is not None and again.failure is not None and again.failure.signature == target:
        # (the one failure the flaky verdict counts is the program's own: the graph alone never failed)
        around = around_its_graphs(session, program, again.failure, report.backend)
        said = f"{program.script.name} fails the same way on every run ({target}), but its graph, rebuilt alone, never does"
        if around is None:
            raise NotReproducible(f"{said}: the graph pt2kit rebuilds alone is not the one the program compiled") from None
        raise NotReproducible(
            f"{said}: {around[0]} (or the graph rebuilt alone lacks something the program gave it: an input made "
            "otherwise, state the program set)",
            program_fails_at=around[1],
        ) from None
    raise flaky


def bisect_failed_frame(
    session: Session,
    report: BisectReport,
    captured: CaptureResult,
    cases: list[tuple[GraphCase, Path]],
    program: ProgramRun,
) -> BisectReport:
    """The program failed inside dynamo's tracing: the frame it failed in, lifted to a graph, is the culprit.

    A frame that cannot be lifted to a graph that fails the same way is looked at
    again: a second run of the program must fail the same way, or it is flaky. When
    graphs were compiled before it and the program runs to the end with every compile
    on ``backend="eager"``, dynamo fails on what those graphs returned (an output that
    was a view comes back a plain tensor): the stage is theirs, the first on which the
    whole program fails (:func:`~minifier.bisect.plainly.first_stage_the_program_fails`), and exit 5 says so.
    """
    assert captured.failure is not None
    report.rows = [run_stages(session, c, accuracy=report.accuracy, path=p) for c, p in cases]
    row = frame_row(session, captured, accuracy=report.accuracy)
    report.rows.append(row)
    report.culprit = row
    if row.case is not None:
        return pin_down(session, report, accuracy=report.accuracy, aot_rows_wanted=False)
    report.add_note("the failing frame could not be lifted to a graph that fails the same way")
    again = read_capture_again(session, program)
    if again.failure is None or again.failure.signature != captured.failure.signature:
        then = again.failure.signature if again.failure else "passed"
        raise FlakyFailure(
            f"flaky: {program.script.name} failed in dynamo's tracing once ({captured.failure.signature}), then {then}"
        )
    if cases and askable(program, captured.failure) and not fails_under_dynamo_alone(program, captured.failure):
        # dynamo's tracing fails only on what compiled graphs handed the frame: the stage is the earlier graphs'
        stage = program_stage(session, program, captured.failure)
        if stage is not None:
            raise NotReproducible(
                traced_on_what_graphs_returned(program.script.name, row.label, captured.failure.signature, stage),
                program_fails_at=stage,
                **found_so_far(report, stage),
            )
    return finish(session, report)


def something_failed(captured: CaptureResult, program: ProgramRun, accuracy: Accuracy) -> None:
    """Raise when there is nothing to bisect: no graph compiled, or nothing failed and no --accuracy to judge."""
    script = program.script
    # (an aot graph the program failed in stands for a dynamo graph pt2kit could not save)
    if not captured.graph_paths and not captured.failing_aot_graphs(accuracy):
        if captured.failure is not None and captured.not_saved:
            raise NotReproducible(
                f"{script.name} fails ({captured.failure.signature}) after torch.compile compiled "
                f"{plural(len(captured.not_saved), 'graph')}, but pt2kit could not save "
                f"{'it' if len(captured.not_saved) == 1 else 'them'} as a repro ({captured.said_not_saved()}): "
                "pt2kit's limit, not your program's"
            )
        if captured.failure is not None:
            signature = captured.failure.signature
            if compiles_its_failure_into_no_graph(program, captured.failure):
                where = f" (raised in {captured.raised_in})" if captured.raised_in else ""
                raise NotReproducible(
                    f"{script.name} fails ({signature}) and torch.compile handed its backend no graph; it fails the same "
                    "way with every torch.compile on backend='eager' (dynamo alone) and passes with torch.compile turned "
                    f"off (torch.compiler.set_stance('force_eager')): the bug is dynamo's, met before a graph reached the "
                    f"backend{where}: in its own handling of the frame, or a frame it ran or folded itself (a graph of no "
                    "ops reaches no backend; TORCH_LOGS=graph_code shows what it traced)",
                    program_fails_at=Stage.EAGER,
                )
            if program.nproc > 1 and captured.failure_frame is None and (captured.raised_in or "").startswith("torch/_dynamo/"):
                raise NotReproducible(
                    f"{script.name} fails ({signature}) in dynamo (raised in {captured.raised_in}), before torch.compile "
                    "handed its backend any graph or traced a frame: the bug is dynamo's (a job's ranks are not run again "
                    "with torch.compile turned off; --nproc-per-node 1 would)",
                    launch=f"torchrun --nproc-per-node {program.nproc}",
                    fails_in="dynamo",
                )
            raise ScriptFailedBeforeCompile(
                f"{script.name} raised before torch.compile compiled anything: {signature.exception}: {shown(signature.message)}"
            )
        fails_only_plainly(program)
        raise NoFailure(f"{script.name} ran to the end without compiling anything")
    if captured.failure is None and not accuracy:
        fails_only_plainly(program)
        raise NoFailure(
            f"{script.name} ran to the end without failing ({plural(len(captured.graph_paths) + len(captured.not_saved), 'graph')} compiled)"
            f"{captured.recompiling_hint(script.name)}; pass --accuracy to check the compiled results against eager"
        )


def bisect_case(
    session: Session, case: GraphCase, *, accuracy: Accuracy = False, aot_rows: bool = True, path: Path | None = None
) -> BisectReport:
    """Stage bisection of one saved graph (``minify repro``): its stages, then its aot graphs."""
    return bisect_saved(session, [(case, path)], str(path or case.label()), accuracy=accuracy, aot_rows=aot_rows)


def bisect_saved(
    session: Session,
    cases: list[tuple[GraphCase, Path | None]],
    name: str,
    *,
    accuracy: Accuracy = False,
    aot_rows: bool = True,
    recorded: list[Signature | None] | None = None,
) -> BisectReport:
    """Stage bisection of saved graphs, in the order one program compiled them (``name``: what they come from).

    No program runs: each graph's stages are asked side by side, and the first graph
    that fails at all is the culprit, pinned down to its aot graph like a captured one.
    ``recorded``: the failure each graph was saved with, where known: a graph is minified
    at the stage that fails that way, where a lighter one fails otherwise.
    """
    session.warm_up(inductor=any(case.backend == Stage.INDUCTOR for case, _ in cases), preload=[__name__])
    report = BisectReport(name, cases[0][0].backend, accuracy, session.run_dir, None)
    saved_as: dict[int, Failure] = {}
    for i, row in enumerate(run_stages_of(session, cases, accuracy=accuracy)):
        was = recorded[i] if recorded and i < len(recorded) else None
        row = handed_if_refused(session, report, row, Failure(was) if was is not None else None, accuracy=accuracy)
        report.rows.append(row)
        if was is not None:
            saved_as[id(row)] = Failure(was)
        # (with no recorded failure, a stage that raises as plain eager does is not the failure either)
        if (otherwise := program_failure(row, saved_as.get(id(row)), accuracy)) is not None:
            report.add_note(otherwise)
        first = row.first_failure
        if first is not None:
            session.log(f"  {row.label}: {first_fails(first)}")
            report.culprit = report.culprit or row
    if report.culprit is None and accuracy and aot_rows:
        report.culprit = judged_aot_graph(session, report, accuracy)
        if report.culprit is not None:
            report.add_note("its dynamo graph is right by the fp64 rule; its aot graph, whose outputs include what it saves for the backward, is not")
            return pin_down(session, report, accuracy=accuracy, aot_rows_wanted=False)
    # a culprit that fails only otherwise than it was saved may be one dynamo breaks when compiled again
    target = saved_as.get(id(report.culprit)) if report.culprit is not None else None
    first = report.culprit.first_failure if report.culprit is not None else None
    if target is not None and first is not None and first.failure is not None and first.failure.signature.same_kind(target.signature):
        target = None
    wanted = report.culprit is None or target is not None
    graphs = [(r.label, r.case) for r in report.rows if r.case is not None]
    broken = replay_breaks_of(session, graphs) if wanted else []
    if whole := compiled_whole(graphs, broken) if wanted else []:
        report.culprit = handed_culprit(session, report, target, whole, accuracy=accuracy) or (report.culprit if target else None)
    if report.culprit is None:
        what = name if len(cases) == 1 else f"each of the {len(cases)} graphs of {name}"
        error = NoFailure(f"{what} passes every stage" + (" (accuracy checked)" if accuracy else ""))
        error.replay_breaks = broken  # type: ignore[attr-defined]  # (asked already: why a graph that failed where it was saved passes alone)
        raise error
    return pin_down(session, report, accuracy=accuracy, aot_rows_wanted=aot_rows)


def aliasing_only(row: Row | None) -> bool:
    """Is ``row``'s failure only that its outputs alias one another otherwise than eager's (values all right)?

    A program sees that only through a later in-place or metadata change of one of them
    (:func:`~minifier.unit.aliasing.aliasing_divergence`), so a graph with a wrong value
    is the program's failure first.
    """
    first = row.first_failure if row is not None else None
    failure = first.failure if first is not None else None
    return failure is not None and failure.signature.kind == Kind.ACCURACY and accuracy_category(failure.details) == "aliasing"


def judged_aot_graph(session: Session, report: BisectReport, accuracy: Accuracy) -> Row | None:
    """The first aot graph that is wrong alone, of saved graphs that each pass whole (accuracy only).

    An aot forward's outputs include what it saves for the backward (a mask, an
    activation), judged like any output: exactly for bools and integers. A wrong one
    may never reach the dynamo graph's outputs, or reach them only where the fp64 rule
    lets them pass (a gradient made 0 where eager's rounding made it nonzero). The
    ``TORCHDYNAMO_REPRO_AFTER`` hook at level 4 judges each aot graph's first run, and
    ``minify run`` the aot graphs the program compiled, so a repro they saved for such a
    failure is lowered again here and its aot graphs judged alone.
    """
    for row in list(report.rows):
        if row.case is None or row.boundary != Boundary.DYNAMO or row.case.backend != report.backend:
            continue
        paths, _ = lower(session, row)
        rows = aot_rows(session, paths, accuracy=accuracy, stop_at=None) if paths else []
        wrong = next((r for r in rows if r.first_failure is not None), None)
        if wrong is not None:
            at = report.rows.index(row) + 1
            report.rows[at:at] = rows
            return wrong
    return None
