"""What the user's program does when run plainly, as ``python SCRIPT`` runs it: the last word on a failure no graph shows.

Questions, each one plain run of the whole program (up to ``PROGRAM_RERUN_LIMIT``
seconds), asked only on the way to a verdict that would otherwise send the user away:

- :func:`fails_only_plainly`: it ran to the end under pt2kit's capture; does it fail
  plainly? Then the capture changed what the failure needs.
- :func:`fails_under_dynamo_alone`: no graph fails alone; does the program fail with
  every ``torch.compile`` on ``backend="eager"``? Then the bug is dynamo's, outside its
  graphs.
- :func:`compiles_its_failure_into_no_graph`: no graph was compiled at all; does the program
  fail under dynamo alone and pass with every compile turned off? Then dynamo ran or
  folded the failing frame itself (a graph of no ops reaches no backend).
- :func:`first_stage_the_program_fails`: the same question down the stages, one plain run
  each: the stage bisection of the whole program, for a failure no graph shows alone
  (AOTAutograd's compiled function meeting the program's own autograd);
  :func:`around_its_graphs` says the verdict.
- :func:`fails_otherwise_plainly`: it fails only on its own backend, where the capture saw it;
  does it fail that way run plainly? Otherwise no stage is named (the capture changed what it needs).
- :func:`draws_of_inductor`: it fails only on Inductor, and a graph draws random numbers;
  does it run right with ``fallback_random``, and with the graphs' draws taken from elsewhere in
  eager's stream too? Then the bug is Inductor's own random numbers; with ``fallback_random``
  alone, the program compares its graphs' draws with eager's.

None runs for a torchrun job, nor under ``--backend`` (plainly, another compiler would run).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pt2kit.errors import ComparesEagersDraws, NotReproducible
from pt2kit.signature import Failure, Kind, shows_failure
from ..capture.program import ProgramRun

if TYPE_CHECKING:
    from .report import BisectReport, Row
    from ..isolation.session import Session


def fails_only_plainly(program: ProgramRun) -> None:
    """Raise when the program, which ran to the end under pt2kit's capture, fails when run plainly.

    Such a failure depends on state the capture changes (Inductor's caches across
    recompiles, timing): "nothing fails" would send the user away from a real bug. One
    plain run, only before that verdict, up to ``PROGRAM_RERUN_LIMIT`` seconds; not for a
    torchrun job, nor under ``--backend`` (plainly, another compiler would run).
    """
    from ..stages.elsewhere import last_words, plain_run
    from .subsystem import PROGRAM_RERUN_LIMIT

    if program.nproc != 1 or program.backend is not None:
        return
    script = program.script
    plain = plain_run(script, list(program.args), PROGRAM_RERUN_LIMIT)
    if plain.returncode not in (0, None):
        said = f"{script.name} fails when run plainly ({last_words(plain.stderr) or f'exit {plain.returncode}'}), but not under pt2kit's capture"
        uncached = plain_run(script, list(program.args), PROGRAM_RERUN_LIMIT, first=NO_COMPILE_CACHES)
        if uncached.returncode == 0:  # (one more run, which settles it)
            raise NotReproducible(
                f"{said}, and it runs to the end with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1: the bug is in a compile "
                "cache (Inductor's FX graph cache or AOTAutograd's), which a hit across its recompiles reaches; one "
                "graph compiled once cannot show it. TORCHINDUCTOR_AUTOGRAD_CACHE=0 or TORCHINDUCTOR_FX_GRAPH_CACHE=0 "
                "alone says which",
                script=str(script),
            )
        raise NotReproducible(
            f"{said}: its failure depends on state the capture changes (Inductor's caches across recompiles, "
            "timing, the environment); it fails with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 too, so not on a cache",
            script=str(script),
        )


#: Code run before a program so that it compiles with no compile cache at all (read as torch imports).
NO_COMPILE_CACHES = "import os\nos.environ['TORCHINDUCTOR_FORCE_DISABLE_CACHES'] = '1'\n"


#: How each of exit 5's verdicts on a program that fails under dynamo alone begins.
_UNDER_DYNAMO_ALONE = "it fails the same way with every torch.compile on backend='eager' too (dynamo alone, no compiler), "

#: What exit 5 says of a program that fails under dynamo alone while each of its graphs is right alone.
DYNAMO_OUTSIDE_ITS_GRAPHS = (
    _UNDER_DYNAMO_ALONE
    + "and each of its graphs is right alone under it: the bug is dynamo's, outside its graphs (as far as their outputs "
    "and first gradients show). Its tracing computes it wrong (a graph that is not what the code does: an "
    "autograd.Function's backward traced with grad mode off shows only in a double backward, "
    "create_graph=True), a guard is missing (a compiled frame reused where "
    "the code or its closure changed), or a side effect is not replayed (a list append, an attribute "
    "written); compare the code of its compiled frames with the graphs under captured/ in the run directory, and "
    "`python -m explain` on the program lists each compile's guards and what made it recompile (a guard that should "
    "fail where the program changed something between calls, an object's identity or a dict's order, shows there)"
)


def dynamo_alone_said(rows: list[Row], compiling_frame: bool, raised_in: str | None) -> str:
    """What exit 5 says of a program that fails under dynamo alone (``backend='eager'``) while no graph fails alone.

    A dynamo graph that raises in plain eager: :func:`dynamo_graph_raising`. An error dynamo raised compiling a
    frame, past its tracing (``compiling_frame``: building its guards, "Guard failed on the same frame it was
    created"), is no graph's and no later call's: the program under ``backend='eager'`` is its own repro.
    Otherwise :data:`DYNAMO_OUTSIDE_ITS_GRAPHS`.
    """
    if (raising := dynamo_graph_raising(rows)) is not None:
        return raising
    if compiling_frame:
        return (
            _UNDER_DYNAMO_ALONE
            + f"and dynamo raised it while compiling a frame, after its graph was made ({raised_in or 'torch/_dynamo'}: "
            "building its guards or its own bookkeeping): no graph fails, and the program under backend='eager' is "
            "its own repro; `python -m explain` on the program lists each compile and its guards"
        )
    return DYNAMO_OUTSIDE_ITS_GRAPHS


def dynamo_graph_raising(rows: list[Row]) -> str | None:
    """What exit 5 says, in place of :data:`DYNAMO_OUTSIDE_ITS_GRAPHS`, where a dynamo graph raises in plain eager.

    Run on the inputs the program gave it, a graph that raises where the program's own
    code did not is not what that code does: dynamo traced it wrong (a runtime assert it
    adds about unbacked sizes, ``u1 <= 2`` where the size is 4). The graph's own file
    shows that, whatever the program's failure said.
    """
    from ..stages.run import RAISES_IN_EAGER, raises_in_eager
    from ..unit.case import Boundary

    for row in rows:
        first = row.first_failure
        if row.boundary == Boundary.DYNAMO and first is not None and first.failure is not None and raises_in_eager(first.failure):
            message = first.failure.signature.message
            where = f"captured/{row.case_path.parent.name}/repro.py" if row.case_path else "captured/"
            return (
                _UNDER_DYNAMO_ALONE
                + f"and {row.label}, the graph dynamo made, raises in plain eager on the inputs the program gave it "
                f"({first.failure.signature.exception}: {message.removeprefix(RAISES_IN_EAGER)}): the bug is dynamo's, "
                f"which traced that graph otherwise than the code runs (a runtime assert it adds about sizes, an op it "
                f"records wrong); {where} in the run directory holds the graph"
            )
    return None


#: A public torch function that sets process-wide state, by its name (``set_default_dtype``,
#: ``use_deterministic_algorithms``, ``manual_seed``); a context manager (``set_grad_enabled``) is a class, not one.
SETS_STATE = re.compile(r"(set|use)_\w+|manual_seed")


#: What exit 5 adds where a graph calls one of them (:func:`state_setters`).
SETTER_HINT = (
    "a call that sets torch's global state, which AOTAutograd runs only while it traces (a compiled graph leaves that "
    "state as it was, though its outputs are right): compare the state after the call, eagerly and compiled"
)


def state_setters(graphs: list[tuple[str, Any]]) -> list[str]:
    """The calls in ``graphs`` ((label, dynamo GraphModule)) that set torch's global state, as "g0 calls torch.X".

    Dynamo records such a call as a node of its graph, and backend="eager" runs it; AOTAutograd
    runs it only while it traces, so a compiled graph leaves the state as it was (hunt i: the
    default dtype still float32 after ``torch.set_default_dtype(torch.float64)``). Each graph's
    outputs can be right while the program, which reads that state after the call, is not.
    A setter the graph calls again with other arguments brackets a region (``torch.func.grad``'s
    ``set_inplace_requires_grad_allowed(True)`` ... ``(False)``) and leaves the state as it found it: not named.
    """
    found: list[str] = []
    for label, gm in graphs:
        calls: dict[str, list[Any]] = {}
        for node in gm.graph.nodes:
            target = node.target
            module, name = getattr(target, "__module__", None) or "", getattr(target, "__name__", "")
            if node.op == "call_function" and not isinstance(target, type) and module.split(".")[0] == "torch":
                if SETS_STATE.fullmatch(name):
                    calls.setdefault(name, []).append(node.args)
        found += [f"{label} calls torch.{name}" for name, args in calls.items() if len(args) == 1 or args[0] == args[-1]]
    return list(dict.fromkeys(found))


def dynamo_config_set(configs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The dynamo config the program's graphs were captured under, away from torch's defaults (``enable_trace_load_build_class``).

    Where the bug is dynamo's, dynamo's behaviour under that config is the first suspect
    (pytorch#192872 shows only with such a flag), so a failure outside the graphs names it.
    """
    return {key: value for config in configs for key, value in config.get("torch._dynamo.config", {}).items()}


def fails_under_dynamo_alone(program: ProgramRun, failure: Failure) -> bool:
    """Does the program still fail ``failure``'s way with every ``torch.compile`` on ``backend="eager"``: dynamo alone, no compiler?

    A wrong answer is any failed run (the program's own assertion says it); any other
    failure must show itself (:func:`~pt2kit.signature.shows_failure`). Where each graph
    is right alone, what is left is dynamo's: its tracing, its guards, its side effects.
    """
    return fails_on(program, failure, "eager")


def compiles_its_failure_into_no_graph(program: ProgramRun, failure: Failure) -> bool:
    """Does the program, which compiled no graph, fail under dynamo alone and pass with ``torch.compile`` turned off?

    Dynamo hands its backend no graph for a frame whose ops it ran or folded itself
    (pytorch#196012: a ``while_loop_stack_output`` whose condition is a constant, a graph
    of no ops): the program then fails "before compiling anything" only as far as any
    backend can tell.
    """
    if not fails_on(program, failure, "eager"):
        return False
    from ..stages.elsewhere import plain_run
    from .subsystem import PROGRAM_RERUN_LIMIT

    run = plain_run(program.script, list(program.args), PROGRAM_RERUN_LIMIT, first=COMPILE_TURNED_OFF)
    return run.returncode == 0


#: Code run before a program so that every ``torch.compile`` of it runs eagerly, dynamo and all left out.
COMPILE_TURNED_OFF = "import torch\ntorch.compiler.set_stance('force_eager')\n"


def askable(program: ProgramRun, failure: Failure) -> bool:
    """Can the whole program be run on a lighter backend to ask about ``failure``?

    Not a torchrun job's ranks, nor under ``--backend`` (plainly, another compiler would
    run), nor a hang (one on a lighter stage would cost the whole limit again, and say little).
    """
    return program.nproc == 1 and program.backend is None and failure.signature.kind != Kind.TIMEOUT


def fails_on(program: ProgramRun, failure: Failure, stage: str) -> bool:
    """Does the program still fail ``failure``'s way with every ``torch.compile`` on ``backend=stage``?"""
    from pt2kit.seams.compiler_bisector import lighter_backend_code
    from ..stages.elsewhere import plain_run
    from .subsystem import PROGRAM_RERUN_LIMIT

    if not askable(program, failure):
        return False
    return shows(plain_run(program.script, list(program.args), PROGRAM_RERUN_LIMIT, first=lighter_backend_code(stage)), failure)


def shows(run: Any, failure: Failure) -> bool:
    """Does a plain run of the program (a ``CompletedProcess``) fail ``failure``'s way? A wrong answer's is any failed
    run (the program's own assertion says it); any other failure must show itself (:func:`~pt2kit.signature.shows_failure`)."""
    if looks_like_wrong_answer(failure):
        return run.returncode not in (0, None)
    return shows_failure(run.returncode, run.stderr, failure.signature)


#: The stages after dynamo alone that a whole program is run on, lightest first (Inductor is the program's own run).
AOT_STAGES = ("aot_eager", "aot_eager_decomp_partition")


def first_stage_the_program_fails(program: ProgramRun, failure: Failure) -> str | None:
    """The lightest AOTAutograd stage at which the whole program fails ``failure``'s way, where dynamo alone does not.

    Asked where each graph passes every stage alone and the program, with every
    ``torch.compile`` on ``backend="eager"``, runs to the end: the failure needs the
    program around the graphs, and this says which compiler layer it needs. None: it
    needs the program's own backend (or the question cannot be asked: a torchrun job,
    ``--backend``, a timeout).
    """
    return next((stage for stage in AOT_STAGES if fails_on(program, failure, stage)), None)


def outside_its_graphs_at(stage: str) -> str:
    """The verdict on a program that first fails at ``stage`` (an AOTAutograd stage) while each graph passes alone."""
    before = "eager" if stage == AOT_STAGES[0] else AOT_STAGES[0]
    where = (
        "AOTAutograd's, where its compiled functions meet the program around them: their runtime wrappers "
        "(inputs that alias one another, or are written in place, from one call to the next) or the program's "
        "own autograd (each compiled graph is one autograd node: a gradient of one of its outputs with respect "
        "to another, a double backward with create_graph=True, a hook or retained gradient inside it)"
        if stage == AOT_STAGES[0]
        else "in the decompositions or the min-cut partitioner (what aot_eager_decomp_partition adds to aot_eager), "
        "shown only by the program around the graphs"
    )
    return (
        f"it fails the same way with every torch.compile on backend={stage!r} and not on "
        f"backend={before!r}, while each of its graphs passes every stage alone: the bug is {where}; "
        "the repro is the program itself on that backend"
    )


def traced_on_what_graphs_returned(script: str, frame: str, signature: object, stage: str) -> str:
    """The verdict on a program whose dynamo tracing of ``frame`` fails only when the graphs before it run on ``stage``."""
    return (
        f"{script}: dynamo fails tracing {frame} ({signature}) only when the graphs before it are compiled: with every "
        f"torch.compile on backend='eager' the program runs to the end, and on backend={stage!r} it fails the same way. "
        f"What those graphs return under {stage} (an output that was a view comes back a plain tensor, a subclass's "
        "metadata, a requires_grad or a layout unlike eager's) is what dynamo cannot trace in the next frame: the bug "
        "is between the two, and the repro is the program itself on that backend"
    )


def only_on_its_own_backend(backend: str) -> str:
    """The verdict on a program that fails on its own ``backend`` alone, no lighter stage, while each graph passes alone."""
    return (
        f"it fails the same way only on its own backend, {backend!r}, not with every torch.compile on "
        f"backend={AOT_STAGES[0]!r} or {AOT_STAGES[-1]!r}, while each of its graphs passes every stage "
        f"alone: the bug is {backend}'s where its compiled graphs meet the program around them (what they save "
        "for the backward, an input written in place between the forward and the backward and autograd's check "
        "of it, state across calls); the repro is the program itself on that backend"
    )


def draws_of_inductor(program: ProgramRun, failure: Failure, graphs: Sequence[tuple[str, Any]]) -> str | None:
    """The verdict on a program that fails only on Inductor, where a dynamo graph of ``graphs`` draws random
    numbers and the program runs to the end with ``fallback_random`` (Inductor draws eager's numbers). None: no
    graph draws any, or the program still fails so (one plain run of it, only then).

    One more run tells the two programs that pass so apart: with each compiled graph drawing eager's kind of
    numbers from elsewhere in eager's stream, a program that asks only for random numbers of the right kind
    passes again (the bug is in Inductor's own numbers), and one that compares the graphs' draws with eager's
    own fails (:class:`~pt2kit.errors.ComparesEagersDraws`: the graphs are judged on their draws, unless
    they were).
    """
    from pt2kit.seams.compile_fx import DRAWING_ELSEWHERE, FALLBACK_RANDOM
    from pt2kit.seams.compiler_bisector import CACHES_OFF
    from ..stages.elsewhere import plain_run
    from ..unit.accuracy import EAGER_DRAWS
    from ..unit.float64 import has_random_ops
    from .subsystem import PROGRAM_RERUN_LIMIT

    drawing = [label for label, gm in graphs if has_random_ops(gm)]
    if not drawing or not askable(program, failure):
        return None
    if plain_run(program.script, list(program.args), PROGRAM_RERUN_LIMIT, first=FALLBACK_RANDOM + CACHES_OFF).returncode != 0:
        return None
    said = (
        f"{', '.join(drawing)} {'draws' if len(drawing) == 1 else 'draw'} random numbers, and with "
        "torch._inductor.config.fallback_random = True (Inductor draws eager's numbers) the program runs to the end"
    )
    if program.accuracy != EAGER_DRAWS and plain_run(
        program.script, list(program.args), PROGRAM_RERUN_LIMIT, first=DRAWING_ELSEWHERE + CACHES_OFF
    ).returncode not in (0, None):
        raise ComparesEagersDraws(
            f"{program.script.name} fails ({failure.signature}); {said}, but not when each compiled graph draws them "
            "from elsewhere in eager's stream: the program compares what its graphs draw with eager's own draws"
        )
    return (
        f"{said}, as it does with them drawn from elsewhere in eager's stream: the bug is in Inductor's own random "
        "numbers (their range or distribution), which no comparison with eager's draws can show; the repro is the "
        "program itself, and fallback_random the workaround"
    )


def looks_like_wrong_answer(failure: Failure) -> bool:
    """An assertion about values (``assert torch.allclose``, ``torch.testing.assert_close``), raised as the program ran.

    An ``AssertionError`` a compile raised is torch's own invariant failing (the partitioner's
    "Node add was invalid, but is output"), never a wrong answer.
    """
    signature = failure.signature
    if signature.kind != Kind.RUNTIME_ERROR and signature.kind != Kind.ACCURACY:
        return False
    text = f"{signature.message} {failure.details}".lower()
    return signature.exception in ("AssertionError", "AccuracyError") or any(
        phrase in text for phrase in ("not close", "mismatched elements", "allclose", "not equal")
    )


def around_its_graphs(
    session: Session, program: ProgramRun, failure: Failure, backend: str, graphs: Sequence[tuple[str, Any]] = ()
) -> tuple[str, str | None] | None:
    """Where a failure no graph shows alone needs the program around its graphs: (the verdict, the stage; None: the
    program run plainly fails otherwise, :func:`fails_otherwise_plainly`).

    The whole program is run on each AOTAutograd stage (:func:`program_stage`); failing on
    none of them, it needs its own backend, when that is heavier; Inductor's own random numbers,
    when it runs right with them off and a dynamo graph of ``graphs`` draws some. None: not asked (a
    torchrun job, ``--backend``, a hang), or the program's backend is one of those stages already.
    """
    if (stage := program_stage(session, program, failure)) is not None:
        # (Inductor's decompositions draw as Inductor does: fallback_random rules aot_eager_decomp_partition's too)
        if stage == AOT_STAGES[-1] and backend not in (*AOT_STAGES, "eager") and (draws := draws_of_inductor(program, failure, graphs)):
            return draws, backend
        return outside_its_graphs_at(stage), stage
    if askable(program, failure) and backend not in (*AOT_STAGES, "eager"):
        if (otherwise := fails_otherwise_plainly(program, failure)) is not None:
            return otherwise, None
        return draws_of_inductor(program, failure, graphs) or only_on_its_own_backend(backend), backend
    return None


def fails_otherwise_plainly(program: ProgramRun, failure: Failure) -> str | None:
    """The verdict on a program that, run plainly, does not fail ``failure``'s way (None: it does, or ran past the limit).

    "Only on its own backend" names the program itself as the repro; the program's failure
    that says so was seen under pt2kit's capture, so one plain run checks it first. A
    program that fails otherwise plainly (torch's own lazy imports run under a user's
    ``TorchFunctionMode``: the capture imported them before the mode was entered) gets no
    stage named; the user is told which failure each run showed.
    """
    from ..stages.elsewhere import last_words, plain_run
    from .subsystem import PROGRAM_RERUN_LIMIT

    run = plain_run(program.script, list(program.args), PROGRAM_RERUN_LIMIT)
    if run.returncode is None or shows(run, failure):
        return None
    plainly = f"fails otherwise ({last_words(run.stderr) or f'exit {run.returncode}'})" if run.returncode else "runs to the end (or it is flaky)"
    return (
        f"run plainly, {program.script.name} {plainly}: the failure pt2kit's capture saw needs what the capture "
        "changes (torch's modules imported before the program runs, its hooks on each compile), so no stage is named; "
        "the program run plainly is the repro of what it shows there"
    )


def dynamo_graphs(report: BisectReport) -> list[tuple[str, Any]]:
    """The dynamo graphs of the bisection's rows, by label."""
    from ..unit.case import Boundary

    return [(r.label, r.case.gm) for r in report.rows if r.case is not None and r.boundary == Boundary.DYNAMO]


def program_stage(session: Session, program: ProgramRun, failure: Failure) -> str | None:
    """:func:`~minifier.bisect.plainly.first_stage_the_program_fails`, said on the console first (a run of the program each)."""
    session.log(f"  each graph passes alone: {program.script.name} itself, stage by stage")
    return first_stage_the_program_fails(program, failure)
