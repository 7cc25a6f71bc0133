"""minifier: from a failing ``torch.compile`` program to the stage that breaks and a minimal repro.py.

Follow one bug through the modules, in this order:

1. :mod:`minifier.capture.recorder` runs the user's program with pt2kit in torch's backend hook
   (:mod:`minifier.capture.hooks`) and saves every dynamo graph with its real inputs, as a
   :class:`~minifier.unit.case.GraphCase` written out as a runnable repro
   (:mod:`minifier.repro.writer`);
2. :mod:`minifier.stages.run` runs one graph through one stage (eager → aot_eager →
   aot_eager_decomp_partition → inductor or the user's backend), and lowers a dynamo
   graph to the aot graphs its backend compiles;
3. :mod:`pt2kit.signature` decides whether two failures are the same failure;
4. :mod:`minifier.isolation.worker` answers every such question in a forked child of a warm
   process, so segfaults and hangs cannot take pt2kit down (:mod:`minifier.isolation.session`
   adds a run directory and progress);
5. :mod:`minifier.bisect.bisection` finds the first failing graph and stage;
6. :mod:`minifier.reduce.engine` shrinks that graph through one cached ``consider()``;
7. :mod:`minifier.minification` ties it together and writes ``repro.py`` and ``report.json``.

The command line is :mod:`minifier.cli` (``minify``); ``TORCHDYNAMO_REPRO_AFTER`` support
is :mod:`minifier.autoload` (arming the hook), :mod:`minifier.on_failure` (what it does at
each compile) and :mod:`minifier.backward_prologue` (a backward that fails before its graph runs). The Python API below is loaded on first use: this package
is imported by the autoload hook at interpreter start-up and must stay cheap.
:func:`read_report` (:mod:`minifier.result`) reads a run's ``report.json`` back as a typed record, and
``minify show`` (:mod:`minifier.show`) prints it again through the same views (:mod:`minifier.report`).

For pt2kit's other tools, this face also lends :func:`describe_backend` and :data:`BACKEND_NAME`:
how a repro names the backend a program compiled with (``replay`` records a frame's backend so),
and :func:`program_state`: the program's changes to torch a repro carries, imports or lacks.
The other tools import nothing else of the minifier's (``pyproject.toml``'s import contracts).
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing is not imported: this package loads at interpreter start-up)
if TYPE_CHECKING:
    from typing import Any

    from .api import bisect, minify, save_repro
    from .capture.context import describe_backend
    from .capture.patches import program_state
    from .result import read_report
    from .unit.case import BACKEND_NAME

__all__ = ["BACKEND_NAME", "bisect", "describe_backend", "minify", "program_state", "read_report", "save_repro"]


def __getattr__(name: str) -> Any:
    if name == "BACKEND_NAME":
        from .unit import case

        return case.BACKEND_NAME
    if name == "describe_backend":
        from .capture import context

        return context.describe_backend
    if name == "program_state":  # (replay records a frame's program state so)
        from .capture import patches

        return patches.program_state
    if name == "read_report":
        from . import result

        return result.read_report
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'minifier' has no attribute {name!r}")
