"""``TORCHDYNAMO_REPRO_AFTER`` on any script: pt2kit instead of torch's built-in minifier.

``pt2kit-autoload.pth`` (installed at the root of site-packages) runs one line at
interpreter start-up: when ``TORCHDYNAMO_REPRO_AFTER`` is set it calls
:func:`install`, otherwise it does nothing and imports nothing. :func:`install` puts
a finder on ``sys.meta_path`` that waits for ``torch._dynamo.repro.after_dynamo``,
the module ``torch.compile`` imports to wrap backends, and arms pt2kit right after
it loads: a process that never compiles pays nothing more than that finder.

Armed, pt2kit sets torch's own ``repro_after`` to None (torch's minifier stands
down) and wraps every backend torch.compile resolves (:func:`minifier.hooks.dynamo_backends`).
The wrapper follows torch's levels (``TORCHDYNAMO_REPRO_LEVEL``, default 2):

- **1**: when a graph fails to compile or run, save it as an unminified ``repro.py``;
- **2**: the same, then minify it in a fresh ``python -m minifier repro`` process and
  write the minimal ``repro.py`` directly (no launcher step);
- **3**: save every graph before it is compiled, so a segfault still leaves a repro
  (``minify repro`` on it minifies it);
- **4**: also check each compiled graph's first result against an fp64 reference, and
  minify an accuracy failure.

Each failure gets a new run directory under ``TORCHDYNAMO_REPRO_DIR`` (default
``./torch_compile_debug``). The original exception is re-raised, so the program
fails as it would have.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ARM_AFTER = "torch._dynamo.repro.after_dynamo"
_state: dict[str, Any] = {"installed": False, "armed": False, "hooks": None, "counter": 0}
_lock = threading.Lock()


class _ArmAfterImport(importlib.abc.MetaPathFinder):
    """Arms pt2kit as soon as torch's repro hook module has been imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != ARM_AFTER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_arm(module: ModuleType) -> None:
            exec_module(module)
            arm()

        spec.loader.exec_module = exec_then_arm  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Called by the ``.pth`` line when ``TORCHDYNAMO_REPRO_AFTER`` is set. Idempotent."""
    with _lock:
        if _state["installed"]:
            return
        _state["installed"] = True
    if ARM_AFTER in sys.modules:
        arm()
    else:
        sys.meta_path.insert(0, _ArmAfterImport())


def settings() -> tuple[str, int, Path]:
    """``(after, level, repro_dir)`` from the environment, validated."""
    after = os.environ.get("TORCHDYNAMO_REPRO_AFTER", "")
    if after not in ("dynamo", "aot"):
        raise ValueError(f"TORCHDYNAMO_REPRO_AFTER must be 'dynamo' or 'aot', not {after!r}")
    level = int(os.environ.get("TORCHDYNAMO_REPRO_LEVEL", "2"))
    if level not in (1, 2, 3, 4):
        raise ValueError(f"TORCHDYNAMO_REPRO_LEVEL must be 1, 2, 3 or 4, not {level}")
    return after, level, Path(os.environ.get("TORCHDYNAMO_REPRO_DIR") or "torch_compile_debug")


def arm() -> None:
    """Take over from torch's minifier (see the module docstring)."""
    with _lock:
        if _state["armed"]:
            return
        _state["armed"] = True
    import torch._dynamo.config as dynamo_config

    from . import hooks

    try:
        after, level, out = settings()
    except ValueError as e:
        print(f"pt2kit: {e}; leaving torch's minifier in charge", file=sys.stderr)
        return
    # torch's own wrappers stand down, in every thread: torch 2.13 keeps config per
    # context, and a new thread starts from the default it read from the environment.
    dynamo_config._config["repro_after"].default = None
    dynamo_config.repro_after = None
    guard = ReproOnFailure(after, level, out)
    context = hooks.dynamo_backends(guard.wrap_backend)
    context.__enter__()  # for the life of the process
    _state["hooks"] = context


class ReproOnFailure:
    """The backend wrapper the autoload hook installs."""

    def __init__(self, after: str, level: int, out: Path) -> None:
        self.after, self.level, self.out = after, level, out

    def wrap_backend(self, fn: Callable[..., Any], name: str | None) -> Callable[..., Any]:
        from .capture import learn_dynamo_own_patches

        learn_dynamo_own_patches()  # here: torch.compile time, outside any compile or import
        guard = self

        def pt2kit_repro_on_failure(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
            from .capture import describe_backend, make_case

            with _lock:
                index = _state["counter"]
                _state["counter"] += 1
            case = make_case(gm, example_inputs, backend=describe_backend(fn, name), index=index)
            if guard.level == 3:
                guard.save(case, "saved before compiling (TORCHDYNAMO_REPRO_LEVEL=3)")
            try:
                compiled = fn(gm, example_inputs, **kwargs)
            except Exception:
                guard.handle(case)
                raise
            return guard.watch(compiled, case)

        return pt2kit_repro_on_failure

    def watch(self, compiled: Callable[..., Any], case: Any) -> Callable[..., Any]:
        guard = self
        checked = [self.level != 4]

        def pt2kit_watched(*args: Any) -> Any:
            if not checked[0]:
                checked[0] = True
                return guard.check_accuracy(compiled, case, args)
            try:
                return compiled(*args)
            except Exception:
                guard.handle(case.replace(inputs=_with_values(case.inputs, args)))
                raise

        return pt2kit_watched

    def check_accuracy(self, compiled: Callable[..., Any], case: Any, args: Sequence[Any]) -> Any:
        """Level 4: a graph's first call is compared with eager, in fp32 and fp64."""
        import copy

        import torch

        from .case import clone_tensor
        from .signature import ACCURACY_MESSAGE, accuracy_divergence
        from .stages import to_float64

        def fresh() -> list[Any]:
            return [clone_tensor(a.detach()) if isinstance(a, torch.Tensor) else a for a in args]

        failing = case.replace(inputs=_with_values(case.inputs, args))
        inputs = fresh()
        try:
            result = compiled(*args)
        except Exception:
            self.handle(failing)
            raise
        with torch.no_grad():
            expected = case.gm(*inputs)
            fp64 = _as_list(copy.deepcopy(case.gm).to(torch.float64)(*to_float64(fresh())))
        problem = accuracy_divergence(_as_list(expected), _as_list(result), fp64)
        if problem:
            path = self.save(failing, f"diverges from the fp64 reference ({problem})")
            self.minify(path, accuracy=True)
            from torch._dynamo.debug_utils import AccuracyError

            raise AccuracyError(f"pt2kit: {ACCURACY_MESSAGE} in graph {case.label()}: {problem}; repro in {path.parent.parent.parent}")
        return result

    def handle(self, case: Any) -> None:
        path = self.save(case, "failed")
        if self.level in (2, 4):
            self.minify(path, accuracy=False)

    def save(self, case: Any, why: str, quiet: bool = False) -> Path:
        from .session import new_run_dir
        from .writer import write_repro

        run_dir = new_run_dir(self.out, Path(sys.argv[0]).stem or "python")
        path = write_repro(case, run_dir / "captured" / f"g{case.index}", stage=case.backend)
        if self.level in (1, 3):
            write_repro(case, run_dir, stage=case.backend, note="Saved by pt2kit's TORCHDYNAMO_REPRO_AFTER hook; not minified.")
        if not quiet:
            print(f"pt2kit: graph {case.label()} {why}; repro in {run_dir}", file=sys.stderr)
        return path

    def minify(self, path: Path, *, accuracy: bool) -> int:
        """Minify a saved graph in a fresh process (this one may be multi-threaded)."""
        run_dir = path.parent.parent.parent
        command = [sys.executable, "-m", "minifier", "repro", str(path), "--after", self.after, "--run-dir", str(run_dir)]
        command.append("--accuracy" if accuracy else "--no-accuracy")
        env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
        return subprocess.run(command, env=env, check=False).returncode


def _as_list(outputs: Any) -> list[Any]:
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def _with_values(inputs: list[Any], args: Sequence[Any]) -> list[Any]:
    """The case's inputs with the values a failing call actually passed."""
    from dataclasses import replace

    import torch

    from .case import TensorMeta

    if len(args) != len(inputs):
        return inputs
    return [
        replace(i, value=a.detach().requires_grad_(a.requires_grad), meta=TensorMeta.of(a)) if isinstance(a, torch.Tensor) else i
        for i, a in zip(inputs, args)
    ]
