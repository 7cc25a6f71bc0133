"""Choosing the culprit: which failing graph is the program's failure, and does it fail again?

Once :mod:`minifier.bisect.steps` has run the graphs through their stages, a graph
*matches* when its first failure has the program's own signature (with
``--accuracy``, when it fails at all): :func:`matches`. The first graph that matches
is the culprit, unless the program itself failed in another one that does
(:func:`failed_owner`). Then :func:`pin_down` makes sure of it:

- a dynamo graph failing in the final backend is narrowed to the aot graph
  (forward, backward or inference) that fails the same way: one the program
  compiled itself (:func:`captured_aot_graphs`), or one made by lowering the dynamo
  graph (:func:`lower`). Seeing that failing compile happen again is also the check
  that the failure is not flaky. Before a minification, the graph the program failed
  to compile is trusted instead, and the reducer confirms it (``trust_program``);
- otherwise the culprit's query runs once more (:func:`second_look`), and a
  different answer is a :class:`~pt2kit.errors.FlakyFailure`.

When no graph matches, :func:`no_culprit` tries in turn: a graph that fails the
program's way once its higher-order ops are inlined; the program's own failing aot
graph, run alone (:func:`aot_culprit`); a graph dynamo cannot trace again, handed to
its backend without dynamo (both in :mod:`minifier.bisect.untraceable`); and otherwise a
second run of the program, which tells a flaky failure from one that needs the
whole program (:class:`~pt2kit.errors.NotReproducible`, with a hint at why: a
backend that cannot be written into a repro, a patch of torch, config pt2kit could
not carry, or a wrong answer that wants ``--accuracy``).

:func:`seen_in_the_program` spares the bisection its most expensive query: the final
stage of the graph the program failed in has already answered, in the program.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.markup import escape
from .report import BisectReport, FailureRecord, PinDownRetry, Row, matches, signature_of
from .plainly import (
    SETTER_HINT, dynamo_alone_said, dynamo_config_set, fails_only_plainly,
    fails_under_dynamo_alone, state_setters, around_its_graphs, dynamo_graphs, looks_like_wrong_answer,
)  # fmt: skip
from .steps import aot_rows, read_capture_again, run_each
from ..capture.result import CaptureResult
from ..capture.program import ProgramRun
from ..unit.case import Boundary, GraphCase
from ..unit.check import Stage
from ..capture.context import missing_config
from pt2kit.errors import FlakyFailure, NoFailure, NotReproducible, WithinTolerance, plural
from ..stages.flaky import failure_rate
from ..isolation.session import Session
from pt2kit.signature import Failure, Kind, Signature, memory_corrupted
from ..stages.run import Outcome, lower_case
from .untraceable import compiled_whole, handed_culprit, inlined_culprit, replay_breaks_of, replayed_in_pieces
from ..isolation.worker import QueryError

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


def pin_down(
    session: Session,
    report: BisectReport,
    *,
    accuracy: Accuracy,
    aot_rows_wanted: bool,
    captured: CaptureResult | None = None,
    trust_program: bool = False,
) -> BisectReport:
    """Make sure the culprit fails the same way again, and find its failing aot graph.

    A culprit failing in its final AOTAutograd backend is lowered, and its aot graphs
    run through that backend's compiler: when one fails with the same signature, the
    failing compile has happened again, and that is the check for flakiness. Otherwise
    the culprit's query simply runs once more.

    With ``trust_program`` (a minification follows), the aot graph the program itself
    failed to compile, with the program's inputs, is not compiled again: on a real
    model that is the most expensive query of a run, and its answer is already known.
    Its cheap stage still runs. The reducer then confirms the failure with its first
    failing candidate, or, if none fails, by running the graph once (see
    :meth:`minifier.reduce.engine.Reducer.assume`); if the graph does not fail alone,
    :func:`pin_down_again` pins the culprit down again the way it did before (from
    :attr:`BisectReport.retry`): every aot graph compiled, and a second look.
    """
    culprit = report.culprit
    assert culprit is not None and culprit.first_failure is not None and culprit.case is not None
    outcome = culprit.first_failure
    target = cast(Signature, signature_of(outcome))  # (the culprit's first failure has one)
    captured_aot = captured_aot_graphs(captured, culprit)
    if aot_rows_wanted and culprit.boundary == Boundary.DYNAMO and outcome.stage == report.backend:
        paths, lowering_note = (captured_aot[0], None) if captured_aot else lower(session, culprit)
        passed, failed = program_verdicts(captured, captured_aot, accuracy=accuracy, trust=trust_program)
        if failed:
            report.retry = PinDownRetry(list(report.rows), culprit, report.note, aot_rows_wanted, captured)
        rows = (
            aot_rows(
                session,
                paths,
                accuracy=accuracy,
                stop_at=target,
                passed=passed,
                failed=failed,
                early=captured.early if captured_aot and captured else None,
            )
            if paths
            else []
        )
        at = report.rows.index(culprit) + 1
        report.rows[at:at] = rows
        aot_culprit = next((r for r in rows if r.first_failure and signature_of(r.first_failure) == target), None)
        internal = inductor_internal_ops(aot_culprit) if target.kind == Kind.ACCURACY else []
        if aot_culprit is not None and not internal:
            report.culprit = aot_culprit
            if memory_corrupted(aot_culprit.first_failure.failure if aot_culprit.first_failure else None):
                report.failure_rate = second_look(session, [aot_culprit], accuracy=accuracy, captured=captured)
            return finish(session, report)
        if internal and aot_culprit is not None:  # (only a row has internal ops)
            report.add_note(f"{aot_culprit.label} holds Inductor's own random ops ({', '.join(internal)}), whose eager kernels draw other numbers than Inductor's; the dynamo graph is the unit to minify")
        elif rows:
            report.add_note(
                "the aot graphs do not fail the same way in isolation; the dynamo graph is the smallest unit that does"
            )
        elif lowering_note:
            report.add_note(lowering_note)
        # (the culprit's own: an aot graph that fails otherwise alone than in the program, deterministically, is not
        # the program's failure and is shown in the table, never a reason to give up the dynamo graph that is)
        report.failure_rate = second_look(session, [culprit], accuracy=accuracy, captured=captured)
    else:
        report.failure_rate = second_look(session, [culprit], accuracy=accuracy, captured=captured)
    return finish(session, report)


def program_verdicts(
    captured: CaptureResult | None,
    captured_aot: tuple[list[str], set[str], set[str]] | None,
    *,
    accuracy: Accuracy,
    trust: bool,
) -> tuple[set[str], dict[str, Failure]]:
    """What the program's own run says of its aot graphs' final stage: (passed, failed), by graph file.

    Without ``--accuracy``: the graphs whose first run returned passed, and the one the
    program failed to compile or run failed, with the program's failure. With it: the
    capture's verdict on each graph's first compiled run (:meth:`minifier.capture.recorder.Recorder.judge`).
    A failure is trusted only with ``trust`` (a minification follows to confirm it).
    """
    if captured is None or captured_aot is None:
        return set(), {}
    if accuracy:
        verdicts = {
            path: captured.judged[Path(path).parent.name]
            for path in captured_aot[0]
            if Path(path).parent.name in captured.judged
        }
        failing = {path: verdict for path, verdict in verdicts.items() if verdict is not None}
        return {path for path, verdict in verdicts.items() if verdict is None}, failing if trust else {}
    failing = {path: captured.failure for path in captured_aot[2]} if captured.failure and trust else {}
    return captured_aot[1], failing


def pin_down_again(session: Session, report: BisectReport) -> BisectReport:
    """``report``'s culprit pinned down again without the program's word (:attr:`BisectReport.retry`):
    from the rows it had before, every aot graph compiled, and a second look."""
    retry = report.retry
    assert retry is not None
    report.rows, report.culprit, report.note, report.retry = list(retry.rows), retry.culprit, retry.note, None
    return pin_down(
        session,
        report,
        accuracy=report.accuracy,
        aot_rows_wanted=retry.aot_rows_wanted,
        captured=retry.captured,
        trust_program=False,
    )


def inductor_internal_ops(row: Row | None) -> list[str]:
    """Ops of ``row``'s graph that exist only inside Inductor (its RNG prims: ``prims.inductor_random``...).

    Inductor's decompositions put them into the aot graph it compiles (random ops,
    unless ``fallback_random``). A repro can still run them (it imports Inductor's
    prims), which is enough for a crash. For a wrong answer it is not: their eager
    kernels draw from another stream than Inductor's code, so eager and compiled
    disagree whatever the bug, and the user's own op (``torch.rand``, dropout) is in
    the dynamo graph, which is the unit to minify then.
    """
    if row is None or row.case is None:
        return []
    return sorted({op for op in row.case.op_names() if op.startswith("prims.inductor_")})


def captured_aot_graphs(captured: CaptureResult | None, row: Row) -> tuple[list[str], set[str], set[str]] | None:
    """The aot graphs the program itself compiled for ``row``'s dynamo graph: all, those that ran fine, the one it failed on."""
    if captured is None or row.case is None or row.label.endswith("(inlined)"):
        return None
    graphs = captured.aot.get(row.case.index) or []
    if not graphs:
        return None
    failed = captured.failed_graph
    paths = [str(g.path) for g in graphs]  # (the capture keeps only aot graphs it saved)
    passed = {str(g.path) for g in graphs if not g.failure and Path(str(g.path)).parent.name in captured.ran - {failed}}
    failing = {path for path in paths if Path(path).parent.name == failed}
    return paths, passed, failing


def lower(session: Session, row: Row) -> tuple[list[str], str | None]:
    """The aot graphs of a dynamo graph (see :func:`minifier.stages.run.lower_case`); degrades to none.

    A backend that crashes or hangs while being lowered, or a lowering that fails for
    a reason of pt2kit's own, leaves the dynamo graph as the unit to minify, with a note.
    """
    assert row.case is not None
    try:
        lowered = session.query(
            functools.partial(lower_case, row.case, session.run_dir / "captured" / "aot"),
            f"{row.label}: lowering to aot graphs",
        )
    except QueryError as e:
        (session.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        (session.run_dir / "logs" / f"{row.label}-lowering-error.txt").write_text(str(e))
        return [], f"lowering {row.label} to aot graphs failed inside pt2kit; the dynamo graph is the unit to minify"
    if lowered.value is None:
        assert lowered.failure is not None
        return (
            [],
            f"lowering {row.label} to aot graphs ended in {lowered.failure.signature}; the dynamo graph is the unit to minify",
        )
    return lowered.value


def second_look(
    session: Session, rows: list[Row], *, accuracy: Accuracy, captured: CaptureResult | None = None
) -> float | None:
    """Run each row's last stage again; when an outcome changes, measure how often it fails.

    A failure that shows again in some of :data:`~minifier.stages.flaky.LOOKS` runs is flaky but minifiable:
    its rate (failing runs over all, the program's first one included) comes back, and
    the row keeps its failing outcome. One that never shows again alone is a
    :class:`FlakyFailure`. Neither, but not reproducible (exit 5, named), when what made
    it fail in the program is not in the repro: inputs pt2kit cannot rebuild, or changes
    to torch's compiler tables no repro can carry (``captured.state_missing``).
    Returns the lowest rate measured (None: nothing changed).
    """
    rate = None
    looked = [row for row in rows if row.case is not None and row.outcomes]
    plan = [(case, list(row.outcomes)[-1]) for row in looked if (case := row.case) is not None]  # (all of them)
    labels = [f"{row.label} through {stage} again: checking it is not flaky" for row, (_, stage) in zip(looked, plan)]
    # one at a time, in a fixed order: a flaky failure's answers may hang on which compile comes first
    again = run_each(session, plan, accuracy=accuracy, labels=labels, slots=1)
    for row, (case, stage) in zip(looked, plan):
        first, second = row.outcomes[stage], again[(id(case), stage)]
        if first.failure is None and second.failure is not None:
            first, second = second, first  # (the failure seen is the one measured, never a pass)
        same = signature_of(second) == signature_of(first) or wrong_either_way(first, second)
        if same and not memory_corrupted(first.failure):
            row.outcomes[stage] = second  # an isolated run's answer now, not only the program's
            continue
        # it failed in one look of two, or wrote memory past a buffer (whether that crashes hangs on the allocator)
        if not same:
            if case.unsupported:  # not flaky: what made it fail in the program is not in the graph's repro
                raise NotReproducible(
                    f"{row.label} failed in the program ({_describe(first)}) but not alone, and it takes inputs pt2kit cannot rebuild yet: "
                    + "; ".join(case.unsupported),
                    inputs_unsupported=case.unsupported,
                )
            if captured is not None and captured.state_missing:
                raise NotReproducible(
                    f"{row.label} failed in the program ({_describe(first)}) but not alone, and " + STATE_MISSING_HINT + "; ".join(captured.state_missing),
                    state_missing=captured.state_missing,
                )
            if captured is not None and captured.unrecoverable:  # what runs alone is not the program's backend
                raise NotReproducible(
                    f"{row.label} failed in the program ({_describe(first)}) but not alone, and "
                    + "; ".join(captured.unrecoverable)
                    + f" ({REGISTER_HINT})"
                )
        measured = failure_rate(session, case, stage, first, second, accuracy=accuracy, label=row.label)
        rate = measured if rate is None else min(rate, measured)  # (the row keeps its failing outcome)
    return rate


def wrong_either_way(first: Outcome, second: Outcome) -> bool:
    """Is ``second`` (the dynamo graph run alone) the wrong answer ``first`` lent it, judged otherwise?

    The capture judged an aot graph against itself run eagerly; alone, the dynamo graph is judged against
    itself, AOTAutograd included: a wrong dtype AOTAutograd already made reads as wrong values in the first.
    """
    return (
        first.lent_by is not None
        and second.failure is not None
        and second.failure.signature.kind == Kind.ACCURACY
        and first.failure is not None
        and first.failure.signature.kind == Kind.ACCURACY
    )


#: What a program did that no repro can carry (``captured.state_missing`` follows it).
STATE_MISSING_HINT = "the program changed torch (its compiler tables, or functions and attributes) in ways no repro can carry: "
#: What a user can do about a backend no repro can name.
REGISTER_HINT = "register it with torch._dynamo.register_backend in an importable module, or pass --backend"


def failed_owner(captured: CaptureResult) -> str | None:
    """The dynamo graph (``g3``) the program failed in, when the capture knows it."""
    return str(captured.failed_id.owner) if captured.failed_id else None


def seen_in_the_program(
    captured: CaptureResult, cases: list[tuple[GraphCase, Path]], final: str, accuracy: Accuracy
) -> dict[tuple[int, str], Outcome]:
    """The final-stage outcome the program's own run already showed, so it is not paid for again.

    The program compiled the graph it failed in with its final backend, and failed:
    that graph's row gets that outcome without compiling the whole graph once more
    (the expensive query of a bisection). Its eager stages still run, to say whether
    an earlier stage fails too; its failing aot graph runs once, alone, next.

    With ``--accuracy`` the capture judged the first compiled run of every aot graph;
    a dynamo graph one of whose aot graphs was judged wrong gets that verdict. A pass
    says nothing of the dynamo graph: the judge compares an aot graph with itself, run
    eagerly, and what Inductor did before that graph existed (pre-grad passes, its
    decompositions) is already in both.
    """
    if accuracy:
        return judged_in_the_program(captured, cases, final)
    if captured.failure is None or captured.failed_id is None:
        return {}
    owner = str(captured.failed_id.owner)
    return {
        (id(case), final): Outcome(final, captured.failure, 0.0, seen_in_program=True)
        for case, _ in cases
        if case.label() == owner and case.backend == final
    }


def judged_in_the_program(
    captured: CaptureResult, cases: list[tuple[GraphCase, Path]], final: str
) -> dict[tuple[int, str], Outcome]:
    """``--accuracy``: the dynamo graphs whose final stage the capture saw go wrong (an aot graph's first run judged wrong)."""
    known = {}
    for case, _ in cases:
        labels = [Path(g.path).parent.name for g in captured.aot.get(case.index, []) if g.path is not None]
        lender = next((label for label in labels if captured.judged.get(label) is not None), None)
        if case.backend == final and lender is not None:
            known[(id(case), final)] = Outcome(final, captured.judged[lender], 0.0, seen_in_program=True, lent_by=lender)
    return known


def no_culprit(session: Session, report: BisectReport, program: ProgramRun, captured: CaptureResult) -> BisectReport:
    """No graph fails like the program did: flaky, or a failure that needs the whole program."""
    failing = [r for r in report.rows if r.first_failure is not None]
    if captured.failure is None:
        if failing:  # --accuracy on a program that ran fine, and a graph errors out
            report.culprit = failing[0]
            return finish(session, report)
        fails_only_plainly(program)
        raise NoFailure(
            f"every graph of {program.script.name} passes every stage"
            + (" (accuracy checked)" if report.accuracy else "")
            + captured.recompiling_hint(program.script.name)
        )
    if inlined_culprit(session, report, captured.failure) is not None:
        return pin_down(session, report, accuracy=report.accuracy, aot_rows_wanted=True)
    if aot_culprit(session, report, captured) is not None:
        report.add_note("the program's failing aot graph, run alone (its dynamo graph cannot be rebuilt in isolation)")
        return finish(session, report)
    broken = replay_breaks_of(session, [(r.label, r.case) for r in report.rows if r.case is not None])
    whole = compiled_whole([(r.label, r.case) for r in report.rows if r.case is not None], broken)
    if handed_culprit(session, report, captured.failure, whole, accuracy=report.accuracy) is not None:
        return pin_down(session, report, accuracy=report.accuracy, aot_rows_wanted=True)
    dynamo_alone = fails_under_dynamo_alone(program, captured.failure)
    # A program that fails again with no compiler at all is neither flaky nor a graph's: no second capture, no second look.
    if not dynamo_alone:
        again = read_capture_again(session, program)
        if timed_out_then_failed(captured, again):
            return bisect_as_failed_again(session, report, captured, again)
        if again.failure is None or again.failure.signature != captured.failure.signature:
            raise FlakyFailure(
                f"flaky: {program.script.name} failed with {captured.failure.signature}, then {again.failure.signature if again.failure else 'passed'} on a second run"
            )
        # does any graph fail now?
        report.failure_rate = second_look(session, report.rows, accuracy=report.accuracy, captured=captured)
    detail = (
        f"; graphs fail differently: {', '.join(f'{r.label}: {r.first_failure.failure.signature}' for r in failing)}"  # type: ignore[union-attr]
        if failing
        else ""
    )
    hint, unsupported = "", sorted({u for r in report.rows if r.case is not None for u in r.case.unsupported})
    # a wrong answer every graph is within the fp64 rule's tolerance of: WithinTolerance, which the bisection takes further
    wrong, within = looks_like_wrong_answer(captured.failure) and report.accuracy is True, False
    named: dict[str, Any] = {"inputs_unsupported": unsupported} if unsupported else {}
    if captured.state_missing:
        named["state_missing"] = captured.state_missing
    if unsupported:
        hint = "; its graphs take inputs pt2kit cannot rebuild yet: " + "; ".join(unsupported)
    # (a graph dynamo breaks on replay explains nothing when the program fails without a compiler anyway)
    elif (pieces := replayed_in_pieces(session, [], broken)) and not dynamo_alone:
        hint = f"; {pieces}"
    elif captured.state_missing:
        hint = "; " + STATE_MISSING_HINT + "; ".join(
            captured.state_missing
        )
    elif captured.unrecoverable:
        hint = (
            "; "
            + "; ".join(captured.unrecoverable)
            + f" ({REGISTER_HINT})"
        )
    elif captured.patches:
        patched = ", ".join(f"{target} (by {fn})" for target, fn in sorted(captured.patches.items()))
        hint = f"; the program patches torch ({patched})" + (
            ""
            if captured.patches_carried
            else ", and the repro cannot carry that patch: move it to a module the repro can import"
        )
    elif missing := sorted({m for r in report.rows if r.case is not None for m in missing_config(r.case.config)}):
        hint = (
            "; it may need compiler config pt2kit could not carry: "
            + "; ".join(missing)
            + " (define it in an importable module)"
        )
    elif dynamo_alone:
        hint, named["program_fails_at"] = f"; {dynamo_alone_said(failing, captured.compiling_frame, captured.raised_in)}", Stage.EAGER
        if config := dynamo_config_set([r.case.config for r in report.rows if r.case is not None]):
            named["config"] = {"torch._dynamo.config": config}
            hint += "; under the dynamo config it sets (first suspects): " + ", ".join(f"{k} = {v!r}" for k, v in sorted(config.items()))
    elif looks_like_wrong_answer(captured.failure) and not report.accuracy:
        hint = "; the program's failure looks like a wrong answer: run with --accuracy to compare compiled results against an fp64 reference"
    elif (around := around_its_graphs(session, program, captured.failure, report.backend, dynamo_graphs(report))) is not None:
        hint, named["program_fails_at"] = f"; {around[0]}", around[1]
        if within := (around[1] == report.backend and wrong):
            hint = (  # (the likelier reading first: a single-call graph is judged whole by the fp64 rule)
                f"; every graph is within the fp64 rule's tolerance: if {report.backend}'s rounding is what the program's "
                f"check sees, --strict-accuracy judges each graph bit for bit against eager; otherwise, {around[0]}"
            )
    elif within := wrong:
        hint = (
            "; every graph is within the fp64 rule's tolerance (rounding no worse than eager's own against fp64 passes): "
            "--strict-accuracy judges them bit for bit against eager"
        )
    if setters := state_setters(dynamo_graphs(report)):
        hint = f"; {', '.join(setters)}: {SETTER_HINT}{hint}"  # (the likelier reading first)
    failed = FailureRecord.of(captured.failure, named.get("program_fails_at"))  # (report.json's, as a minified run's)
    raise (WithinTolerance if within else NotReproducible)(
        f"{program.script.name} fails ({captured.failure.signature}) but none of its {plural(len(report.rows), 'graph')} fails that way in isolation{detail}{hint}",
        **named,
        **({"failure": failed.to_json()} if failed is not None else {}),
    )


def timed_out_then_failed(captured: CaptureResult, again: CaptureResult) -> bool:
    """The program ran out of time once, then failed otherwise: the time limit met a loaded machine, not a hang.

    A timeout is weak evidence (a compile that takes 25 s on a busy machine runs out
    of ``--timeout 20``); a failure that raises is not. Such a program is not flaky:
    its second run's failure is the one to find.
    """
    return (
        captured.failure is not None
        and captured.failure.signature.kind == Kind.TIMEOUT
        and again.failure is not None
        and again.failure.signature.kind != Kind.TIMEOUT
    )


def bisect_as_failed_again(
    session: Session, report: BisectReport, captured: CaptureResult, again: CaptureResult
) -> BisectReport:
    """The bisection with the program's second failure as its target (:func:`timed_out_then_failed`)."""
    assert captured.failure is not None and again.failure is not None
    said = (
        f"the program's first run ran out of time ({captured.failure.details or 'timeout'}); "
        f"its second run failed with {again.failure.signature}, the failure bisected"
    )
    report.add_note(said)
    session.log(escape(said))
    report.original = again.failure
    culprit = next(
        (r for r in report.rows if r.first_failure is not None and matches(r.first_failure, again.failure, report.accuracy)),
        None,
    )
    if culprit is None:
        raise NotReproducible(
            f"the program failed with {again.failure.signature} (its first run ran out of time), "
            "but none of its graphs fails that way in isolation"
        )
    report.culprit = culprit
    return pin_down(session, report, accuracy=report.accuracy, aot_rows_wanted=True, captured=again)


def aot_culprit(session: Session, report: BisectReport, captured: CaptureResult) -> Row | None:
    """The failing aot graph the program itself compiled, when no dynamo graph stands for it.

    (The dynamo graph may hold inputs a repro cannot rebuild yet, such as DTensors, or call what no repro can
    import: compiled autograd's bound functions.) With ``--accuracy``, one whose first run was judged wrong.
    """
    wanted = captured.failing_aot_graphs(report.accuracy)
    if captured.failure is None or not wanted:
        return None
    paths = [g.path for graphs in captured.aot.values() for g in graphs if g.path is not None and Path(g.path).parent.name in wanted]
    rows = aot_rows(session, paths, accuracy=report.accuracy, stop_at=captured.failure.signature) if paths else []
    row = next(
        (
            r
            for r in rows
            if r.first_failure is not None and matches(r.first_failure, captured.failure, report.accuracy)
        ),
        None,
    )
    if row is not None:
        report.rows.extend(rows)
        report.culprit = row
    return row


def _describe(outcome: Outcome) -> str:
    return "pass" if outcome.failure is None else str(outcome.failure.signature)


def finish(session: Session, report: BisectReport) -> BisectReport:
    culprit, original = report.culprit, report.original  # (under --accuracy a wrong answer matches any failure)
    if culprit and culprit.first_failure and original and not looks_like_wrong_answer(original) and (shown := signature_of(culprit.first_failure)) and shown.kind == Kind.ACCURACY:
        report.add_note(f"the program failed with {original.signature}, no wrong answer; {culprit.label} alone gives one (--accuracy), which its repro shows: another failure of the same graph")
    report.queries = session.queries
    report.seconds = session.seconds
    return report
