"""validation/: are dynamo's shape guards sound, and which input sizes does a program accept?

Two questions, one machinery (a symbolic trace's ShapeEnv decisions, translated to Z3):

- **Guard validation** -- :func:`check_guards`, ``with GuardValidator():`` and
  ``python -m validation guards SCRIPT``. For every compile, Z3 checks that the guard code
  dynamo *installed* implies every shape assumption the trace made: ``evaluate_expr``
  guards, decisions taken statically without a guard, runtime asserts, 0/1 specialization
  and duck sizing. Each compile is *sound*, *unsound* (with a counterexample: sizes that
  pass the guards and break an assumption; ``confirm=True`` runs it, eager against the
  cached entry) or *incomplete* (something, e.g. a float guard, has no exact Z3 model --
  never reported as sound).
- **Size enumeration** -- :func:`sizes` and ``python -m validation sizes --fn MOD:FN``.
  The sizes of a box split into equivalence classes, each with its outcome (``ok`` or the
  exception type), a readable condition, a minimal representative and whether the
  outcome depends on values. :func:`representatives` gives the minimal sizes alone (for
  tests, opcheck's sample inputs, or a minifier's starting point).

How it is built, one module per idea:

- :mod:`validation.z3ops`: exact Python ``//``/``%`` in Z3, and the one way Z3 is asked;
- :mod:`validation.pyexpr`: installed guard code (Python text) to Z3;
- :mod:`validation.translate`: one Z3 vocabulary per trace (sources, symbols, sympy to Z3);
- :mod:`validation.assumptions`: what a trace assumed (decisions, bindings, ranges, facts);
- :mod:`validation.soundness`: guards ⇒ assumptions, one obligation at a time;
- :mod:`validation.counterexamples`: the smallest sizes that break one and pass every installed guard;
- :mod:`validation.confirm`: a counterexample run for real;
- :mod:`validation.guards`: :class:`GuardValidator`, :func:`check_guards`, the report;
- :mod:`validation.tracing`: one symbolic trace of a function at one point;
- :mod:`validation.size_classes`: what an enumeration answers (classes, report, which class owns a point);
- :mod:`validation.enumeration`: the search for the classes, and its entry points;
- :mod:`validation.size_checks`: an answer against real runs (brute force) and dynamo's cache (recompiles);
- :mod:`validation.report`: rich rendering; :mod:`validation.page`: the same data as one HTML
  page (``--html FILE``); ``validation.__main__``: the CLI.

Every private torch name used lives in ``pt2kit/seams/`` (``shape_env``, ``guard_code``,
``convert_frame``, ``sympy_z3``, ``fake_tensor``). Public names load on first use, so
``import validation`` and the CLI's argument checking do not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .guards import GuardReport, GuardValidator, check_guards, validate_guards
    from .enumeration import SizeClass, SizeReport, enumerate_sizes, recompile_forecast, representatives, sizes
    from .size_checks import forecast_recompiles
    from .soundness import CompileCheck, Finding

_EXPORTS = {
    "check_guards": "guards",
    "validate_guards": "guards",
    "GuardValidator": "guards",
    "GuardReport": "guards",
    "CompileCheck": "soundness",
    "Finding": "soundness",
    "sizes": "enumeration",
    "enumerate_sizes": "enumeration",
    "representatives": "enumeration",
    "recompile_forecast": "enumeration",
    "forecast_recompiles": "size_checks",
    "SizeReport": "enumeration",
    "SizeClass": "enumeration",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'validation' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [  # (a literal, so that tools read the lazy exports as the package's API)
    "CompileCheck",
    "Finding",
    "GuardReport",
    "GuardValidator",
    "SizeClass",
    "SizeReport",
    "check_guards",
    "enumerate_sizes",
    "forecast_recompiles",
    "recompile_forecast",
    "representatives",
    "sizes",
    "validate_guards",
]
