"""Stages: running one graph through one stage, and lowering a dynamo graph to its aot graphs.

The stages are ordered, each a real torch backend (docs/minify.md):

1. ``eager``: dynamo capture only;
2. ``aot_eager``: plus AOTAutograd;
3. ``aot_eager_decomp_partition``: plus Inductor's decompositions and partitioner;
4. the final stage: ``inductor``, or the user's own backend in its place.

:func:`run_case` answers one question, "what happens when this case runs through
this stage?", and is meant to run inside a worker child; :func:`ask` asks it from the
controller, as one isolated query. It renders the case as the
very ``repro.py`` pt2kit would write (:mod:`minifier.repro.writer`), executes that text, and
classifies the outcome: ``pass``, or a :class:`~pt2kit.signature.Failure`
(``compile_error``, ``runtime_error``, or ``accuracy`` against an fp64 reference;
crashes and timeouts are seen by the worker's parent).

:func:`lower_case` turns a dynamo graph into the forward/backward/inference graphs
its final backend compiles, each with the real values it receives at run time. It
runs the backend's own AOTAutograd pipeline but swaps the innermost compiler for a
recorder that runs the graph eagerly, so lowering works even when that compiler is
the thing that crashes.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from ..capture import hooks
from ..capture.casemaker import aot_case
from .distributed import join_fake_group
from ..capture.context import importable_name
from ..unit.case import Boundary, GraphCase, GraphId, INDUCTOR_INNER_COMPILE
from ..unit.copies import clone_values
from ..unit.accuracy import EAGER_DRAWS, References, accuracy_category, accuracy_divergence, compared_despite_draws, reference_outputs, signature_of_accuracy
from ..unit.float64 import draws_as_eager_under_fallback, draws_otherwise_than_eager
from pt2kit.signature import Failure, Kind, Signature, innermost_exception, said, signature_of_exception, tagging_compile_errors
from pt2kit.seams import backend_registry, compile_fx, dispatch, dynamo_exc
from pt2kit.seams.aot_autograd import compiler_kwargs
from ..repro.files import exec_repro, write_repro
from ..repro.writer import EAGER_STAGES, RUN_SEED, data_of, program_inputs, render
from ..unit.check import Check, Stage

if TYPE_CHECKING:
    from ..isolation.session import Session
    from ..unit.accuracy import Accuracy
    from ..isolation.worker import QueryResult


def stage_names(final: str) -> list[str]:
    """All stages in order, ending with ``final`` (``inductor`` or the user's backend)."""
    return [*EAGER_STAGES, *([] if final in EAGER_STAGES else [final])]


def stages_for(case: GraphCase) -> list[str]:
    """The stages that apply to a case: all of them for dynamo graphs.

    An aot graph only exists once AOTAutograd has run, so for it the eager stages
    collapse into one: running the graph as it is (what ``aot_eager_decomp_partition``
    does with it), then the final backend's compiler.
    """
    if case.boundary == Boundary.DYNAMO:
        return stage_names(case.backend)
    return [Stage.AOT_EAGER_DECOMP_PARTITION, case.backend]


@dataclass
class Outcome:
    """The result of running one case through one stage."""

    stage: str
    failure: Failure | None
    seconds: float
    seen_in_program: bool = False  # known from the program's own run, not yet from an isolated query
    diverging: tuple[int, ...] = ()  # a wrong answer: the outputs that diverge, each judged on its own
    implied_by: str | None = None  # passed unasked, a higher stage vouching for it, until asked (minifier.bisect.implied)
    lent_by: str | None = None  # a wrong answer the capture judged on this aot graph, lent to its dynamo graph

    @property
    def passed(self) -> bool:
        return self.failure is None

    @property
    def status(self) -> str:
        return "pass" if self.failure is None else self.failure.signature.kind

    def fails(self, check: Check) -> bool:
        """Did it fail the way ``check`` asks?"""
        return self.failure is not None and self.failure.signature == check.failure

    @classmethod
    def of_query(cls, stage: str, result: QueryResult[Any]) -> Outcome:
        """A query's answer: the outcome its child returned, or the child's own failure
        (a crash, a hang, an abort) as the outcome of ``stage``."""
        return result.value if result.value is not None else cls(stage, result.failure, result.seconds)


def ask(session: Session, case: GraphCase, check: Check, label: str) -> Outcome:
    """The stage question, asked from the controller: ``case`` through ``check.stage`` in one isolated query,
    its outputs judged as ``check`` judges them (:meth:`Outcome.fails` says whether it failed as asked)."""
    result = session.query(functools.partial(run_case, case, check.stage, accuracy=check.accuracy), label)
    return Outcome.of_query(check.stage, result)


# --------------------------------------------------------------------------- #
# One case through one stage (runs in a worker child)
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Reach:
    """Where a reduced candidate came from: the identity of an accuracy failure.

    Two wrong answers are the same failure only if both reach the program's outputs.
    A candidate's outputs are nodes of the original graph; :func:`reaches_outputs`
    puts the candidate's compiled values in their place in an eager run of the
    original, and asks whether the original's outputs still diverge. A compiled op
    whose error no output of the program can see (a flipped boolean mask that a
    ``where`` ignores) is then not the bug being minified.

    ``load_origin`` reads the original graph only when a candidate diverges: most
    queries (those that pass, or fail otherwise) never need it, and reading a graph of
    thousands of nodes is work that grows with the original, in every query.

    ``references``: where the original's own reference outputs (eager and float64,
    the same for every candidate) are kept. The first diverging query computes and
    saves them; later ones read them back instead of running the original twice more.
    """

    load_origin: Callable[[], GraphCase]
    outputs: tuple[str, ...]
    references: Path | None = None


def run_case(
    case: GraphCase, stage: str, *, accuracy: Accuracy = False, strict: bool = False, reach: Reach | None = None
) -> Outcome:
    """Run ``case`` through ``stage`` the way its repro.py would; classify what happens.

    With ``accuracy``, the repro's own ``accuracy_runs`` make the compiled run and its
    references (inputs the graph writes into are compared like outputs); a float64
    reference that cannot run leaves eager as the reference, never a failure of the graph.
    """
    start = time.perf_counter()
    strict = strict or accuracy == "strict"
    namespace = exec_repro(
        render(case, stage=stage, accuracy=accuracy, strict=strict), meta={"definitions": case.definitions}
    )
    namespace["apply_config"]()
    join_fake_group(case)
    namespace["compile_graph"] = tagging_compile_errors(namespace["compile_graph"])
    try:
        with hooks.aot_compilers(lambda kind, compiler: tagging_compile_errors(compiler)):
            data = data_of(case)
            try:
                if not accuracy:
                    seeded(namespace["run"], namespace["Repro"](data), namespace["make_inputs"](data))
                    wait_on_devices()
                    return Outcome(stage, None, time.perf_counter() - start)
                expected, actual, fp64, written, _ = namespace["accuracy_runs"](data)
            except Exception as e:
                raised = signature_of_exception(e).signature
                if case.boundary != Boundary.DYNAMO or not _raises_in_eager(namespace, data, raised.kind == Kind.COMPILE_ERROR):
                    raise
                return Outcome(stage, Failure(replace(raised, message=RAISES_IN_EAGER + raised.message)), time.perf_counter() - start)
        problem = accuracy_divergence(
            expected,
            actual,
            fp64,
            strict=strict,
            labels=namespace["value_labels"](len(expected), written),
            aliasing=namespace["ALIASING"],
        )
        # (a stage that draws otherwise than eager even with the repro's fallback_random: a user's backend)
        if accuracy != EAGER_DRAWS and draws_otherwise_than_eager(case.gm, stage) and not draws_as_eager_under_fallback(case.gm, stage):
            problem = compared_despite_draws(problem, case.gm, expected, actual, fp64, strict=strict)
        if not problem:
            return Outcome(stage, None, time.perf_counter() - start)
        if isinstance(expected, str):  # eager refused what the compiled run returned: nothing to compare further
            return Outcome(stage, signature_of_accuracy(problem), time.perf_counter() - start)
        references = fp64 if fp64 is not None else [None] * len(expected)
        diverging = tuple(
            i
            for i, (e, a, f) in enumerate(zip(expected, actual, references))
            if accuracy_divergence([e], [a], None if f is None else [f], strict=strict)
        )
        # strict mode is torch's: any output that differs bitwise, seen by the program or not
        # (an aliasing divergence is the outputs' own: substituted values cannot carry it on)
        aliasing = accuracy_category(problem) == "aliasing"
        if reach is not None and not strict and not aliasing and not any(i.is_random for i in case.inputs):
            plain = len(expected) - len(written)
            made = program_inputs(case)
            # a wrong write into one of the program's own inputs is seen by the program as it is, and a wrong
            # gradient (after the outputs: the backward's) flows back through the original into the program's
            into_program_input = any(i >= plain and made[written[i - plain]].source is None for i in diverging)
            gradient = any(len(reach.outputs) <= i < plain for i in diverging)
            if not into_program_input and not gradient and reaches_outputs(reach, actual, strict) is None:
                return Outcome(
                    stage,
                    Failure(Signature(Kind.ACCURACY, "AccuracyError", UNSEEN_MESSAGE), problem),
                    time.perf_counter() - start,
                )
        return Outcome(stage, signature_of_accuracy(problem), time.perf_counter() - start, diverging=diverging)
    except Exception as e:  # noqa: BLE001 - classifying failures is the job
        return Outcome(stage, signature_of_exception(e), time.perf_counter() - start)


#: How a candidate's failure begins when the graph raises in plain eager as well: not the compiler's failure.
RAISES_IN_EAGER = "the graph raises in plain eager too: "


def raises_in_eager(failure: Failure | None) -> bool:
    """Is ``failure`` one :func:`run_case` found the graph to raise in plain eager as well (:data:`RAISES_IN_EAGER`)?"""
    return failure is not None and failure.signature.message.startswith(RAISES_IN_EAGER)


def retrace_refused(failure: Failure | None) -> bool:
    """Is ``failure`` dynamo refusing, or failing, to trace pt2kit's rebuild of a graph it made itself (the exception
    or the one it came wrapped in: :func:`~pt2kit.seams.dynamo_exc.refuses_to_retrace`)? Never the program's failure."""
    return failure is not None and any(dynamo_exc.refuses_to_retrace(e) for e in (failure.signature.exception, failure.wrapped_in))


def _raises_in_eager(namespace: dict[str, Any], data: Any, compiling: bool = False) -> bool:
    """Does a failing graph raise without any compiler too (its repro's ``run_eager``, on fresh inputs)?

    As far as the compiled run got: where it failed ``compiling`` (in its forward call,
    before any backward ran), eager's forward alone is asked. AOTAutograd traces the
    backward as it compiles, so it raises at once what eager raises only in a backward
    the program may never run (``z = relu(y); z.copy_(y)``, pytorch#158561).

    Asked of dynamo graphs only: an aot graph's inputs may come from a compiled graph before
    it (a backward reads what Inductor's forward saved, wrong indices included), so it may
    raise in eager as the program's own. A dynamo graph that ran eagerly when profiled
    does not, but a smaller one can: an
    in-place op it needed dropped (``x.set_(y)``, leaving ``x`` empty for ``x[0]``), a value
    cut into an input recorded before a later in-place op changed it, a random stand-in.
    Such a candidate shows no compiler bug, however alike its error, and must not become
    the repro. (Asked only once the compiled run raised: a passing query costs nothing more.)
    """
    try:
        seeded(functools.partial(namespace["run_eager"], backward=not compiling), namespace["Repro"](data), namespace["make_inputs"](data))
    except Exception:  # noqa: BLE001 - any error at all: the graph's own, not a compiler's
        return True
    return False


def replay_breaks(case: GraphCase) -> list[str]:
    """(In a worker child) where dynamo breaks a dynamo graph as its repro compiles it again; [] where it takes it whole.

    A repro hands the program's graph to ``torch.compile``, and dynamo traces it again.
    The graph was one piece in the program; a break now (a higher-order op dynamo made but
    cannot trace, ``autograd_function_apply``) runs that part eagerly, so no stage compiles
    it and a failure there never shows in isolation. (Its eager stage is where it runs.)
    """
    from pt2kit.seams import graph_break_log, graph_break_messages

    breaks: list[str] = []

    class Heard:
        def graph_break(self, reason: str, exc: BaseException) -> None:
            message = graph_break_messages.messages(exc)[0]
            said = message.context or message.explanation
            breaks.append(f"{message.gb_type or graph_break_messages.break_type(exc)}" + (f": {said}" if said else ""))

    namespace = exec_repro(render(case, stage=Stage.EAGER), meta={"definitions": case.definitions})
    namespace["apply_config"]()
    data = data_of(case)
    with graph_break_log.graph_breaks(Heard()):
        try:
            seeded(namespace["run"], namespace["Repro"](data), namespace["make_inputs"](data))
        except Exception as e:  # noqa: BLE001 - a graph that fails as dynamo runs it: the breaks heard before it are the answer
            if not breaks and any(dynamo_exc.is_graph_break_error(x) for x in dynamo_exc.chain(e)):
                # a break dynamo refuses outright (fullgraph, or a higher-order op's own form it will not trace)
                breaks.append(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    return list(dict.fromkeys(breaks))


def wait_on_devices() -> None:
    """Wait for the kernels a query launched: a device error of theirs surfaces in this query, not at its exit."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def seeded(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` from the RNG state every run starts from.

    A graph with random ops (dropout, ``rand``, ``exponential_``) otherwise gets a
    random verdict: the compiled, eager and fp64 runs would draw different numbers, and
    a failure seen once would not be seen again.
    """
    torch.manual_seed(RUN_SEED)
    return fn(*args)


#: The signature of a divergence that the program's own outputs do not see (never a target).
UNSEEN_MESSAGE = "compiled output diverges, but not where the program's outputs can see it"


class _Substituting(fx.Interpreter):
    """Runs a graph eagerly, with some nodes' values replaced (by a candidate's compiled outputs)."""

    def __init__(self, gm: fx.GraphModule, values: dict[str, Any]) -> None:
        super().__init__(gm)
        self.values = values

    def run_node(self, n: fx.Node) -> Any:
        if n.name in self.values:
            return self.values[n.name]
        return super().run_node(n)


def reaches_outputs(reach: Reach, actual: list[Any], strict: bool) -> str | None:
    """Does the divergence of a candidate's outputs reach the original graph's outputs? (See :class:`Reach`.)"""
    origin = reach.load_origin()
    inputs = origin.materialize_inputs()
    references = origin_references(origin, inputs, reach.references)
    values = [v.detach() if isinstance(v, torch.Tensor) else v for v in inputs]
    with torch.no_grad():
        substituting = _Substituting(origin.gm, dict(zip(reach.outputs, actual)))
        substituted = references.outputs_of(seeded(substituting.run, *values), values)
    return accuracy_divergence(references.expected, substituted, references.fp64, strict=strict)


def origin_references(origin: GraphCase, inputs: list[Any], path: Path | None) -> References:
    """The original graph's eager and float64 outputs (see :class:`Reach`): read from ``path``, else computed and saved there.

    Queries run side by side may both compute them; each writes a whole file and
    moves it into place, so a reader never sees half of one. A file that does not
    read back is computed again.
    """
    if path is not None and path.exists():
        try:
            saved = torch.load(path, weights_only=True)
            return References(saved["expected"], saved["fp64"], saved["written"], saved["fp64_error"])
        except Exception:  # noqa: BLE001 - a damaged cache is only slower
            pass
    references = reference_outputs(origin.gm, inputs, rng=RUN_SEED, set_rng=torch.manual_seed)
    if path is not None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            torch.save(vars(references), tmp)
            tmp.replace(path)
        except Exception:  # noqa: BLE001 - (outputs torch cannot save): computed again next time
            tmp.unlink(missing_ok=True)
    return references


# --------------------------------------------------------------------------- #
# Lowering a dynamo graph to aot graphs (runs in a worker child)
# --------------------------------------------------------------------------- #


@dataclass
class _Recorded:
    kind: str
    gm: fx.GraphModule
    compile_kwargs: dict[str, Any]
    compiler: str | None
    inputs: list[Any] | None = None
    donated: tuple[str, ...] = ()


def _copy_of(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of a graph a compiler is handed, made outside the compile's fake mode (a higher-order op's body
    holds real constants, which a tensor copy under that mode would try to make fake)."""
    with dispatch.outside_modes():
        return copy.deepcopy(gm)


class _AotRecorder:
    """Stands in for the innermost compiler: keeps each graph and its first real inputs."""

    graphs: list[_Recorded]

    def eager_runner(self, record: _Recorded) -> Callable[[list[Any]], Any]:
        gm = record.gm

        def run_recorded(args: list[Any]) -> Any:
            if record.inputs is None:
                record.inputs = clone_values(list(args))
            values = list(args)
            args.clear()  # boxed calling convention: the callee owns the inputs
            with torch.no_grad():
                return gm(*values)

        run_recorded._boxed_call = True  # type: ignore[attr-defined]
        return run_recorded

    def inductor_inner(self, inner: Callable[..., Any], compiler: str | None = None) -> Callable[..., Any]:
        """Record what Inductor's inner compile gets (``compiler``: how the repro names it, None: the ``inductor`` stage)."""

        def record_inner_compile(
            gm: fx.GraphModule, example_inputs: Any, compile_region_name: Any = None, **kwargs: Any
        ) -> Any:
            kind, flags = compile_fx.graph_kind(kwargs)
            donated = compile_fx.donated_inputs(gm) if kind == "backward" else ()
            record = _Recorded(kind, _copy_of(gm), flags, compiler, donated=donated)
            self.graphs.append(record)
            return self.eager_runner(record)

        return record_inner_compile

    def __init__(self, backend: Any) -> None:
        self.graphs = []
        # A registered aot_autograd backend is named by its kwargs in the repro
        # (lookup_backend(name).kwargs["bw_compiler"]); other backends that call
        # AOTAutograd themselves by the compiler's importable name.
        if isinstance(backend, str):  # a registered name, as the repro spells it
            backend = backend_registry.lookup(backend)
        self.by_kwargs = compiler_kwargs(backend) is not None
        self.unnamed = False  # a compiler no repro can name was seen (and its graphs not kept)
        self.torch_own = False  # torch's own aot compilers were seen (aot_eager's: named by no repro, graphs not kept)

    def aot_compiler(self, kind: str, compiler: Callable[..., Any]) -> Callable[..., Any]:
        reference = None if self.by_kwargs else importable_name(compiler)
        if reference is None and not self.by_kwargs:
            # Inductor's own compilers: its inner compile records the graph (see lower_case)
            self.unnamed = self.unnamed or not is_torch_own(compiler)
            self.torch_own = self.torch_own or is_torch_own(compiler)
            return compiler

        def record_compile(gm: fx.GraphModule, example_inputs: Any) -> Any:
            record = _Recorded(kind, _copy_of(gm), {}, reference)
            self.graphs.append(record)
            return self.eager_runner(record)

        return record_compile


def is_torch_own(compiler: Any) -> bool:
    """Is this aot compiler torch's own (Inductor's, in whatever wrapper AOTAutograd gets it)?

    Such graphs are named by their stage (``compile_fx_inner`` for Inductor), not by the compiler.
    """
    parts = (compiler, getattr(compiler, "func", None), getattr(compiler, "compiler_fn", None))
    return any(
        str(getattr(part, "__module__", "")).startswith(("torch.", "functorch.")) for part in parts if part is not None
    )


def lower_case(case: GraphCase, out_dir: Path) -> tuple[list[str], str | None]:
    """Write the aot graphs the final backend compiles for ``case``: (their repro paths, a note).

    The paths are empty when the backend does not go through AOTAutograd (a plain
    ``(gm, example_inputs)`` backend); the note says why lowering stopped short
    when the backend failed before AOTAutograd handed it a graph.
    """
    namespace = exec_repro(render(case, stage=case.backend), meta={"definitions": case.definitions})
    namespace["apply_config"]()
    join_fake_group(case)
    recorder = _AotRecorder(eval(namespace_backend_expression(case), namespace))  # noqa: S307 - our own repro text
    data = data_of(case)
    hook = contextlib.ExitStack()
    if case.backend == Stage.INDUCTOR:
        hook.enter_context(hooks.inductor_inner_compile(recorder.inductor_inner))
    else:  # a user's backend: its own aot compilers, or Inductor's when it hands graphs on
        hook.enter_context(hooks.aot_compilers(recorder.aot_compiler))
        hook.enter_context(
            hooks.inductor_inner_compile(functools.partial(recorder.inductor_inner, compiler=INDUCTOR_INNER_COMPILE))
        )
    note = None
    try:
        with hook:
            namespace["run"](namespace["Repro"](data), namespace["make_inputs"](data))
    except Exception as e:  # noqa: BLE001 - a backend that fails outside AOTAutograd: no aot graphs to show
        if not recorder.graphs:
            note = f"lowering it through {case.backend} raised {said(innermost_exception(e))} before its compiler was handed an aot graph pt2kit keeps (in AOTAutograd, in the backend's passes on the whole graph, as Inductor's joint-graph passes, or where its freezing or autotuning meets pt2kit's watch); the dynamo graph is the unit to minify"
    paths = []
    counts: dict[str, int] = {}
    for record in recorder.graphs:
        if record.inputs is None:
            continue  # compiled but never run (e.g. a backward nobody asked for)
        number = counts[record.kind] = counts.get(record.kind, 0) + 1
        aot_case = aot_case_of(case, record)
        paths.append(
            str(write_repro(aot_case, out_dir / str(GraphId(case.index, record.kind, number)), stage=case.backend))
        )
    if not paths and note is None and recorder.unnamed:
        note = f"{case.backend} calls AOTAutograd with compilers a repro cannot name (not importable, not the backend's .kwargs); the dynamo graph is the unit to minify"
    elif not paths and note is None and recorder.torch_own and case.backend != Stage.INDUCTOR:
        note = f"{case.backend} compiles through AOTAutograd with torch's own compilers, whose aot graphs pt2kit does not keep (it names Inductor's alone); the dynamo graph is the unit to minify"
    elif not paths and note is None and case.backend != Stage.INDUCTOR:
        note = f"{case.backend} does not compile through AOTAutograd; the dynamo graph is the unit to minify"
    return paths, note


def namespace_backend_expression(case: GraphCase) -> str:
    """The expression that evaluates to the final backend inside the case's repro namespace."""
    from ..repro.writer import backend_expression

    return backend_expression(case, case.backend)


def aot_case_of(case: GraphCase, record: _Recorded) -> GraphCase:
    assert record.inputs is not None
    return aot_case(
        case,
        record.gm,
        record.inputs,
        kind=record.kind,
        compile_kwargs=record.compile_kwargs,
        compiler=record.compiler,
        donated=record.donated,
    )
