"""Capture: run a user's program with pt2kit armed and keep every graph it compiles.

The first step of following a bug. :func:`capture_script` runs the user's script
(as a fresh process, ``minify _capture``, see :meth:`pt2kit.script.ProgramRun.command`) with a
:class:`Recorder` sitting in torch's dynamo backend hook
(:func:`minifier.capture.hooks.dynamo_backends`). For each graph dynamo hands to a backend,
the recorder

1. turns it into a :class:`~minifier.unit.case.GraphCase` with the *real* example inputs
   dynamo passes to backends (:mod:`minifier.capture.casemaker`), and the context it needs
   (:mod:`minifier.capture.context`);
2. saves it at once as an unminified ``repro.py`` (so a later segfault loses
   nothing) and logs an event line;
3. calls the backend the user asked for (or ``--backend``), so the program behaves
   as it would without pt2kit, until it fails.

Each aot graph is saved as it compiles, and again with its real inputs at its first run.
During that first run the kernels Inductor wrote for it leave a trail, so a crash names
its kernel (:mod:`minifier.capture.blame`); with ``--accuracy`` the run is judged against
eager and fp64 (:meth:`Recorder.judge`), so the bisection need not compile it again.

A watchdog thread turns a compiled call (or compile) that runs past the query
timeout into a ``timeout`` event, so a hang inside compiled code does not hang us.
:func:`minifier.capture.result.read_capture` assembles what a capture run saw from its
event log, even after that process died mid-run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.fx as fx

from . import blame, hooks
from ..unit.case import INDUCTOR_INNER_COMPILE, GraphCase, GraphId, note_threads_at_start, snapshot
from ..unit.copies import clone_values
from .calls import LaterCalls, call_values, later_calls
from .casemaker import aot_case, make_case
from .between import BetweenForwardAndBackward
from pt2kit.backends import resolve_backend

from .context import BackendInfo, describe_backend, importable_name, learn_dynamo_own_patches
from .patches import program_state
from .events import (
    AotGraphSaved, AotInputsNotSaved, Event, Exited, Failed, Finished, FrameLifted, GraphSaved, Judged, Patches, Ran,
    GraphNotSaved, Running, StateMissing, UnknownBackendNamed, Unrecoverable, to_line,
)  # fmt: skip
from pt2kit.errors import UnknownBackend
from pt2kit.opaque import opaque, opaque_wrapper
from .frames import current_frame, failing_frame, frame_of_exception, liftings, where_it_failed
from pt2kit.script import run_script
from pt2kit.seams import backend_registry, compile_fx, compiled_autograd, convert_frame, dispatch, dynamo_exc, hop_eager, symbolic_shapes
from pt2kit.seams.aot_autograd import compiler_kwargs
from ..unit.accuracy import EAGER_DRAWS, judge_compiled_run
from ..unit.float64 import draws_otherwise_than_eager
from pt2kit.signature import (
    Signature,
    exception_chain,
    signature_of_exception,
    signature_of_timeout,
    tagging_compile_errors,
)
from ..repro.files import write_repro
from ..unit.check import Stage

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


class Recorder:
    """Sits in torch's backend hook during a capture run; see the module docstring."""

    def __init__(
        self,
        out_dir: Path,
        *,
        backend_override: str | None = None,
        timeout: float | None = None,
        accuracy: Accuracy = False,
    ) -> None:
        self.out_dir = out_dir
        self.backend_override = backend_override
        self.timeout = timeout
        self.accuracy = accuracy  # judge each aot graph's first compiled run (True, or "strict": bit for bit)
        self.trail: int | None = None  # kernels entered and left during first runs (minifier.capture.blame.arm)
        self.cases: list[GraphCase] = []
        self._events = open(out_dir / "events.jsonl", "a", buffering=1)  # closed in close()
        self._lock = threading.Lock()
        self._busy_since: dict[int, tuple[float, str]] = {}  # active compiled regions -> (start, what)
        self._watchdog: threading.Thread | None = None
        self._patches: dict[str, str] = {}
        self._missing: list[str] = []  # changes to torch's compiler tables no repro can carry (context.state_missing)
        self._local = threading.local()  # per thread: the dynamo graph being compiled, the aot graphs
        self._aot_counts: dict[tuple[int, str], int] = {}
        self.input_limit = int(os.environ.get("PT2KIT_CAPTURE_INPUT_BYTES") or 1 << 30)
        self.between = BetweenForwardAndBackward(self.save)  # what the program does between a forward and its backward

    # events ------------------------------------------------------------------

    def event(self, event: Event) -> None:
        """Write one event to the log, flushed: it survives whatever happens next."""
        with self._lock:
            self._events.write(to_line(event))
            self._events.flush()

    def close(self) -> None:
        self._events.close()

    # the hook ----------------------------------------------------------------

    def wrap_backend(self, fn: Callable[..., Any], name: str | None) -> Callable[..., Any]:
        """The dynamo backend pt2kit installs in place of the user's (see :func:`hooks.dynamo_backends`)."""
        recorder = self

        def pt2kit_capture(gm: fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Callable[..., Any]:
            if hop_eager.is_torch_own_compile(convert_frame.code_being_compiled()):
                # a higher-order op run eagerly compiles a wrapper of torch's own: no graph of the program
                with recorder.owning(None):
                    return fn(gm, example_inputs, **kwargs)
            backend_fn, backend_name = fn, name
            if recorder.backend_override:
                backend_fn, backend_name = resolve_backend(recorder.backend_override), recorder.backend_override
            info = describe_backend(backend_fn, backend_name)
            case = recorder.record(gm, example_inputs, info)
            if info.unrecoverable:
                recorder.event(Unrecoverable(case.index, info.unrecoverable))
            recorder._local.compilers_by_kwargs = compiler_kwargs(backend_registry.unwrap(backend_fn)) is not None
            with recorder.owning(case), recorder.busy(f"compiling {case.label()}"):
                compiled = recorder.between.following(case, tagging_compile_errors(backend_fn)(gm, example_inputs, **kwargs))
            return recorder.watch(compiled, case.label(), later=later_calls(recorder, case))

        pt2kit_capture.__name__ = getattr(fn, "__name__", "pt2kit_capture")
        return pt2kit_capture

    # the aot graphs ------------------------------------------------------------

    @contextlib.contextmanager
    def owning(self, case: GraphCase | None) -> Iterator[None]:
        """Compiles within the block belong to dynamo graph ``case`` (AOTAutograd's compile its aot graphs)."""
        previous = getattr(self._local, "owner", None)
        self._local.owner = case
        try:
            yield
        finally:
            self._local.owner = previous

    def wrap_aot_compiler(self, kind: str, compiler: Callable[..., Any]) -> Callable[..., Any]:
        """Record each aot graph the program compiles, as it compiles (:class:`AotGraph`).

        Called once per AOTAutograd invocation, during its dynamo graph's compile: the
        owner is known now, and kept for a backward that compiles lazily, later. The
        graph is saved before it compiles (with random stand-ins for its inputs), its
        real inputs at its first run; a compile error is tagged as one.

        A graph whose compiler a repro cannot name is not recorded: not Inductor's (its
        inner compile never saw the graph), not importable (a closure), and not reachable
        as ``lookup_backend(name).kwargs`` (a plain function backend that calls
        ``aot_autograd`` itself). Its dynamo graph is the unit to minify then.
        """
        tagged = tagging_compile_errors(compiler)
        owner = getattr(self._local, "owner", None)
        reference = None if is_inductor_compiler(compiler) else compiler_reference(compiler)
        by_kwargs = getattr(self._local, "compilers_by_kwargs", False)
        recorder = self

        def nameable(graph: AotGraph | None) -> bool:
            return graph is not None and (graph.inner or graph.compiler is not None or by_kwargs)

        def pt2kit_aot_compiler(gm: fx.GraphModule, example_inputs: Any) -> Any:
            # (a copy: what the compiler was handed, whatever its passes then do to gm)
            graph = (
                AotGraph(owner, kind, snapshot(gm), list(example_inputs), {}, reference) if owner is not None else None
            )
            stack = recorder._aot_stack()
            stack.append(graph)
            try:
                with recorder.owning(owner), recorder.busy(f"compiling a {kind} graph"):
                    compiled = tagged(gm, example_inputs)
            except BaseException as e:
                if graph is not None and nameable(graph):
                    recorder.save_aot(graph, failure=signature_of_exception(e).signature)
                raise
            finally:
                stack.pop()
            compiled = recorder.between.settling(graph, compiled)  # (a backward's first run: its gradients have come)
            if graph is None or not nameable(graph):
                return recorder.watch(compiled, f"a {kind} graph")
            recorder.save_aot(graph)
            label = graph.directory.name if graph.directory is not None else f"{graph.owner.label()}.{graph.kind}"
            return recorder.watch(compiled, label, first_call=graph, later=later_calls(recorder, graph.owner, graph))

        return opaque(pt2kit_aot_compiler)

    def wrap_inner_compile(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        """Inductor's inner compile: the aot graph exactly as Inductor compiles it, with its flags."""
        def pt2kit_inner_compile(
            gm: fx.GraphModule, example_inputs: Any, compile_region_name: Any = None, **kwargs: Any
        ) -> Any:
            stack = self._aot_stack()
            graph = stack[-1] if stack else None
            if graph is not None and not graph.inner:
                graph.inner = True
                graph.gm, graph.values = snapshot(gm), list(example_inputs)  # before Inductor's passes rewrite it
                graph.kind, graph.compile_kwargs = compile_fx.graph_kind(kwargs)
                graph.donated = compile_fx.donated_inputs(gm) if graph.kind == "backward" else ()
                if graph.owner.backend != Stage.INDUCTOR:  # a user's backend that hands its graphs to Inductor
                    graph.compiler = INDUCTOR_INNER_COMPILE
                graph.original_aten = blame.original_aten_of(gm)
            if compile_region_name is not None:  # (torch 2.11 and 2.12's inner compile takes no such argument)
                kwargs["compile_region_name"] = compile_region_name
            return inner(gm, example_inputs, **kwargs)

        return opaque(pt2kit_inner_compile)

    def compiling(self) -> AotGraph | None:
        """The aot graph this thread is compiling now, if any."""
        return (self._aot_stack() or [None])[-1]

    def _aot_stack(self) -> list[AotGraph | None]:
        if not hasattr(self._local, "aot"):
            self._local.aot = []
        return self._local.aot

    def save_aot(self, graph: AotGraph, *, failure: Signature | None = None, real: bool = False) -> None:
        """Write an aot graph's repro (again, with real inputs once it has them) and log it."""
        try:
            if graph.directory is None:  # (its name stays when only its first save failed: its run says that name)
                n = self._aot_counts[(graph.owner.index, graph.kind)] = (
                    self._aot_counts.get((graph.owner.index, graph.kind), 0) + 1
                )
                graph.directory = self.out_dir / str(GraphId(graph.owner.index, graph.kind, n))
            case = aot_case(
                graph.owner, graph.gm, graph.values, kind=graph.kind, compile_kwargs=graph.compile_kwargs,
                compiler=graph.compiler, donated=graph.donated,
            )  # fmt: skip
            directory = cast(Path, graph.directory)  # (set with its path: above, or by its first save)
            graph.path = write_repro(case, directory, stage=graph.owner.backend)
            blame.write_origins(directory, graph.kernels, graph.original_aten)
        except Exception as e:  # noqa: BLE001 - an aot graph pt2kit cannot write: the dynamo graph stands
            self.event(AotGraphSaved(graph.owner.index, graph.kind, None, error=f"{type(e).__name__}: {e}"))
            return
        self.event(AotGraphSaved(graph.owner.index, graph.kind, str(graph.path), real=real, failure=failure))

    def record(self, gm: fx.GraphModule, example_inputs: Sequence[Any], backend: BackendInfo) -> GraphCase:
        index = len(self.cases)
        # the program's patches of torch ride with the graph: carried as source, or imported from a user module
        state = program_state()
        case = state.applied_to(make_case(gm, example_inputs, backend=backend, index=index, frame=current_frame(gm)))
        if state.patches and state.patches != self._patches:
            self._patches = state.patches
            self.event(Patches(state.patches, bool(state.carried)))
        if state.missing != self._missing:
            self._missing = state.missing
            self.event(StateMissing(state.missing))
        self.cases.append(case)
        try:
            self.save(case)
        except Exception as e:  # noqa: BLE001 - pt2kit's own limit never becomes the program's error
            self.event(GraphNotSaved(case.index, f"{type(e).__name__}: {e}"))
        return case

    def save(self, case: GraphCase) -> None:
        """Write a dynamo graph's repro (again, on a later call's inputs) and log it."""
        path = write_repro(case, self.out_dir / str(GraphId(case.index)), stage=case.backend)
        self.event(GraphSaved(case.index, str(path), case.frame, case.node_count, case.backend, [r for _, r in case.modules]))

    def aot_graphs_of(self, index: int) -> bool:
        """Has dynamo graph ``index`` aot graphs of its own, saved and watched?"""
        return any(owner == index for owner, _ in self._aot_counts)

    def record_failing_frame(self, exc: BaseException, frame: dict[str, Any] | None) -> None:
        """Dynamo failed while tracing a frame: save the frame, lifted to graphs, where it can be.

        Two liftings, each its own repro: the torch calls the frame made (as dynamo sees
        them), then the aten ops ``make_fx`` traces (:mod:`minifier.capture.frames`).
        """
        failing = failing_frame(exc)
        if failing is None:
            return
        for where, how, lift in liftings():
            try:
                case = lift(failing, frame)
                path = write_repro(
                    case,
                    self.out_dir / where,
                    stage="eager",
                    note=f"Frame {failing.code.co_name}, recorded as {how}; dynamo failed on it.",
                )
            except Exception as e:  # noqa: BLE001 - lifting is best effort; the failure stands without it
                self.event(FrameLifted(None, error=f"{type(e).__name__}: {e}"))
                continue
            self.event(FrameLifted(str(path), case.node_count))

    # hang detection ----------------------------------------------------------

    def watch(
        self, compiled: Callable[..., Any], label: str, first_call: AotGraph | None = None, later: LaterCalls | None = None
    ) -> Callable[..., Any]:
        """Wrap a compiled callable: the watchdog sees time spent in it, and a failure in it names it.

        With ``first_call``, the aot graph's real inputs are saved at its first run, before
        the call (it may crash, or write into its inputs). ``later``: a dynamic graph's
        calls on sizes its first did not have, kept when they fail (:mod:`minifier.capture.calls`).
        """
        recorder = self
        pending: list[Any] = [first_call, True]  # the aot graph (or None), and whether the next call is the first

        def pt2kit_watched(*args: Any, **kwargs: Any) -> Any:
            graph: AotGraph | None
            graph, first = pending
            try:
                if first:  # (a crash in the first run leaves "running" without "ran": that graph crashed)
                    pending[:] = [None, False]
                    values = call_values(args)  # (now: a boxed call empties its list)
                    if later is not None:
                        later.first(values)
                    judged = graph is not None and recorder.save_real_inputs(graph, values) and recorder.accuracy
                    rng = torch.random.get_rng_state() if judged else None
                    recorder.event(Running(label))
                    unfollow = blame.follow_kernels(recorder.trail, compiled)
                    with recorder.busy(f"running {label}"):
                        try:
                            out = compiled(*args, **kwargs)
                        finally:
                            unfollow()
                    recorder.event(Ran(label))
                    if judged and graph is not None and recorder.judge(graph, label, out, rng, values) and later:
                        later.kept = True  # (its first run was wrong: that is the failure to keep)
                    return out
                values = call_values(args) if later is not None else []
                copies = later.copies(values) if later is not None else None
                with recorder.busy(f"running {label}"):
                    if later is not None and copies is not None:
                        return later.call(compiled, args, kwargs, values, copies)
                    return compiled(*args, **kwargs)
            except BaseException as e:
                if not getattr(e, "_pt2kit_graph", None):
                    try:
                        e._pt2kit_graph = label  # type: ignore[attr-defined]
                    except (AttributeError, TypeError):
                        pass
                raise

        return opaque_wrapper(pt2kit_watched, compiled)  # (a backward torch.autograd.grad runs inside a compiled frame)

    def save_real_inputs(self, graph: AotGraph, values: list[Any]) -> bool:
        """At an aot graph's first run: its repro gets the values it really runs on (False: too large to keep)."""
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        size = sum(t.untyped_storage().nbytes() for t in tensors if not symbolic_shapes.is_fake(t))
        if len(values) != len(graph.values) or size > self.input_limit:
            self.event(AotInputsNotSaved(str(graph.path) if graph.path else None, False, size))
            return False
        try:
            # outside the modes torch runs a compiled graph under (AOTAutograd's subclass analysis
            # refuses a detach of a tensor subclass): pt2kit's copy is never the program's failure
            with dispatch.outside_modes():
                graph.values = clone_values(values)  # (inputs that are views of one tensor stay so)
        except Exception:  # noqa: BLE001 - a value pt2kit cannot copy: its repro keeps random ones
            self.event(AotInputsNotSaved(str(graph.path) if graph.path else None, False, size))
            return False
        self.save_aot(graph, real=True)
        return True

    def judge(self, graph: AotGraph, label: str, outputs: Any, rng: Any, after: list[Any]) -> bool:
        """``--accuracy``: the program's own compiled run of an aot graph, judged as an isolated query would judge it.

        ``after``: the values it ran on, as the run left them (a graph may write into its
        inputs). True: it was wrong.
        """
        try:
            failure = self.judged(graph.gm, graph.values, outputs, rng, after, graph.owner.backend)
        except Exception as e:  # noqa: BLE001 - no verdict: the bisection asks an isolated query instead
            self.event(Judged(label, error=f"{type(e).__name__}: {e}"))
            return False
        self.event(Judged(label, failure.signature if failure else None, failure.details if failure else ""))
        return failure is not None

    def judged(self, gm: fx.GraphModule, values: list[Any], outputs: Any, rng: Any, after: list[Any], backend: str) -> Any:
        """The wrong answer of one compiled run of ``gm`` on ``values`` through ``backend`` (:func:`judge_compiled_run`), or None."""
        # (the program's own compile draws Inductor's numbers, which only a program that compares them judges)
        draws = self.accuracy != EAGER_DRAWS and draws_otherwise_than_eager(gm, backend)
        with dispatch.outside_modes():
            return judge_compiled_run(gm, values, outputs, rng=rng, strict=self.accuracy == "strict", after=after, draws_otherwise=draws)

    def busy(self, what: str) -> _Busy:
        return _Busy(self, what)

    def start_watchdog(self) -> None:
        if self.timeout is None:
            return
        self._watchdog = threading.Thread(target=self._watch_loop, name="pt2kit-watchdog", daemon=True)
        self._watchdog.start()

    def _watch_loop(self) -> None:
        assert self.timeout is not None
        while True:
            time.sleep(min(1.0, self.timeout / 10))
            with self._lock:
                started = [(t, what) for t, what in self._busy_since.values()]
            if started:
                oldest, what = min(started)
                if time.monotonic() - oldest > self.timeout:
                    failure = signature_of_timeout(self.timeout)
                    self.event(Failed(failure.signature, f"{what}: {failure.details}", len(self.cases)))
                    os._exit(124)


@dataclass
class AotGraph:
    """An AOTAutograd graph the program compiled, as the compiler got it."""

    owner: GraphCase  # the dynamo graph it belongs to
    kind: str  # forward | backward | inference
    gm: fx.GraphModule
    values: list[Any]  # fake at compile time, real after the first run
    compile_kwargs: dict[str, Any]
    compiler: str | None  # how a repro names the compiler (None: through the backend)
    inner: bool = False  # taken from Inductor's inner compile
    donated: tuple[str, ...] = ()  # the inputs AOTAutograd donates to Inductor (a backward graph's)
    directory: Path | None = None
    path: Path | None = None
    # Inductor's kernels of it -> their nodes (minifier.capture.blame)
    kernels: dict[str, list[str]] = field(default_factory=dict)
    original_aten: dict[str, str] = field(default_factory=dict)  # node -> the aten op a kernel name calls it


def is_inductor_compiler(compiler: Callable[..., Any]) -> bool:
    """Is this AOTAutograd compiler Inductor's (whose graphs the inner-compile hook records)?"""
    return compile_fx.is_inductor_function(getattr(compiler, "func", compiler))


def compiler_reference(compiler: Callable[..., Any]) -> str | None:
    """How a repro names a user backend's aot compiler (see :func:`minifier.capture.context.importable_name`)."""
    return importable_name(compiler)


class _Busy:
    def __init__(self, recorder: Recorder, what: str) -> None:
        self.recorder, self.what = recorder, what

    def __enter__(self) -> None:
        with self.recorder._lock:
            self.recorder._busy_since[id(self)] = (time.monotonic(), self.what)

    def __exit__(self, *exc: object) -> None:
        with self.recorder._lock:
            self.recorder._busy_since.pop(id(self), None)


# --------------------------------------------------------------------------- #
# Running a script under capture
# --------------------------------------------------------------------------- #


def capture_script(
    script: Path,
    args: Sequence[str],
    out_dir: Path,
    *,
    backend: str | None = None,
    timeout: float | None = None,
    accuracy: Accuracy = False,
) -> dict[str, Any]:
    """Run ``script`` with a :class:`Recorder` armed (in a worker child); returns a plain summary.

    The graphs themselves go to ``out_dir/g<N>/repro.py`` as they are compiled, and
    every event to ``out_dir/events.jsonl``; :func:`minifier.capture.result.read_capture` assembles the result,
    even after this process died mid-run.
    """
    from pt2kit.seams.compile_fx import keep_torch_aot_minifier_off, wrap_inner_compile_debug

    out_dir.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(out_dir, backend_override=backend, timeout=timeout, accuracy=accuracy)
    keep_torch_aot_minifier_off()  # the program may turn torch's minifier on in code
    learn_dynamo_own_patches()
    recorder.start_watchdog()
    blame.arm(recorder)
    compiled_autograd.mark_failures()  # (a failure in its backward graph is named so: its frame is not the program's)
    try:
        wrap_inner_compile_debug(recorder.wrap_inner_compile)  # (this process only captures: for good)
        with hooks.dynamo_backends(recorder.wrap_backend), hooks.aot_compilers(recorder.wrap_aot_compiler):
            note_threads_at_start()
            run_script(script, args)
    except SystemExit as e:
        if e.code not in (None, 0):
            recorder.event(Exited(str(e.code), len(recorder.cases)))
        else:
            recorder.event(Finished(len(recorder.cases)))
    except UnknownBackend as e:
        recorder.event(UnknownBackendNamed(str(e)))
    except BaseException as e:  # noqa: BLE001 - the user's failure is the data we want
        recorder.between.settle_begun()  # (a backward that failed before its graph ran: the gradients had come)
        unknown = next((x for x in exception_chain(e) if isinstance(x, UnknownBackend)), None)
        if unknown is not None:
            recorder.event(UnknownBackendNamed(str(unknown)))
        else:
            failure, where, frame = signature_of_exception(e), where_it_failed(e), frame_of_exception(e) or current_frame()
            recorder.event(
                Failed(
                    failure.signature,
                    where=where,
                    details=failure.details,
                    traceback="".join(traceback.format_exception(e))[-8000:],
                    frame=frame,
                    graphs=len(recorder.cases),
                    graph=next((g for x in exception_chain(e) if (g := getattr(x, "_pt2kit_graph", None))), None),
                    kernel=blame.kernel_in_traceback(e),
                    compiled_autograd=compiled_autograd.raised_in_compiled_autograd(e),
                    compiling_frame=where == "runtime" and dynamo_exc.raised_compiling_a_frame(e),
                )
            )
            if where == "tracing":
                recorder.record_failing_frame(e, frame)
    else:
        recorder.event(Finished(len(recorder.cases)))
    finally:
        recorder.close()
    return {"graphs": len(recorder.cases)}
