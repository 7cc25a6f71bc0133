"""The torch state around a frame that a replay must put back: global state, RNG, config.

Taken at frame entry, cheaply (a few microseconds, plus about half a millisecond for the
config), because it is taken for every frame dynamo compiles and thrown away for every
frame that does not fail. Only public torch APIs are used here, except reading which
config values differ from their defaults (:mod:`pt2kit.seams.config`).

- **Global state**: grad mode, inference mode, autocast (per device, with its dtype and
  cache flag), the default dtype, deterministic algorithms, float32 matmul precision and
  the cuDNN/TF32 backend flags: what dynamo's ``GlobalStateGuard`` checks, and more.
- **RNG**: torch's CPU generator (and CUDA's, once initialized), Python's ``random``, and
  numpy's global generator if the program imported numpy.
- **Config**: every compile-relevant value of dynamo, Inductor, functorch,
  ``torch.fx.experimental`` and ``torch.compiler`` config that differs from its
  default, minus the switches that only steer torch's debug tooling.
- **The program's changes to torch** (:func:`program_changes`, taken when a frame fails,
  not at entry: a scan of torch's modules): a lowering or decomposition the script put
  in a table, a function of torch it replaced. The minifier's :func:`minifier.program_state`
  finds them: named functions of the script are carried as its sliced source, those of
  user modules as modules to import, and the rest (a lambda, a nested function) are
  named as missing. The custom ops the frame names (as values, or in its code) ride the same way:
  their definitions in the script carried, their user modules imported.
  :mod:`replay.program` puts them back at replay.
- **The backend** (:func:`describe_compile_backend`): how a replay in another process gets it back.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from pt2kit.seams import config, convert_frame

#: Config that steers recording and debug tooling rather than what gets compiled.
IGNORED_CONFIG = frozenset({"replay_record_enabled", "repro_after", "repro_level", "debug_dir_root", "compile_threads"})

#: Backend flags recorded by dotted name under ``torch.backends``.
BACKEND_FLAGS = ("cudnn.deterministic", "cudnn.benchmark", "cudnn.allow_tf32", "cuda.matmul.allow_tf32")


def global_state() -> dict[str, Any]:
    """The process-wide torch state a compiled frame depends on, as JSON."""
    autocast = {}
    for device in ("cpu", "cuda"):
        autocast[device] = {
            "enabled": torch.is_autocast_enabled(device),
            "dtype": _dtype(torch.get_autocast_dtype(device)),
        }
    backends = {}
    for name in BACKEND_FLAGS:
        owner: Any = torch.backends
        try:
            for part in name.split("."):
                owner = getattr(owner, part)
        except (AttributeError, RuntimeError):
            continue
        if isinstance(owner, bool):
            backends[name] = owner
    return {
        "grad_enabled": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "default_dtype": _dtype(torch.get_default_dtype()),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "autocast": autocast,
        "autocast_cache_enabled": torch.is_autocast_cache_enabled(),
        "backends": backends,
    }


@dataclass
class RngState:
    """Every random number generator a frame may draw from, as it was at frame entry."""

    torch_cpu: torch.Tensor
    python: tuple[Any, ...]
    numpy: list[Any] | None = None
    cuda: list[torch.Tensor] = field(default_factory=list)

    @classmethod
    def take(cls) -> RngState:
        numpy_state = None
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            name, keys, pos, has_gauss, cached = numpy.random.get_state()
            numpy_state = [str(name), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
        return cls(torch.get_rng_state(), random.getstate(), numpy_state, cuda)

    def describe(self, encoder: Any) -> dict[str, Any]:
        """The manifest's ``rng`` section; the tensors go through ``encoder``."""
        out: dict[str, Any] = {
            "torch": encoder.encode(self.torch_cpu, "torch RNG state"),
            "python": encoder.encode(self.python, "python RNG state"),
        }
        if self.numpy is not None:
            out["numpy"] = self.numpy
        if self.cuda:
            out["cuda"] = [encoder.encode(s, "cuda RNG state") for s in self.cuda]
        return out


def non_default_config() -> dict[str, dict[str, Any]]:
    """Compile-relevant config values that differ from their defaults, per module (live: encode them soon).

    Modules never imported are all defaults and are not read. Keys torch marks
    ``compile_ignored`` (``suppress_errors``, ``verbose``...) are left out: they do not
    change what gets compiled, and a replay must show the failure, not suppress it.
    """
    changed: dict[str, dict[str, Any]] = {}
    for name in config.REPLAY_MODULES:
        if name not in sys.modules:
            continue
        values = {k: v for k, v in config.changed_values(name).items() if k not in IGNORED_CONFIG}
        if values:
            changed[name] = values
    return changed


def program_changes(ops: Iterable[str] = (), sources: Iterable[str] = ()) -> dict[str, Any]:
    """The manifest's ``program_state``: ``patches`` (torch target -> the script's function), ``carried``
    (the script's source that makes them, and defines the custom ops among ``ops`` or called in the
    ``sources``' text), ``modules`` (``[name, root]`` to import), ``missing``."""
    from minifier import program_state

    try:
        found = program_state(ops, sources)
    except Exception as e:  # noqa: BLE001 - a record without them, saying so, beats no record
        return {"patches": {}, "carried": "", "modules": [], "missing": [f"(not read: {type(e).__name__}: {e})"]}
    return {
        "patches": dict(found.patches),
        "carried": found.carried,
        "modules": [list(module) for module in found.modules],
        "missing": list(found.missing),
    }


def describe_compile_backend(compiler_fn: Callable[..., Any]) -> dict[str, Any]:
    """The manifest's ``compile.backend``: how a replay in another process gets the backend back.

    The minifier's naming (:func:`minifier.describe_backend`): a registered name or
    ``module:function`` (with the user modules to import), or, for a backend defined in the
    script, a lambda, a partial or a closure, its source (``definitions``) which binds it to
    ``binds`` or registers it by name. ``name`` is None when none of that works (``why``).
    """
    from minifier import BACKEND_NAME, describe_backend

    backend_fn, backend_name = convert_frame.innermost_backend(compiler_fn)
    info = describe_backend(backend_fn, backend_name)
    return {
        "name": None if info.unrecoverable else info.name,
        "modules": [list(m) for m in info.modules],
        "config": info.config,
        "definitions": info.definitions,
        "binds": BACKEND_NAME if f"{BACKEND_NAME} = " in info.definitions else None,
        "why": info.unrecoverable,
    }


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
