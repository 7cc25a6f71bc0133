"""``TORCHDYNAMO_REPRO_AFTER`` on any script: pt2kit in charge instead of torch's built-in minifier.

``pt2kit-autoload.pth`` (installed at the root of site-packages) runs one line at
interpreter start-up: unless ``PT2KIT_AUTOLOAD=0``, it puts a tiny finder on
``sys.meta_path`` and imports nothing. The finder waits for
``torch._dynamo.repro.after_dynamo``, the module ``torch.compile`` imports to wrap
backends, hands over to :func:`find_spec_armed`, and pt2kit is armed right after that
module loads (:func:`arm`). A process that never compiles pays for one name
comparison per import. (:func:`install` does the same from Python.)

Armed, every backend ``torch.compile`` resolves still gets torch's own debug wrapper,
with one change (:class:`_OneMinifier`): at each compile it reads the user's intent,
torch's way (``TORCHDYNAMO_REPRO_AFTER`` / ``_LEVEL`` in the environment, or
``torch._dynamo.config.repro_after`` / ``repro_level`` set in code, however late).
No intent: torch's wrapper runs exactly as it would without pt2kit. An intent:
torch's minifier stands down for that compile (and for Inductor's lazy backward
compile, :func:`_quiet_torch_after_aot`), and pt2kit's :class:`ReproOnFailure`
follows torch's levels:

- **1**: when a graph fails to compile or run, save it as an unminified ``repro.py``;
- **2** (torch's default): the same, then minify it in a fresh ``python -m minifier
  repro`` process and write the minimal ``repro.py`` directly (no launcher step);
- **3**: save every graph before it is compiled, so a segfault still leaves a repro
  (``minify repro`` on it minifies it);
- **4**: also check each compiled graph's first result against an fp64 reference, and
  minify an accuracy failure.

Each failure gets a new run directory under ``TORCHDYNAMO_REPRO_DIR`` (else
``torch._dynamo.config.debug_dir_root``'s ``./torch_compile_debug``).

**First, do no harm.** A debugging hook must never change what a healthy program
does: the user's backend gets the very graph and inputs it would have; nothing of
pt2kit's own may raise into the program (its failures become one line on stderr);
the user's exception is re-raised unchanged; level 4 clones the inputs *before* the
compiled call (graphs mutate buffers and inputs in place), runs its references on the
clones, and puts the RNG state back afterwards, so the program's random stream is the
one it would have had.
"""

from __future__ import annotations

import os
import sys

# This module is imported at every interpreter start-up (by the .pth line): it
# imports only what start-up has loaded anyway, and the rest where it is used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .unit.accuracy import Accuracy
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import Any

ARM_AFTER = "torch._dynamo.repro.after_dynamo"
_state: dict[str, Any] = {"installed": False, "armed": False, "counter": 0, "aot_quieted": False}


class _Lock:
    """A lock made on first use (``threading`` is not loaded at start-up)."""

    _lock = None

    def __enter__(self) -> None:
        if _Lock._lock is None:
            import threading

            _Lock._lock = threading.Lock()
        _Lock._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        _Lock._lock.release()  # type: ignore[union-attr]


_lock = _Lock()


def find_spec_armed(name: str, path: Any = None, target: Any = None) -> Any:
    """The ``.pth`` line's finder hands over here when torch's repro hook module is first imported.

    (The ``.pth`` line imports nothing of pt2kit's at start-up: pytest, for one, warns
    about a plugin distribution's modules imported before it starts.)
    """
    from .import_hooks import _AfterImport

    with _lock:
        _state["installed"] = True
    return _AfterImport(name, lambda module: arm()).find_spec(name, path, target)


def install() -> None:
    """Called by the ``.pth`` line at start-up. Idempotent; imports nothing heavy."""
    with _lock:
        if _state["installed"]:
            return
        _state["installed"] = True
    from .import_hooks import after_import

    after_import(ARM_AFTER, lambda module: arm())


class Intent:
    """What the user asked torch's minifier for, read torch's way."""

    def __init__(self, after: str, level: int, out: Path) -> None:
        self.after = after  # dynamo | aot
        self.level = level  # 1..4
        self.out = out


def read_intent() -> Intent | None:
    """The user's repro settings right now, or None when they asked for nothing.

    ``torch._dynamo.config.repro_after`` starts from ``TORCHDYNAMO_REPRO_AFTER`` (read
    when torch is imported) and may be set in code; the variable set later, before
    the compile, counts too. Invalid values leave torch in charge (it reports them).
    """
    from pathlib import Path

    from .seams.config import repro_settings

    in_code = repro_settings()
    after = os.environ.get("TORCHDYNAMO_REPRO_AFTER") or in_code["repro_after"]
    if after not in ("dynamo", "aot"):
        return None
    level_text = os.environ.get("TORCHDYNAMO_REPRO_LEVEL")
    try:
        level = int(level_text) if level_text else int(in_code["repro_level"])
    except ValueError:
        return None
    if level not in (1, 2, 3, 4):
        return None
    out = os.environ.get("TORCHDYNAMO_REPRO_DIR") or in_code["debug_dir_root"] or "torch_compile_debug"
    return Intent(after, level, Path(out))


def arm() -> None:
    """Sit in torch's backend seat for the life of the process (see the module docstring)."""
    with _lock:
        if _state["armed"]:
            return
        _state["armed"] = True
    _arm_replay_switch()
    try:
        from .seams.after_dynamo import debug_wrapper_class, is_internal

        torch_class = debug_wrapper_class()
    except Exception as e:  # noqa: BLE001 - a torch pt2kit does not know: leave torch alone
        print(f"pt2kit: not armed ({type(e).__name__}: {e}); torch's own minifier stays in charge", file=sys.stderr)
        return

    class _OneMinifier(torch_class):  # type: ignore[misc, valid-type]
        """torch's backend debug wrapper, with pt2kit in charge whenever the user asks for a repro."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if is_internal(self._torchdynamo_orig_backend):
                return  # pt2kit's own compile (learning dynamo's patches): not the user's
            if _safe(read_intent, None) is not None:
                # here, when torch.compile resolves the backend: learning compiles a no-op
                # on a thread, which would wait forever for dynamo's lock inside a compile
                from .capture.context import learn_dynamo_own_patches

                _safe(learn_dynamo_own_patches, None)

        def __call__(self, gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
            if is_internal(self._torchdynamo_orig_backend):  # pt2kit's own compile: no minifier at all
                with quiet_torch_minifier():
                    return super().__call__(gm, example_inputs, **kwargs)
            intent = _safe(read_intent, None)
            if intent is None:
                return super().__call__(gm, example_inputs, **kwargs)
            guard = ReproOnFailure(intent)
            with quiet_torch_minifier():
                return guard.compile(self._torchdynamo_orig_backend, self._compiler_name, gm, example_inputs, **kwargs)

    from .seams.after_dynamo import replace_debug_wrapper_class

    replace_debug_wrapper_class(_OneMinifier)


def _arm_replay_switch() -> None:
    """torch's ``replay_record_enabled`` switch records through replay/ (:mod:`replay.autoload`)."""
    try:
        from replay.autoload import arm as arm_replay

        arm_replay()
    except Exception as e:  # noqa: BLE001 - leave torch alone
        print(f"pt2kit: replay_record_enabled stays torch's ({type(e).__name__}: {e})", file=sys.stderr)


def quiet_torch_minifier() -> Any:
    """torch's own minifier off for this compile and for Inductor's later (backward) compiles."""
    from .seams.after_dynamo import torch_minifier_off
    from .seams.compile_fx import keep_torch_aot_minifier_off

    with _lock:
        if not _state["aot_quieted"]:
            _state["aot_quieted"] = True
            keep_torch_aot_minifier_off(lambda: _safe(read_intent, None) is not None)
    return torch_minifier_off()


def _safe(fn: Callable[..., Any], default: Any, *args: Any) -> Any:
    """pt2kit's own step, which must never raise into the user's program."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - first, do no harm
        _say(
            f"internal error in {getattr(fn, '__name__', 'a step')} ({type(e).__name__}: {e}); the program continues as without pt2kit"
        )
        return default


def _say(message: str) -> None:
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
        case = _safe(self._case, None, backend, name, gm, example_inputs)
        if case is not None and self.intent.level == 3:
            _safe(self.save, None, case, "saved before compiling (TORCHDYNAMO_REPRO_LEVEL=3)")
        try:
            compiled = backend(gm, example_inputs, **kwargs)
        except Exception:
            if case is not None:
                self.handle(case)
            raise
        if case is None:
            return compiled
        return self.watch(compiled, case)

    def _case(self, backend: Callable[..., Any], name: str | None, gm: Any, example_inputs: list[Any]) -> Any:
        from .capture.casemaker import make_case
        from .capture.context import describe_backend

        with _lock:
            index = _state["counter"]
            _state["counter"] += 1
        info = describe_backend(backend, name)
        if info.unrecoverable:
            _say(f"{info.unrecoverable}; a repro of graph g{index} would not be runnable")
        return make_case(gm, example_inputs, backend=info, index=index)

    def watch(self, compiled: Callable[..., Any], case: Any) -> Callable[..., Any]:
        """The compiled graph, with its failures (and, at level 4, its first result) looked at."""
        guard = self
        first = [self.intent.level == 4]

        def pt2kit_watched(*args: Any) -> Any:
            if first[0]:
                first[0] = False
                return guard.check_accuracy(compiled, case, args)
            try:
                return compiled(*args)
            except Exception:
                guard.handle(case, args)
                raise

        for attr in ("_boxed_call", "zero_grad", "_torchdynamo_orig_backend"):
            if hasattr(compiled, attr):
                try:
                    setattr(pt2kit_watched, attr, getattr(compiled, attr))
                except AttributeError:
                    pass
        return pt2kit_watched

    def check_accuracy(self, compiled: Callable[..., Any], case: Any, args: Sequence[Any]) -> Any:
        """Level 4: a graph's first call is compared with eager, in fp32 and fp64, on clones of its inputs."""
        references = _safe(_clone_args, None, args)  # before the call: it may mutate its inputs
        rng = _safe(_rng_state, None)
        try:
            result = compiled(*args)
        except Exception:
            self.handle(case, references if references is not None else args)
            raise
        if references is None or rng is None:
            return result
        problem = _safe(self._divergence, None, case, references, result, rng, list(args))
        if problem:
            path = _safe(
                self.save,
                None,
                case.replace(inputs=_with_values(case.inputs, references)),
                f"diverges from the fp64 reference ({problem})",
            )
            if path is not None:
                _safe(self.minify, None, path, True)
            from .seams.dynamo_exc import accuracy_error

            raise accuracy_error()(
                f"pt2kit: compiled output diverges from the fp64 reference in graph {case.label()}: {problem}"
                + (f"; repro in {path.parent.parent.parent}" if path else "")
            )
        return result

    def _divergence(self, case: Any, references: list[Any], result: Any, rng: Any, args: list[Any]) -> str | None:
        """``references``: clones of the inputs before the compiled call; ``args``: the inputs as it left them."""
        from .unit.accuracy import accuracy_divergence, reference_outputs

        if _has_random_ops(case.gm):
            return None  # compiled RNG differs from eager's by design: not comparable
        after = _rng_state()
        try:
            eager = reference_outputs(case.gm, references, rng=rng, set_rng=_set_rng_state)
        finally:
            _set_rng_state(after)  # the program's random stream goes on as if nothing ran
        return accuracy_divergence(eager.expected, eager.outputs_of(result, args), eager.fp64)

    def handle(self, case: Any, args: Sequence[Any] | None = None) -> None:
        """A graph failed to compile or run: save it (levels 1-4) and minify it (2 and 4)."""
        failing = case if args is None else case.replace(inputs=_with_values(case.inputs, args))
        path = _safe(self.save, None, failing, "failed")
        if path is not None and self.intent.level in (2, 4):
            _safe(self.minify, None, path, False)

    def save(self, case: Any, why: str) -> Path:
        from .isolation.session import new_run_dir
        from .repro.files import write_repro
        from .unit.case import GraphId

        run_dir = new_run_dir(self.intent.out, run_name())
        path = write_repro(case, run_dir / "captured" / str(GraphId(case.index)), stage=case.backend)
        if self.intent.level in (1, 3):
            write_repro(
                case, run_dir, stage=case.backend, note="Saved by pt2kit's TORCHDYNAMO_REPRO_AFTER hook; not minified."
            )
        _say(f"graph {case.label()} {why}; repro in {run_dir}")
        return path

    def minify(self, path: Path, accuracy: Accuracy) -> int:
        """Minify a saved graph in a fresh process (this one runs the user's threads)."""
        import subprocess

        from .isolation.zygote import pt2kit_env, python_command

        run_dir = path.parent.parent.parent
        command = python_command(
            "minifier", "repro", str(path), "--after", self.intent.after, "--run-dir", str(run_dir)
        )
        command.append("--accuracy" if accuracy else "--no-accuracy")
        from pathlib import Path

        from .stages.distributed import minifying, wait_for_other_ranks

        roots = [str(Path(p).resolve()) for p in sys.path if p and Path(p).is_dir()]
        env = pt2kit_env({"PYTHONPATH": os.pathsep.join(roots)})
        with minifying(run_dir), _sigterm_deferred():
            code = subprocess.run(command, env=env, check=False, stdin=subprocess.DEVNULL).returncode
        wait_for_other_ranks(self.intent.out)
        return code


class _sigterm_deferred:
    """SIGTERM waits until the block ends, then takes effect as it would have.

    Under torchrun, the first rank to exit with an error makes the launcher send SIGTERM
    to every other rank's process group. A rank still minifying would die at once,
    while its ``python -m minifier repro`` child (which gets the same signal) is writing
    its best repro so far. Deferred, the rank waits for that child, then ends as
    SIGTERM ends it. Only the main thread can set a handler; elsewhere nothing changes.
    """

    def __enter__(self) -> None:
        import signal
        import threading

        self.received: list[int] = []
        self.armed = threading.current_thread() is threading.main_thread()
        if self.armed:
            self.previous = signal.signal(signal.SIGTERM, lambda signum, frame: self.received.append(signum))

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.armed:
            signal.signal(signal.SIGTERM, self.previous if self.previous is not None else signal.SIG_DFL)
            if self.received:
                signal.raise_signal(signal.SIGTERM)


def run_name() -> str:
    """The run directory's name: the script, and the rank under torchrun."""
    from pathlib import Path

    name = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "python"
    rank = os.environ.get("RANK")
    return f"{name}-rank{rank}" if rank is not None and os.environ.get("WORLD_SIZE") else name


def _has_random_ops(gm: Any) -> bool:
    from .unit.accuracy import RANDOM_OPS

    for node in gm.graph.nodes:
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        if node.op in ("call_function", "call_method") and name.lstrip("_").rstrip("_").startswith(RANDOM_OPS):
            return True
    return False


def _clone_args(args: Sequence[Any]) -> list[Any]:
    from .unit.case import clone_values

    return clone_values(list(args))


def _rng_state() -> tuple[Any, Any]:
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[Any, Any]) -> None:
    import torch

    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _with_values(inputs: list[Any], args: Sequence[Any]) -> list[Any]:
    """The case's inputs with the values a failing call actually passed."""
    from dataclasses import replace

    import torch

    from .unit.case import TensorMeta

    if len(args) != len(inputs):
        return inputs
    return [
        replace(i, value=a.detach().requires_grad_(a.requires_grad), meta=TensorMeta.of(a))
        if isinstance(a, torch.Tensor)
        else i
        for i, a in zip(inputs, args)
    ]
