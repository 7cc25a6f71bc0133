"""Seam: ``torch._inductor.compiler_bisector.CompilerBisector``, driven one subsystem at a time.

torch's bisector finds which part of a backend breaks a program: each *subsystem* of
``aot_eager_decomp_partition`` and ``inductor`` (decompositions, CSE, the pre-grad,
joint-graph and post-grad passes, lowerings, config changes such as
``fallback_random``) asks ``CompilerBisector.disable_subsystem(backend, name)`` as it
runs; a subsystem applied many times (each lowering, each pass) is bisected down to the
application that breaks it. Its state lives in files (``get_dir``), so the test it runs
can be another process: pt2kit drives the search here and runs every test as an
isolated query, and a test that segfaults costs a query, not pt2kit.

torch's ``do_bisect`` starts at the ``eager`` backend and lets ``torch.compile``'s backend
follow its state; pt2kit already knows the failing stage, and its repro of an aot graph
calls Inductor's inner compile directly, so :class:`Drill` starts at that stage's
subsystems and applies a config change itself (:func:`config_change`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._inductor.compiler_bisector (CompilerBisector: in_process_cache, bisection_enabled, update_bisect_status, "
        "update_run_state, process_subsystem, get_subsystem, get_run_state, get_bisect_range, "
        "get_call_counter_debug_info (2.13 on), get_config_change; "
        "BACKENDS, BisectSubsystem, ConfigChange)"
    ),
    features=("the subsystem that breaks, and a workaround",),
)

#: The backends whose subsystems the bisector knows.
DRILLABLE = ("aot_eager_decomp_partition", "inductor")


def probe() -> None:
    from torch._inductor import compiler_bisector as cb

    for backend in DRILLABLE:
        names = [s.name for s in cb.BACKENDS[backend]]
        if not names:
            raise AttributeError(f"CompilerBisector knows no subsystems of {backend}")
    for name in (
        "process_subsystem",
        "get_subsystem",
        "get_run_state",
        "update_bisect_status",
        "update_run_state",
        "get_bisect_range",
        "get_config_change",
    ):
        if not callable(getattr(cb.CompilerBisector, name, None)):
            raise AttributeError(f"CompilerBisector.{name} is gone")
    import torch._functorch.config

    if not isinstance(getattr(torch._functorch.config, "guess_tangent_strides_as_outputs", None), bool):
        raise AttributeError("torch._functorch.config.guess_tangent_strides_as_outputs is gone")
    with tempfile.TemporaryDirectory(prefix="pt2kit-bisect-probe-") as directory, enabled(directory):
        cb.CompilerBisector.update_bisect_status("inductor", "lowerings")
        cb.CompilerBisector.update_run_state(
            "inductor", cb.CompilerBisector.get_subsystem_object("inductor", "lowerings"), "test_disable"
        )
        if not cb.CompilerBisector.disable_subsystem("inductor", "lowerings"):
            raise AttributeError("CompilerBisector no longer disables a subsystem whose run state is test_disable")


@dataclass(frozen=True)
class Found:
    """What the bisector found: the subsystem, the application that breaks it (0 for a config change), and what that was."""

    backend: str
    subsystem: str
    application: int
    detail: str | None
    config_change: tuple[str, str, Any] | None  # (config module's short name, key, value) of a config-change subsystem


def subsystems(backend: str) -> list[str]:
    from torch._inductor.compiler_bisector import BACKENDS

    return [s.name for s in BACKENDS.get(backend, [])]


@contextlib.contextmanager
def enabled(directory: str) -> Iterator[None]:
    """Within the block, this process's compiles consult the bisector state in ``directory``."""
    from torch._inductor.compiler_bisector import CompilerBisector

    before = (CompilerBisector.bisection_enabled, CompilerBisector.in_process_cache)
    CompilerBisector.bisection_enabled, CompilerBisector.in_process_cache = True, directory
    _reset_counters(CompilerBisector)
    try:
        yield
    finally:
        CompilerBisector.bisection_enabled, CompilerBisector.in_process_cache = before


def state(backend: str) -> tuple[str | None, str | None]:
    """The subsystem of ``backend`` under test in the enabled directory, and its run state (``test_disable``, ``bisect``...)."""
    from torch._inductor.compiler_bisector import CompilerBisector

    name = CompilerBisector.get_subsystem()
    return name, CompilerBisector.get_run_state(backend, name) if name else None


def config_change(backend: str) -> dict[str, Any]:
    """The config the bisector's current state asks for (a ``ConfigChange`` subsystem under test), else {}."""
    from torch._inductor.compiler_bisector import CompilerBisector

    return CompilerBisector.get_config_change(backend) or {}


def drill(backend: str, directory: str, passes: Callable[[], bool]) -> Found | None:
    """Find the subsystem of ``backend`` that breaks it; ``passes()`` runs the failing test (True: it passed).

    torch's own search over the backend's subsystems, in its order: each is first
    disabled whole; the first whose disabling makes the test pass is the answer,
    bisected to its application when it is applied more than once.
    """
    from torch._inductor.compiler_bisector import BACKENDS, CompilerBisector, ConfigChange

    os.makedirs(directory, exist_ok=True)
    with enabled(directory):
        first = BACKENDS[backend][0]
        CompilerBisector.update_bisect_status(backend, first.name)
        CompilerBisector.update_run_state(backend, first, "test_disable")
        if not _search(CompilerBisector, backend, first, passes):
            return None
        name = cast(str, CompilerBisector.get_subsystem())  # (the search found one: torch recorded its name)
        subsystem = CompilerBisector.get_subsystem_object(backend, name)
        if isinstance(subsystem, ConfigChange):
            return Found(
                backend,
                name,
                0,
                f"{subsystem.config_field} = {subsystem.config_value!r}",
                (subsystem.config_name, subsystem.config_field, subsystem.config_value),
            )
        low, _ = CompilerBisector.get_bisect_range(backend, name)
        return Found(backend, name, low, _application_detail(CompilerBisector, backend, name, low), None)


def _application_detail(cls: Any, backend: str, name: str, application: int) -> str | None:
    """What the ``application``-th use of a subsystem was, where torch recorded it (else None)."""
    debug_info = getattr(cls, "get_call_counter_debug_info", None)
    if debug_info is not None:
        return debug_info(backend, name, application)
    from torch._inductor import compiler_bisector  # torch 2.11 and 2.12: a module-level table

    return getattr(compiler_bisector, "call_counter_debug_info", {}).get(application)


def _reset_counters(cls: Any) -> None:
    """Count every subsystem's applications from zero (a classmethod from torch 2.13, a function before)."""
    from torch._inductor import compiler_bisector

    (getattr(cls, "reset_counters", None) or getattr(compiler_bisector, "reset_counters"))()


def disable_whole(backend: str, name: str, directory: str) -> None:
    """Set the bisector's state in ``directory`` so that subsystem ``name`` of ``backend`` is disabled whole."""
    from torch._inductor.compiler_bisector import CompilerBisector

    os.makedirs(directory, exist_ok=True)
    with enabled(directory):
        subsystem = CompilerBisector.get_subsystem_object(backend, name)
        CompilerBisector.update_bisect_status(backend, name)
        CompilerBisector.update_run_state(backend, subsystem, "test_disable")  # (a config change's value too)


def _search(cls: Any, backend: str, subsystem: Any, passes: Callable[[], bool]) -> bool:
    """torch's own search from ``subsystem`` on (disable each; where that fixes it, bisect its applications)."""
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # (it narrates every step on stdout)
        try:
            return bool(cls.process_subsystem(backend, subsystem, passes, cli_interface=False))
        except RuntimeError:  # it passed with every application enabled: not this one (a flaky test)
            return False


# --------------------------------------------------------------------------- #
# Workarounds: code a user runs before their program (these name torch's internals)
# --------------------------------------------------------------------------- #


def _op_expression(op_name: str) -> str:
    """``torch.ops.aten.relu.default`` for ``aten.relu.default``."""
    return f"torch.ops.{op_name}"


#: A change to Inductor's tables is no part of the whole-graph caches' keys (Inductor's FX graph
#: cache, AOTAutograd's cache; local and remote): without these lines, the graph the user's earlier
#: runs compiled is served again and the change does nothing. Kernels stay cached: their key is
#: their source, which the change does change. (``force_disable_caches`` would also compile every
#: kernel and the precompiled header afresh, at each compile: twice the program's time here.)
CACHES_OFF = (
    "import torch._inductor.config, torch._functorch.config  # (the graph caches' keys do not see the lines above)\n"
    "torch._inductor.config.fx_graph_cache = torch._inductor.config.fx_graph_remote_cache = False\n"
    "torch._functorch.config.enable_autograd_cache = torch._functorch.config.enable_remote_autograd_cache = False\n"
)


#: AOTAutograd lays out each output's incoming gradient as that output (``guess_tangent_strides_as_outputs``), by a
#: copy into memory laid out so: where the output's elements overlap (an ``unfold`` view), the gradients of the
#: elements that share memory collapse into one. The workaround lays gradients out densely instead.
DENSE_TANGENTS = (
    "import torch._functorch.config\ntorch._functorch.config.guess_tangent_strides_as_outputs = False\n" + CACHES_OFF
)


def in_place_twin(op_name: str) -> str | None:
    """``aten.index_put_.default`` for ``aten.index_put.default`` and the converse; None for another namespace's op."""
    namespace, _, rest = op_name.partition(".")
    packet, _, overload = rest.rpartition(".")
    if namespace != "aten" or not packet:
        return None
    return f"aten.{packet[:-1] if packet.endswith('_') else packet + '_'}.{overload}"


def fallback_code(op_name: str) -> str:
    """Make ``op_name`` (``aten.relu.default``) run ATen's kernel instead of Inductor's lowering, and its in-place twin,
    where there is one: Inductor's reinplacing turns the graph's ``index_put`` into the ``index_put_`` it lowers."""
    twin = in_place_twin(op_name)
    ops = [_op_expression(op_name)] + (
        [f"getattr(getattr(torch.ops.aten, {twin.split('.')[1]!r}, None), {twin.split('.')[2]!r}, None)"] if twin else []
    )
    return (
        "import torch\n"
        "from torch._inductor import lowering\n"
        f"for op in [{', '.join(ops)}]:\n"
        "    if op is not None:\n"
        "        lowering.lowerings.pop(op, None)\n"
        "        lowering.make_fallback(op, warn=False, override_decomp=True)\n" + CACHES_OFF
    )


def no_decomposition_code(op_name: str) -> str:
    """Drop Inductor's decomposition of ``op_name``: it reaches the lowering (or a fallback) whole."""
    return (
        "import torch\nfrom torch._inductor import decomposition\n"
        f"decomposition.decompositions.pop({_op_expression(op_name)}, None)\n" + CACHES_OFF
    )


def lighter_backend_code(backend: str) -> str:
    """Every ``torch.compile`` of the program uses ``backend`` instead of Inductor."""
    return (
        "import functools\n"
        "import torch\n"
        "_compile = torch.compile\n\n\n"
        "@functools.wraps(_compile)\n"
        "def compile_lighter(*args, **kwargs):\n"
        f"    kwargs['backend'] = {backend!r}\n"
        "    kwargs.pop('mode', None)\n"
        "    kwargs.pop('options', None)\n"
        "    return _compile(*args, **kwargs)\n\n\n"
        "torch.compile = compile_lighter\n"
    )
