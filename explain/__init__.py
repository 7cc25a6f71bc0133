"""explain/: why torch.compile breaks your graphs and recompiles your functions.

Graph breaks and recompiles are why people "don't see speedups". torch 2.13 serves them
poorly: ``torch._dynamo.explain`` counts only function-call ops, prints reasons like
``generic_jump TensorVariable()`` and calls ``torch._dynamo.reset()`` (wiping every
compiled cache in the process); ``CompileProfiler`` is gone; ``TORCH_LOGS=recompiles``
shows only the first failing guard. This package offers:

- :func:`explain` -- ``explain.explain(fn, *args)`` compiles and runs ``fn`` once in an
  isolated cache region and returns an :class:`ExplainReport`: every graph (ops counted
  fully, readable guards, compile time) and every graph break (plain reason, torch's raw
  reason, user line and stack, remedy);
- :class:`RecompileProfiler` -- ``with RecompileProfiler() as prof: ...`` records every
  compile in the block, also of functions compiled before it, with all failing guards per
  recompile, graph hash, arity, triggering line and compile time; ``prof.report()`` and
  ``prof.to_json()``;
- ``python -m explain [--json] [--html FILE] SCRIPT [ARGS]...`` -- both, for a whole script.

How it is built, one module per idea, each importing only the ones above it:

- :mod:`explain.names`: the user's words for the values a frame's guards speak of (a resume
  function's stack values by the expression that computed them);
- :mod:`explain.guards`: guards in readable form, and *all* the guards a call fails;
- :mod:`explain.breaks`: torch's graph-break messages translated, with remedies;
- :mod:`explain.graphs`: a captured graph summarized (ops, inputs, outputs, hash);
- :mod:`explain.hooks`: the three seats in dynamo where everything is observed, and the
  listeners they feed (thread-safe, nestable, zero cost on cache hits);
- :mod:`explain.isolation`: how ``explain`` leaves the user's compiled state untouched;
- :mod:`explain.remedies` and :mod:`explain.compiles`: the records of a recompile report;
- :mod:`explain.report`: the rich rendering of both reports; :mod:`explain.page` the
  same data as one HTML page (``--html FILE``, ``prof.report(html=FILE)``), whose compile
  tree :mod:`explain.tree` joins, one entry per compile;
- :mod:`explain.forecast`: which input sizes will still recompile, over every tensor argument
  (``prof.size_forecast``);
- :mod:`explain.recompiles` (:class:`RecompileProfiler`, and the :class:`RecompileReport` it
  records) and :mod:`explain.session` (``explain.explain`` and its :class:`ExplainReport`):
  the two reports, each read back from its JSON by ``from_json``;
- ``explain.__main__``: the CLI.

Every torch internal they touch goes through :mod:`pt2kit.seams` (``docs/seams.md``).

The public names below are loaded on first use, so ``import explain`` (and the CLI's
argument checking) does not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .breaks import GraphBreak, UserFrame
    from .compiles import CompileRecord, EntryFailures, FunctionCompiles
    from .graphs import CapturedGraph, GraphSummary
    from .guards import GuardFailure, GuardLine
    from .isolation import Isolation
    from .recompiles import RecompileProfiler
    from .session import ExplainReport, explain

# The public names load their module (and torch) on first use, so that ``import explain``
# and ``python -m explain`` with a bad argument answer at once.
_EXPORTS = {
    "explain": "session",
    "ExplainReport": "session",
    "CapturedGraph": "graphs",
    "GraphBreak": "breaks",
    "UserFrame": "breaks",
    "GraphSummary": "graphs",
    "GuardLine": "guards",
    "GuardFailure": "guards",
    "Isolation": "isolation",
    "RecompileProfiler": "recompiles",
    "RecompileReport": "recompiles",
    "CompileRecord": "compiles",
    "FunctionCompiles": "compiles",
    "EntryFailures": "compiles",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'explain' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [  # (a literal, so that tools read the lazy exports as the package's API)
    "CapturedGraph",
    "CompileRecord",
    "EntryFailures",
    "ExplainReport",
    "FunctionCompiles",
    "GraphBreak",
    "GraphSummary",
    "GuardFailure",
    "GuardLine",
    "Isolation",
    "RecompileProfiler",
    "RecompileReport",
    "UserFrame",
    "explain",
]
