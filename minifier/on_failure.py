"""What the ``TORCHDYNAMO_REPRO_AFTER`` hook does at each compile it is asked to watch (:mod:`minifier.autoload` arms it).

:class:`ReproOnFailure` sits between dynamo and the user's backend for one compile,
and follows torch's levels:

- **1**: when a graph fails to compile or run, save it as an unminified ``repro.py``;
- **2** (torch's default): the same, then minify it in a fresh ``python -m minifier
  repro`` process and write the minimal ``repro.py`` directly (no launcher step);
- **3**: save every graph before it is compiled, so a segfault still leaves a repro
  (``minify repro`` on it minifies it);
- **4**: also check each compiled graph's first result and gradients against an fp64 reference; minify a divergence
  (that first run follows a silent save, removed after it, so a crash in it leaves its ``repro.py`` too).

Every door of a graph is watched: its compile and its runs, the aot graphs AOTAutograd
compiles for it, whose backward compiles lazily at the first ``loss.backward()`` and runs
inside autograd (:meth:`ReproOnFailure.watching_aot_graphs`), and a backward that fails
before its graph runs (:mod:`minifier.backward_prologue`). What is saved is always the
dynamo graph, with the program's patches of torch (:mod:`minifier.capture.patches`):
its repro runs the backward too, and ``minify repro --after aot`` finds the failing
aot graph in it again.

Each failure gets a new run directory under ``TORCHDYNAMO_REPRO_DIR`` (else ``./torch_compile_debug``, torch's).

**First, do no harm.** A debugging hook must never change what a healthy program
does: the user's backend gets the very graph and inputs it would have; nothing of
pt2kit's own may raise into the program (its failures become one line on stderr,
:func:`safe`); the user's exception is re-raised unchanged; level 4 clones the inputs
*before* the compiled call (graphs mutate buffers and inputs in place), runs its
references on the clones, and puts the RNG state back afterwards, so the program's
random stream is the one it would have had.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .backward_prologue import HANDLED as _HANDLED, note_rounding, note_watched, remembered
from .unit.float64 import draws_otherwise_than_eager, has_random_ops, rng_state, set_rng_state
from pt2kit.opaque import opaque, opaque_wrapper

if TYPE_CHECKING:
    from .unit.accuracy import Accuracy

_lock = threading.Lock()
_state: dict[str, Any] = {"counter": 0, "missing": []}


class Intent:
    """What the user asked torch's minifier for, read torch's way."""

    def __init__(self, after: str, level: int, out: Path) -> None:
        self.after = after  # dynamo | aot
        self.level = level  # 1..4
        self.out = out


def safe(fn: Callable[..., Any], default: Any, *args: Any, **kwargs: Any) -> Any:
    """pt2kit's own step, which must never raise into the user's program."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - first, do no harm
        from pt2kit.errors import UserFacingError

        if isinstance(e, UserFacingError):  # the user's input (an unwritable TORCHDYNAMO_REPRO_DIR): its own line
            say(f"{e}; the program continues as without pt2kit")
        else:
            say(f"internal error in {getattr(fn, '__name__', 'a step')} ({type(e).__name__}: {e}); the program continues as without pt2kit")
        return default


def _failure_of(error: BaseException, compiling: bool) -> Any:
    """The signature of what the program raised; ``compiling``: raised by a compiler, so a compile error."""
    from dataclasses import replace

    from pt2kit.signature import Kind, signature_of_exception

    signature = signature_of_exception(error).signature
    return replace(signature, kind=Kind.COMPILE_ERROR) if compiling and signature.kind == Kind.RUNTIME_ERROR else signature


def say(message: str) -> None:
    try:
        print(f"pt2kit: {message}", file=sys.stderr)
    except Exception:  # noqa: BLE001 - a closed stderr is not the program's problem
        pass


class ReproOnFailure:
    """One compile of one graph under the user's intent."""

    def __init__(self, intent: Intent) -> None:
        self.intent = intent

    def compile(
        self, backend: Callable[..., Any], name: str | None, gm: Any, example_inputs: list[Any], **kwargs: Any
    ) -> Any:
        case = safe(self._case, None, backend, name, gm, example_inputs)
        if case is not None and self.intent.level == 3:
            safe(self.save, None, case, "saved before compiling (TORCHDYNAMO_REPRO_LEVEL=3)")
        try:
            with _entered(self.watching_aot_graphs, case):
                compiled = backend(gm, example_inputs, **kwargs)
        except Exception as e:
            if case is not None:
                self.handle(case, error=e, compiling=True)
            raise
        if case is None:
            return compiled
        return self.watch(compiled, case)

    def watching_aot_graphs(self, case: Any) -> Any:
        """Within the block, the aot graphs AOTAutograd compiles for ``case`` report their failures to it.

        A backward graph compiles lazily, at the program's first ``loss.backward()``,
        long after dynamo's compile returned, and it runs inside autograd: neither is
        seen from the dynamo graph's compile or call. The compilers AOTAutograd is
        handed here keep the wrapper for that later compile. At level 4 every aot
        graph's first run is judged too (a wrong gradient, or a wrong activation saved
        for the backward, never reaches the forward's outputs).
        """
        if case is None:
            return None
        from .capture.hooks import aot_compilers

        return aot_compilers(lambda kind, compiler: self.watch_aot_compiler(case, kind, compiler))

    def watch_aot_compiler(self, case: Any, kind: str, compiler: Callable[..., Any]) -> Callable[..., Any]:
        """One aot compiler of ``case``'s backend, its compile and its compiled graph's runs watched.

        Below level 4, forward and inference compilers are left as they are: they compile
        and run inside the dynamo graph's compile and call, where :meth:`compile` and
        :meth:`watch` see their failures, and an untouched forward compiler keeps
        AOTAutograd's cache in use. At level 4 too, a compiler AOTAutograd caches with
        (Inductor's) is left as it is: a wrapper would turn the cache off, and a program
        whose failure needs a cache hit would pass (pytorch#185382). Its graphs are then
        judged whole, by the dynamo graph's first call and gradients.
        """
        from pt2kit.seams.aot_autograd import keeps_a_cache

        if kind != "backward" and (self.intent.level != 4 or keeps_a_cache(compiler)):
            return compiler
        guard = self

        def pt2kit_aot_compiler(gm: Any, example_inputs: Any) -> Any:
            from .unit.case import snapshot

            judged = safe(snapshot, None, gm) if guard.intent.level == 4 else None
            try:
                compiled = compiler(gm, example_inputs)
            except Exception as e:
                guard.handle(case, error=e, where=kind, compiling=True)
                raise
            return guard.watch_aot(compiled, case, kind, judged)

        return opaque(pt2kit_aot_compiler)

    def watch_aot(self, compiled: Callable[..., Any], case: Any, kind: str, judged: Any) -> Callable[..., Any]:
        """A compiled aot graph whose run-time failures (and, at level 4, first result) are looked at."""
        guard = self
        first = [judged is not None and not has_random_ops(judged)]

        def pt2kit_watched_aot(*args: Any) -> Any:
            if first[0]:
                first[0] = False
                return guard.judge_aot(compiled, case, kind, judged, args)
            try:
                return compiled(*args)
            except Exception as e:
                guard.failed_running(case, kind, e)
                raise

        return opaque_wrapper(pt2kit_watched_aot, compiled)

    def failed_running(self, case: Any, kind: str, error: BaseException) -> None:
        """An aot graph raised as it ran. A forward's failure reaches the dynamo graph's call,
        which saves it with the values that call got (:meth:`watch`); a backward's never does."""
        if kind == "backward":
            self.handle(case, error=error, where=kind)

    def judge_aot(self, compiled: Callable[..., Any], case: Any, kind: str, gm: Any, args: tuple[Any, ...]) -> Any:
        """Level 4: an aot graph's first run against eager and fp64 runs of the graph it compiled."""
        from .capture.calls import call_values

        live = call_values(args)  # (before the call: a boxed call empties its list)
        references = safe(_clone_args, None, live)
        rng = safe(rng_state, None)
        try:
            result = compiled(*args)
        except Exception as e:
            self.failed_running(case, kind, e)
            raise
        if references is None or rng is None or any(a is None for a in live):  # (None: a weight freezing folded in)
            return result
        failure = safe(_judge_run, None, gm, references, result, rng[0], live)
        if failure is not None:
            self.diverged(case, f"its {kind} graph: {failure.details}", case.inputs)
        return result

    def _case(self, backend: Callable[..., Any], name: str | None, gm: Any, example_inputs: list[Any]) -> Any:
        from .capture.casemaker import make_case
        from .capture.context import describe_backend
        from .capture.patches import program_state

        with _lock:
            index = _state["counter"]
            _state["counter"] += 1
        info = describe_backend(backend, name)
        if info.unrecoverable:
            say(f"{info.unrecoverable}; a repro of graph g{index} would not be runnable")
        # the program's patches of torch (a lowering, a codegen override) ride with the graph, as under minify run
        state = program_state()
        with _lock:
            new_missing = state.missing and state.missing != _state.get("missing")
            _state["missing"] = state.missing
        if new_missing:
            say("the program changed torch in ways no repro can carry (" + "; ".join(state.missing) + ")")
        return state.applied_to(make_case(gm, example_inputs, backend=info, index=index))

    def watch(self, compiled: Callable[..., Any], case: Any) -> Callable[..., Any]:
        """The compiled graph, with its failures (and, at level 4, its first result) looked at."""
        guard = self
        first = [self.intent.level == 4]
        safe(note_watched, None)

        def pt2kit_watched(*args: Any) -> Any:
            if first[0]:
                first[0] = False
                return remembered(guard, case, guard.check_accuracy(compiled, case, args))
            try:
                return remembered(guard, case, compiled(*args))  # (its backward's own door: backward_prologue)
            except Exception as e:
                guard.handle(case, args, error=e)
                raise

        return _between().following(case, opaque_wrapper(pt2kit_watched, compiled))  # (the program's call, not level 4's)

    def check_accuracy(self, compiled: Callable[..., Any], case: Any, args: Sequence[Any]) -> Any:
        """Level 4: a graph's first call is compared with eager, in fp32 and fp64, on clones of its inputs."""
        references = safe(_clone_args, None, args)  # before the call: it may mutate its inputs
        rng = safe(rng_state, None)
        pending = safe(self.save_before_run, None, case, references) if references is not None else None
        try:  # (the backward's first run, on clones, is judged within: a crash in either leaves the save)
            return self._judged(compiled, case, args, references, rng)
        finally:
            if pending is not None:
                safe(_remove, None, *pending)

    def _judged(self, compiled: Callable[..., Any], case: Any, args: Sequence[Any], references: Any, rng: Any) -> Any:
        try:
            result = compiled(*args)
        except Exception as e:
            self.handle(case, references if references is not None else args, error=e)
            raise
        if references is None or rng is None:
            return result
        problem = safe(self._divergence, None, case, references, result, rng, list(args))
        if not problem and _needs_grad(result) and not has_random_ops(case.gm):
            problem = self.check_gradients(compiled, case, references, rng)
        if problem:  # (safe: pt2kit's step must never raise in the program; diverged raises the verdict itself)
            inputs = safe(_with_values, None, case, references)
            if inputs is not None:
                self.diverged(case, problem, inputs)
        return result

    def diverged(self, case: Any, problem: str, inputs: list[Any]) -> None:
        """A wrong answer at level 4: save the graph on ``inputs``, minify it for accuracy, and stop the program."""
        from .unit.accuracy import signature_of_accuracy

        failure = safe(lambda: signature_of_accuracy(problem).signature, None)  # (recorded: alone, it may pass)
        path = safe(self.save, None, case.replace(inputs=inputs), f"diverges from the fp64 reference ({problem})", failure)
        if path is not None:
            safe(self.minify, None, path, True)
        from pt2kit.seams.dynamo_exc import accuracy_error

        run_dir = path.parent.parent.parent if path else None
        where = "" if run_dir is None else f"; repro in {run_dir}" if (run_dir / "repro.py").exists() else f"; saved in {run_dir}"
        error = accuracy_error()(f"pt2kit: compiled output diverges from the fp64 reference in graph {case.label()}: {problem}{where}")
        setattr(error, _HANDLED, True)  # (saved already: the wrappers it leaves through let it pass)
        raise error

    def _divergence(self, case: Any, references: list[Any], result: Any, rng: Any, args: list[Any]) -> str | None:
        """``references``: clones of the inputs before the compiled call; ``args``: the inputs as it left them."""
        from pt2kit.signature import said
        from .repro.writer import judges_aliasing
        from .unit.accuracy import accuracy_divergence, compared_despite_draws, output_labels, reference_outputs
        from .unit.case import Boundary

        after = rng_state()
        try:
            grad = case.boundary == Boundary.DYNAMO and case.grad_enabled  # (an aot graph runs without autograd)
            eager = reference_outputs(case.gm, references, rng=rng, set_rng=set_rng_state, grad_enabled=grad)
        except Exception as e:  # noqa: BLE001 - eager refuses what the compiled run returned (pytorch#197095)
            return accuracy_divergence(said(e), [], None)
        finally:
            set_rng_state(after)  # the program's random stream goes on as if nothing ran
        actual = eager.outputs_of(result, args)
        names = [i.name for i in case.inputs]  # (the graph's placeholders, as the repro names them)
        labels = output_labels(eager, len(actual), names)
        problem = accuracy_divergence(eager.expected, actual, eager.fp64, labels=labels, aliasing=judges_aliasing(case))
        draws = draws_otherwise_than_eager(case.gm, case.backend)
        if not problem and not draws:
            note_rounding(case.label(), accuracy_divergence(eager.expected, actual, eager.fp64, labels=labels, strict=True))
        if not draws:
            return problem
        return compared_despite_draws(problem, case.gm, eager.expected, actual, eager.fp64, labels=labels)  # (their kind still compares)

    def check_gradients(self, compiled: Callable[..., Any], case: Any, references: list[Any], rng: Any) -> str | None:
        """Level 4: the backward's first result, the compiled graph's gradients against eager's, on clones of its inputs.

        The compiled forward runs once more, on clones, and its backward compiles now rather than at the program's
        ``loss.backward()`` (as torch's level 4 does), retaining the graph (a first backward without it donates the
        saved buffers, and refuses a later ``retain_graph=True``; one AOTAutograd compiled ahead with donated buffers
        refuses to retain, and runs again without): the program's outputs keep their autograd graph, and its random
        stream is put back. What the compiled backward raises is the program's failure, met early; the watchers of
        its aot graphs have saved it, and it goes on to the program.
        """
        from .unit.accuracy import accuracy_divergence, gradient_references, gradients
        from pt2kit.seams.autograd_engine import retained_unless_refused

        def backward(retain: bool) -> list[Any] | None:
            clones = safe(_clone_args, None, references)
            set_rng_state(rng)
            return None if clones is None else gradients(compiled, clones, retain_graph=retain)

        after = rng_state()
        try:
            actual = retained_unless_refused(backward)
        finally:
            set_rng_state(after)
        if actual is None:
            return None
        try:
            expected = safe(gradient_references, None, case.gm, references, rng=rng, set_rng=set_rng_state)
        finally:
            set_rng_state(after)
        if expected is None:
            return None
        eager, fp64, labels = expected
        problem = safe(accuracy_divergence, None, eager, actual, fp64, labels=labels)
        if not problem:
            note_rounding(case.label(), safe(accuracy_divergence, None, eager, actual, fp64, labels=labels, strict=True))
        return f"its backward: {problem}" if problem else None

    def handle(
        self,
        case: Any,
        args: Sequence[Any] | None = None,
        *,
        error: BaseException | None = None,
        where: str = "",
        compiling: bool = False,
    ) -> None:
        """A graph failed to compile or run: save it (levels 1-4) and minify it (2 and 4).

        Once per failure: an error the program sees through several of pt2kit's
        wrappers (an aot compiler's inside the dynamo graph's compile) is handled by
        the first. ``where``: the aot graph that failed (``backward``), or the dynamo
        graph itself. The dynamo graph is what is saved either way: its repro runs the
        backward too, and ``minify repro --after aot`` finds the aot graph in it again.
        """
        if error is not None:
            if getattr(error, _HANDLED, False):
                return
            try:
                setattr(error, _HANDLED, True)
            except (AttributeError, TypeError):
                pass
        if where == "backward":  # (what the program did between the forward and this backward, which its repro does too)
            safe(_between().settle, None, case)
        failing = case if args is None else case.replace(inputs=_with_values(case, args))
        failure = None if error is None else safe(_failure_of, None, error, compiling)
        path = safe(self.save, None, failing, f"failed in its {where} graph" if where else "failed", failure)
        if path is not None and self.intent.level in (2, 4):
            safe(self.minify, None, path, False)

    def save(self, case: Any, why: str, failure: Any = None) -> Path:
        """Save ``case`` under a new run directory; at levels 1 and 3 also as its ``repro.py``, headed by ``failure``."""
        from .isolation.session import new_run_dir
        from .repro.files import write_repro
        from .unit.case import GraphId

        run_dir = new_run_dir(self.intent.out, run_name())
        accuracy = failure is not None and failure.kind == "accuracy"  # (its repro judges the outputs, or says it passes)
        path = write_repro(
            case, run_dir / "captured" / str(GraphId(case.index)), stage=case.backend, failure=failure, accuracy=accuracy
        )
        if self.intent.level in (1, 3):
            note = f"Saved by pt2kit's TORCHDYNAMO_REPRO_AFTER hook: graph {case.label()} {why}; not minified."
            write_repro(case, run_dir, stage=case.backend, failure=failure, accuracy=accuracy, note=note)
        say(f"graph {case.label()} {why}; " + (f"repro in {run_dir}" if self.intent.level in (1, 3) else f"minifying it in {run_dir}"))
        return path

    def save_before_run(self, case: Any, references: Sequence[Any]) -> tuple[Path, bool]:
        """Level 4: the graph on (clones of) the inputs of its first call, saved as ``repro.py`` in a run directory
        of its own, silently: the call removes it when it returns or raises, a crash in it leaves it.
        (The directory, and whether its parent was made for it.)"""
        from .isolation.session import new_run_dir
        from .repro.files import write_repro

        made = not self.intent.out.exists()
        run_dir = new_run_dir(self.intent.out, run_name())
        try:
            write_repro(
                case.replace(inputs=_with_values(case, references)),
                run_dir,
                stage=case.backend,
                note=f"Saved by pt2kit's TORCHDYNAMO_REPRO_LEVEL=4 hook before graph {case.label()}'s first run, which "
                "the process did not survive (a crash); not minified: `minify repro` on this file minifies it.",
            )
        except BaseException:
            _remove(run_dir, made)  # (a save that failed leaves no directory behind)
            raise
        return run_dir, made

    def minify(self, path: Path, accuracy: Accuracy) -> int:
        """Minify a saved graph in a fresh process (this one runs the user's threads)."""
        import subprocess

        from pt2kit.processes import pt2kit_env, python_command

        run_dir = path.parent.parent.parent
        # TORCHDYNAMO_REPRO_AFTER=aot asks for the aot graph, where there is one that fails alone; a
        # failure inside AOTAutograd itself (its partitioner) has none, and the dynamo graph is the repro
        after = "auto" if self.intent.after == "aot" else self.intent.after
        command = python_command("minifier", "repro", str(path), "--after", after, "--run-dir", str(run_dir), "--recorded-only")
        command.append("--accuracy" if accuracy else "--no-accuracy")
        from .stages.distributed import minifying, sigterm_deferred, wait_for_other_ranks

        roots = [str(Path(p).resolve()) for p in sys.path if p and Path(p).is_dir()]
        env = pt2kit_env({"PYTHONPATH": os.pathsep.join(roots)})
        with minifying(run_dir), sigterm_deferred():
            # (its table goes to the program's stderr: the program's stdout stays its own, a pipe it may be read from)
            code = subprocess.run(command, env=env, check=False, stdin=subprocess.DEVNULL, stdout=2).returncode
        wait_for_other_ranks(self.intent.out)
        if code != 0 and not (run_dir / "repro.py").exists():  # (the line above said where a repro would be)
            alone = " (alone it does not fail the program's way)" if code == 5 else ""  # (NotReproducible's exit)
            say(f"no minimal repro in {run_dir} (exit {code}; its report.json says why); the graph as saved{alone}: {path}")
        return code


def _between() -> Any:
    """The process's :class:`~minifier.capture.between.BetweenForwardAndBackward` (a case is saved at its failure)."""
    with _lock:  # (made once: a follower keeps what it followed)
        if "between" not in _state:
            from .capture.between import BetweenForwardAndBackward

            _state["between"] = BetweenForwardAndBackward(lambda case: None)
        return _state["between"]


class _entered:
    """``with _entered(make, *args):`` enters ``make(*args)`` (a context manager, or None for none).

    pt2kit's own step: a failure to make or enter it is said on stderr and the block
    runs without it; an exception from the block passes through untouched.
    """

    def __init__(self, make: Callable[..., Any], *args: Any) -> None:
        self.make, self.args, self.context = make, args, None

    def __enter__(self) -> None:
        context = safe(self.make, None, *self.args)
        if context is not None and safe(context.__enter__, _FAILED) is not _FAILED:
            self.context = context

    def __exit__(self, *exc: Any) -> Literal[False]:
        if self.context is not None:
            safe(self.context.__exit__, None, *exc)
        return False


_FAILED = object()


def _judge_run(gm: Any, inputs: list[Any], outputs: Any, rng: Any, after: list[Any]) -> Any:
    from .unit.accuracy import judge_compiled_run

    return judge_compiled_run(gm, inputs, outputs, rng=rng, after=after)


def run_name() -> str:
    """The run directory's name: the script, and the rank under torchrun."""
    from pathlib import Path

    name = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "python"
    rank = os.environ.get("RANK")
    return f"{name}-rank{rank}" if rank is not None and os.environ.get("WORLD_SIZE") else name


def _needs_grad(result: Any) -> bool:
    import torch

    values = list(result) if isinstance(result, (list, tuple)) else [result]
    return torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


def _clone_args(args: Sequence[Any]) -> list[Any]:
    """Copies of a call's arguments, a plain tensor subclass's of its class (as the program's call ran on it)."""
    from pt2kit.seams.special_tensors import plain_subclass
    from .unit.copies import clone_values

    def as_given(arg: Any, copy: Any) -> Any:
        cls = plain_subclass(arg)
        return copy if cls is None else copy.detach().as_subclass(cls).requires_grad_(copy.requires_grad)

    return [as_given(a, c) for a, c in zip(args, clone_values(list(args)))]


def _remove(run_dir: Path, parent_too: bool) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)
    if parent_too and not any(run_dir.parent.iterdir()):
        run_dir.parent.rmdir()


def _with_values(case: Any, args: Sequence[Any]) -> list[Any]:
    """The case's inputs with the values a call actually passed, read as the capture reads them (a tensor
    subclass's class, a DTensor's shard and placements, views of one tensor: :func:`graph_inputs`)."""
    from .capture.casemaker import graph_inputs

    if len(args) != len(case.inputs):
        return list(case.inputs)
    return graph_inputs(case.gm.graph.find_nodes(op="placeholder"), list(args))
