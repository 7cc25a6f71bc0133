"""Minification, end to end: failing program → stage bisection → minimal ``repro.py``.

:func:`minify_script` is what ``minify run`` does:

1. :func:`minifier.bisect.bisection.bisect_script` captures the program's graphs, finds the
   first failing graph and stage, and checks the failure is not flaky;
2. :func:`~minifier.bisect.choice.choose_graph` picks the graph to shrink: the aot graph when the failure
   reproduces after AOTAutograd (``--after auto``), else the dynamo graph;
3. :func:`minify_case` profiles that graph once, then runs the
   :class:`~minifier.reduce.engine.Reducer` with every candidate answered by an isolated
   query through the failing stage, checkpointing the best candidate as it goes;
4. the best candidate is written as ``repro.py`` (random inputs when they reproduce
   the failure, else a content-addressed data file), read back and run once more to
   confirm it fails the same way, and ``report.json`` follows docs/minify.md.

Ctrl-C at any point during step 3 writes the best repro so far; running the same
command again finds the interrupted run's checkpoint and resumes from it with its
query cache, in a new run directory.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
import torch.fx as fx

from .bisect.bisection import bisect_saved, bisect_script, flaky_or_not_alone
from .bisect.report import BisectReport, Row
from .bisect.culprit import pin_down_again
from .bisect.untraceable import replayed_in_pieces
from .bisect.probes import AskAhead
from .capture.program import ProgramRun
from .bisect.choice import check_after, choose_graph, lowered_from
from .result import BISECTED, Bisected, MinifyResult, save_bisected
from .capture.blame import Blame
from .unit.case import GraphCase
from .unit.accuracy import refused_by_eager
from .unit.check import Check, Stage
from .unit.devices import devices_of, moved_to
from .stages.inline import flattened
from pt2kit.errors import CorruptRecord, FlakyFailure, Interrupted, NoFailure, NotReproducible, plural
from .stages.flaky import LOOKS, measured_rate, tries_for
from .reduce.checkpoint import (
    CHECKPOINT, CheckpointState, Status, find_checkpoint, fingerprint, holding, load_checkpoint, save_checkpoint,
)  # fmt: skip
from .pages.minify_page import write_run_report
from .reduce.passes import PASSES
from .reduce.engine import Reducer, Unconfirmed
from .reduce.queries import CandidateQuery, OriginRef, write_best, write_run_repro
from .isolation.executor import Handle
from .isolation.session import Session
from .isolation.worker import QueryResult
from pt2kit.signature import Failure, Kind, memory_corrupted
from .stages.profile import EagerRunRaised, profile_case, profile_or_why, realize
from .stages.run import Outcome, ask
from .capture.torch_repro import load_any_repro
from .stages.elsewhere import get_ready, verify
from .repro.files import load_repro, write_repro
from .repro.writer import render
from .afterwards import finished
from .releases.checks import Preparing
from .releases.environments import ReleaseSpec

if TYPE_CHECKING:
    from .unit.accuracy import Accuracy


# --------------------------------------------------------------------------- #
# Minifying one graph
# --------------------------------------------------------------------------- #


def bisection_ran(start: GraphCase, case: GraphCase, stage: str) -> bool:
    """Is the reducer's starting graph the one the bisection just saw fail (``case``)?

    The canonical form drops outputs that only pass a graph input through (an aot
    forward graph returns its primals for the backward), and the inputs nothing else
    reads. Neither changes what a compiler does with the ops, so a start that differs
    from ``case`` only that way is not compiled again: on a large graph that is the
    most expensive query of the run. (The written repro is verified at the end anyway.)
    """
    text = render(start, stage=stage)
    return text == render(case, stage=stage) or text == render(without_passthrough(case), stage=stage)


def without_passthrough(case: GraphCase) -> GraphCase:
    """``case`` without outputs that are graph inputs, and without the inputs then unused."""
    graph = copy.deepcopy(case.gm.graph)
    output = graph.output_node()
    flat: list[fx.Node] = []
    fx.node.map_arg(output.args[0], flat.append)
    output.args = (tuple(dict.fromkeys(n for n in flat if n.op != "placeholder")),)
    unused = set()
    for placeholder in graph.find_nodes(op="placeholder"):
        if not placeholder.users:
            unused.add(str(placeholder.target))
            graph.erase_node(placeholder)
    return case.replace(gm=fx.GraphModule(case.gm, graph), inputs=[i for i in case.inputs if i.name not in unused])


@dataclass(frozen=True)
class Provenance:
    """Where a graph to minify comes from, besides the graph and its :class:`~minifier.unit.check.Check`.

    ``failure``: the failure as seen (its details go to the report); ``key``: the run's
    fingerprint (a rerun of the same command resumes its checkpoint); ``resume``: the
    interrupted run's checkpoint to start from; ``bisect``: the bisection that chose the
    graph; ``blame``: the kernel the program failed in (the reducer asks about its nodes
    first) and the file the graph was read from (whose profile the bisection may have asked
    already: ``bisect.profiled``); ``failure_rate``: a flaky failure's, when known (else the
    bisection's): every question is then asked several times (:mod:`minifier.stages.flaky`).
    """

    failure: Failure
    key: str
    resume: Path | None = None
    bisect: BisectReport | None = None
    blame: Blame = Blame()
    failure_rate: float | None = None
    bisected: Bisected | None = None  # a resumed run's: what the interrupted run saved of its bisection


@dataclass
class Reduction:
    """A reducer ready to run: the query it asks each candidate, and the checkpoint it writes as it improves."""

    reducer: Reducer
    query: CandidateQuery
    checkpoint: Path
    state: CheckpointState


def minify_case(session: Session, case: GraphCase, check: Check, came: Provenance) -> MinifyResult:
    """Shrink ``case`` while it fails as ``check`` asks; write repro.py and report.json.

    A repro that does not fail when checked, from a graph the program failed to compile
    (trusted, not compiled again), has its original's rate measured; a flaky one is
    minified again with repeated questions.
    """
    stage = check.stage
    # (already asked for when a bisection came first)
    session.warm_up(inductor=stage == Stage.INDUCTOR, preload=[__name__])
    before = case
    if came.resume is None:
        case = flattened(session, case, check)
    bisect = came.bisect
    failure_rate = (
        came.failure_rate if came.failure_rate is not None else bisect.failure_rate if bisect is not None else None
    )
    source = came.blame.graph_file
    prior = bisect.profiled.get(str(source)) if bisect is not None and source is not None and case is before else None
    reduction = start_reducer(session, case, check.asked(tries_for(failure_rate)), came, prior)
    get_ready(session, case, stage)  # (torch's imports, for the written repro's run elsewhere, paid while the reducer works)
    if bisect is not None:  # (a rerun resumes without bisecting again, and reports this)
        save_bisected(session.run_dir, bisect, before, came.failure.signature)
    with holding(session.run_dir):  # a second run of this command meanwhile starts afresh
        path, verified, notes = reduce_and_write(session, reduction, case)
    asked = reduction.query.check
    if not verified and asked.tries == 1:
        rate = measured_rate(session, case, asked)
        if rate == 0:  # seen in the program and by the reducer, then in none of the looks
            raise FlakyFailure(
                f"flaky: {case.label()} failed through {stage} with {check.failure}, then passed {LOOKS} of {LOOKS} times alone",
                failure_rate=0.0,
            )
        if 0 < rate < 1:
            session.log(
                f"{case.label()} fails in {rate:.0%} of its runs: flaky; minifying it again with repeated questions"
            )
            return minify_case(session, before, check, dataclasses.replace(came, resume=None, failure_rate=rate))
    result = MinifyResult(
        failure=Outcome(stage, came.failure, 0.0),
        before=before,
        after=load_repro(path).case,
        repro=path,
        queries=session.queries,
        reduction_queries=reduction.reducer.queries,
        seconds=session.seconds,
        verified=verified,
        accuracy=asked.accuracy,
        bisect=bisect,
        resumed_from=str(came.resume.parent) if came.resume is not None else None,
        bisected=came.bisected,
        run_dir=session.run_dir,
        failure_rate=failure_rate,
    )
    result.timeline = session.full_timeline()
    result.notes.extend(([bisect.note] if bisect is not None and bisect.note else []) + session.notes + notes)
    write_run_report(session.run_dir, result.to_json())
    return result


def start_reducer(
    session: Session, case: GraphCase, check: Check, came: Provenance, prior: QueryResult[Any] | Handle | None
) -> Reduction:
    """The reducer for ``case``, its query, and its checkpoint.

    The graph is saved as the run's origin (each query's child reads it from there) and
    profiled once (``prior``: the bisection's profile of it, when it asked already). The
    reducer starts from a checkpoint (``came.resume``), asks about the blamed kernel's nodes
    first, and takes the bisection's word for the graph it just saw fail.
    """
    stage = check.stage
    origin_path = write_repro(
        case, session.run_dir / "work" / "origin", stage=stage, failure=check.failure, accuracy=check.accuracy,
        note="The graph before minification.",
    )  # fmt: skip
    # an earlier origin's reference outputs; this one's are saved by its own queries
    OriginRef(origin_path).references.unlink(missing_ok=True)
    values = session.run_dir / "work" / "values.pt"
    # (no wrong answer: eager may raise where the compiled graph crashes, pytorch#195402's IndexError and abort;
    # where eager raises the very error the compiled run does, the graph is not the bug's: its inputs are)
    partial = refused_by_eager(check.failure) or (check.failure is not None and check.failure.kind != Kind.ACCURACY)
    unless = check.failure.exception if check.failure is not None and check.failure.kind == Kind.RUNTIME_ERROR else None
    profiled = original_profile(session, case, values, prior, partial=partial, unless=unless)
    query = CandidateQuery(session, OriginRef(origin_path, values), check)
    checkpoint = session.run_dir / CHECKPOINT
    state = CheckpointState(came.key, str(origin_path), check)
    reducer = Reducer(
        case, profiled, check.failure, query, on_improve=lambda r: save_checkpoint(r, checkpoint, state),
        jobs=session.jobs,
    )  # fmt: skip
    query.reducer = reducer
    reducer.reprofile = lambda reduced: (
        session.query(
            functools.partial(profile_case, realize(reduced, None, values), values, update=True, partial=partial, unless=unless),
            "profiling the graph on its resized inputs",
        ).value
    )
    reducer.on_pass = lambda name, r: setattr(query, "current_pass", name)
    reducer.blamed = tuple(came.blame.nodes(list(reducer.best.kept)))
    if reducer.blamed:
        blamed = ", ".join(reducer.blamed)
        session.log(
            f"the program failed in Inductor kernel {came.blame.kernel}, made of {blamed}: asking about those first"
        )
    if came.resume is not None:
        reducer.cache, reducer.best = load_checkpoint(came.resume)
        cached, kept = len(reducer.cache), len(reducer.best.kept)
        session.log(
            f"resuming {came.resume.parent.name}: {cached} answers cached, best so far has {plural(kept, 'node')}"
        )
        reducer.reprofiled()
    bisect = came.bisect
    if bisect is not None and came.resume is None and bisection_ran(reducer.best_case(), case, stage):
        # The bisection just ran this very graph through this stage and saw the target.
        seen_only_in_program = bisect.failure is not None and bisect.failure.seen_in_program
        reducer.assume(reducer.best, True, confirmed=not seen_only_in_program)
    return Reduction(reducer, query, checkpoint, state)


def original_profile(
    session: Session, case: GraphCase, values: Path, prior: QueryResult[Any] | Handle | None, *, partial: bool = False,
    unless: str | None = None,
) -> Any:
    """The original graph's profile (each node's value, saved to ``values``), from one eager run.

    ``prior``: the bisection's, when it profiled this very graph beside its last stages (still running: its handle).
    ``partial``: the failure is that eager raises, or no wrong answer, so the profile goes as far as eager does,
    ``unless`` eager raises that exception (:func:`~minifier.stages.profile.eager_values`).
    """
    prior = session.wait(prior) if isinstance(prior, Handle) else prior  # (started beside the bisection's last stages)
    if partial and prior is not None and isinstance(prior.value, EagerRunRaised):
        prior = None  # (the bisection's ran eagerly in full)
    profiled = prior or session.query(
        functools.partial(profile_or_why, case, values, partial=partial, unless=unless), "profiling the graph (one eager run)"
    )
    if isinstance(profiled.value, EagerRunRaised):  # its inputs came from a graph that computed them wrong
        raise NotReproducible(
            f"{case.label()} raises when run eagerly on its inputs as rebuilt ({profiled.value.error}): a graph "
            "compiled before it computed them wrong (with --accuracy each graph's outputs are judged), or an input "
            "held what its copy does not (a view reaching beyond its own elements into its base's storage)"
        )
    if profiled.value is None:
        raise NotReproducible(
            f"the graph cannot run in eager: {profiled.failure.signature if profiled.failure else '?'}"
        )
    return profiled.value


def reduce_and_write(session: Session, reduction: Reduction, case: GraphCase) -> tuple[Path, bool, list[str]]:
    """Run the passes from the reducer's best candidate and write the best as repro.py: (path, verified, notes).

    Ctrl-C writes the best repro so far and an ``interrupted`` checkpoint to resume from.
    A graph whose rebuild does not fail is written as captured (:func:`unreduced`).
    """
    reducer, query, checkpoint, state = reduction.reducer, reduction.query, reduction.checkpoint, reduction.state
    check = query.check
    if not reducer.consider(reducer.best):
        path = unreduced(session, case, check)
        verified, unverified = verify(session, path, check, case)
        note = f"pt2kit's rebuild of {case.label()} does not fail, the graph as captured does: repro.py is that graph, not reduced"
        return path, verified, [note] + ([unverified] if unverified else [])
    save_checkpoint(reducer, checkpoint, state)
    try:
        reducer.run(PASSES)
    except KeyboardInterrupt:
        path = write_best(session, reducer, query.origin, check)
        save_checkpoint(reducer, checkpoint, state.marked(Status.INTERRUPTED))
        raise Interrupted(
            f"interrupted: the best repro so far ({plural(len(reducer.best.kept), 'node')}) is {path}; run the same command again to resume"
        ) from None
    path = write_best(session, reducer, query.origin, check)
    verified, unverified = verify(session, path, check, reducer.best_case())
    save_checkpoint(reducer, checkpoint, state.marked(Status.REDUCED))  # done once the whole run is
    return path, verified, [unverified] if unverified else []


def unreduced(session: Session, case: GraphCase, check: Check) -> Path:
    """The graph as captured, written as the repro, when it fails alone but pt2kit's rebuild of it does not.

    The reducer's canonical form (:meth:`~minifier.reduce.engine.Reducer.normalize`) drops what
    it takes for dead code and rebuilds the graph; a failure that needs what it dropped
    is pt2kit's limit, and the user still gets a repro that fails. When the captured
    graph does not fail alone either, that is said, with no file that fails to point at.
    """
    target = check.failure
    outcome = ask(session, case, check, f"{case.label()} as captured, alone")
    if not outcome.fails(check):
        got = "passes" if outcome.failure is None else f"fails with {outcome.failure.signature}"
        raise NotReproducible(
            f"{case.label()} does not fail with {target} when it runs alone: as captured it {got}, and pt2kit's rebuild of it passes"
        )
    note = "pt2kit could not reduce this graph (its rebuild of it does not fail): this is the graph as captured."
    return write_run_repro(session, case, check, note=note)


# --------------------------------------------------------------------------- #
# Minifying a program
# --------------------------------------------------------------------------- #


def minify_script(
    session: Session,
    script: Path,
    args: list[str],
    *,
    after: str = "auto",
    backend: str | None = None,
    accuracy: Accuracy = False,
    out: Path,
    nproc: int = 1,
    subsystem: bool = False,
    releases: list[ReleaseSpec] | None = None,
) -> MinifyResult:
    """``minify run``: bisect the program, pick the failing graph, shrink it, write the repro; with ``subsystem``, go below
    the stage; with ``releases``, run the repro under those torch releases too (their installs start now)."""
    check_after(after)
    preparing = Preparing(releases, session.run_dir / "logs") if releases else None
    if subsystem:
        session.while_verifying = AskAhead(session)
    key = fingerprint(
        "run", str(script), args, after, backend, accuracy, nproc, hashlib.sha256(script.read_bytes()).hexdigest()
    )
    resume = find_checkpoint(out, key)
    if resume is not None:
        return finished(session, resume_minification(session, resume, key), subsystem, script, args, preparing)
    report = bisect_script(
        session, script, args, backend=backend, accuracy=accuracy, aot_rows=after != "dynamo", nproc=nproc,
        trust_program=True,
    )  # fmt: skip
    rate = None  # a flaky failure's, once measured
    while True:
        row = choose_graph(report, after)
        outcome = row.first_failure
        assert outcome is not None and outcome.failure is not None and row.case is not None
        session.log(_minifying(row, outcome))
        blame = Blame(
            report.kernel if row.case_path is not None and row.case_path.parent.name == report.failed_graph else None,
            row.case_path,
        )
        check = Check(outcome.stage, outcome.failure.signature, report.accuracy)
        try:
            result = minify_case(
                session, row.case, check, Provenance(outcome.failure, key, None, report, blame, failure_rate=rate)
            )
        except NotReproducible as e:
            parent = lowered_from(report, row, after)
            if parent is None:
                raise
            session.log(f"{escape(str(e))}; minifying the dynamo graph {parent.label} it was lowered from instead")
            after = "dynamo"  # (choose_graph: the culprit's dynamo graph)
            continue
        except Unconfirmed:
            if report.retry is None and rate is None:
                # the program's failure, not seen alone yet: seen in some looks, it is flaky and minified so
                rate = measured_rate(session, row.case, check)
                if rate > 0:
                    session.log(f"{row.label} fails in {rate:.0%} of its runs alone: flaky; asking each question again")
                    continue
            if report.retry is None and (parent := lowered_from(report, row, after)) is not None:
                session.log(
                    f"{row.label} does not fail alone; minifying the dynamo graph {parent.label} it was lowered from instead"
                )
                after = "dynamo"
                continue
            if report.retry is None:
                raise NotReproducible(
                    f"{row.label} failed in the program ({outcome.failure.signature}) but not when pt2kit ran it alone"
                ) from None
            session.log(
                f"{row.label} does not fail alone the way it failed in the program; pinning the culprit down again"
            )
            try:
                report = pin_down_again(session, report)
            except FlakyFailure as flaky:
                flaky_or_not_alone(session, ProgramRun(script, tuple(args), backend, accuracy, nproc), report, flaky)
            continue
        return finished(session, result, subsystem, script, args, preparing)


def _minifying(row: Row, outcome: Outcome) -> str:
    """The progress line that starts a minification (torch's words escaped: ``OrderedSet([u3])`` is no markup)."""
    assert outcome.failure is not None and row.case is not None
    return f"minifying {row.label} ({plural(row.case.node_count, 'node')}) under {outcome.stage}: {escape(str(outcome.failure.signature))}"


def resume_minification(session: Session, checkpoint: Path, key: str) -> MinifyResult:
    try:
        state = CheckpointState.from_json(json.loads(checkpoint.read_text()))
        loaded = load_repro(Path(state.origin))
    except (OSError, KeyError, TypeError, ValueError) as e:  # (json.JSONDecodeError and a bad status are ValueErrors)
        raise CorruptRecord(f"cannot resume from {checkpoint}: {e}") from None
    came = Provenance(Failure(state.check.failure), key, checkpoint, bisected=saved_bisection(checkpoint.parent))
    return minify_case(session, loaded.case, state.check, came)


def saved_bisection(run_dir: Path) -> Bisected | None:
    """What an interrupted run saved of its bisection (None when it had none, or from a version that saved none)."""
    try:
        return Bisected.from_json(json.loads((run_dir / BISECTED).read_text()))
    except (OSError, KeyError, TypeError, ValueError):
        return None


def minify_repro(
    session: Session,
    path: Path,
    *,
    after: str = "auto",
    accuracy: Accuracy | None = None,
    out: Path,
    saved: list[Path] | None = None,
    subsystem: bool = False,
    releases: list[ReleaseSpec] | None = None,
    device: str | None = None,
    recorded_only: bool = False,
) -> MinifyResult:
    """``minify repro``: shrink an existing repro (pt2kit's or torch's) further.

    The repro's graph is bisected like one captured graph: its stages in order, then,
    for a dynamo graph failing in its final backend, its aot graphs (``--after``).
    ``saved``: more repros of the same program, after ``path`` (``minify run --saved``,
    the API): the first of them that fails is the one minified. ``subsystem``: then go
    below the stage, on the graphs alone (no program to run a workaround on);
    ``releases``: run the repro under those torch releases. ``device``: moved there first
    (:mod:`minifier.unit.devices`): a failure that passes there is its own device's.
    ``recorded_only`` (the env-var hook's graphs, saved as the program failed): a graph that
    now fails only otherwise is not the program's failure, and is not minified (exit 5).
    """
    check_after(after)
    preparing = Preparing(releases, session.run_dir / "logs") if releases else None
    paths = [path, *(saved or [])]
    repros = [load_any_repro(p, session) for p in paths]
    accuracy = repros[0].accuracy if accuracy is None else accuracy
    if subsystem:
        session.while_verifying = AskAhead(session)
    key = fingerprint("repro", *(hashlib.sha256(p.read_bytes()).hexdigest() for p in paths), after, accuracy, device)
    resume = find_checkpoint(out, key)
    if resume is not None:
        return finished(session, resume_minification(session, resume, key), subsystem, None, [], preparing)
    name = str(path) if len(paths) == 1 else path.parent.parent.name
    cases: list[tuple[GraphCase, Path | None]] = [
        (loaded.case if device is None else moved_to(loaded.case, device), p) for loaded, p in zip(repros, paths)
    ]
    try:
        was = [loaded.failure for loaded in repros] if device is None else None
        report = bisect_saved(session, cases, name, accuracy=accuracy, aot_rows=after != "dynamo", recorded=was)
        row = choose_graph(report, after)
    except NoFailure as e:
        if device is None and repros[0].failure is not None:  # (it failed where it was saved: the hook's graph)
            broken = replayed_in_pieces(session, [(case.label(), case) for case, _ in cases], getattr(e, "replay_breaks", None))
            said = "" if broken is None else f": {broken}"
            raise NotReproducible(f"{path.name} failed where it was saved ({repros[0].failure}) but passes alone{said}") from None
        if device is None:
            raise
        where = ", ".join(sorted(devices_of(repros[0].case))) or "its device"
        raise NoFailure(
            f"on {device}, {path.name} does not fail ({e}): the bug is in {where}'s own path, not in what both share"
        ) from None
    outcome = row.first_failure
    assert outcome is not None and outcome.failure is not None and row.case is not None
    recorded = next((loaded.failure for loaded, (case, _) in zip(repros, cases) if case.index == row.case.index), None)
    corrupted = memory_corrupted(outcome.failure)  # (a kernel writing past its buffer: a wrong answer, or a crash)
    if recorded is not None and not outcome.failure.signature.same_kind(recorded) and recorded_only and not corrupted:
        raise NotReproducible(
            f"{path.name} failed where it was saved ({recorded}) but alone fails only otherwise "
            f"({outcome.failure.signature}): the graph rebuilt alone is not what the program compiled"
        )
    if recorded is not None and outcome.failure.signature != recorded:
        said = (
            f"{path.name} now fails with {outcome.failure.signature}, not the recorded {recorded}"
            + ("; glibc found the heap corrupted (a kernel writing past its buffer)" if corrupted else "")
            + "; minifying what it does now"
        )
        report.add_note(said)  # (report.json says it too: hunt l asked for an aot repro and got a dynamo graph's)
        session.log(f"note: {escape(said)}")
    session.log(_minifying(row, outcome))
    check = Check(outcome.stage, outcome.failure.signature, accuracy)
    result = minify_case(session, row.case, check, Provenance(outcome.failure, key, bisect=report))
    return finished(session, result, subsystem, None, [], preparing)
