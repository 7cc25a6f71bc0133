"""opcheck: a pytest plugin that checks custom ops and their fake/meta kernels.

``pytest --opcheck`` records every custom-op call an existing test suite makes,
checks each distinct call signature once (schema and mutation, autograd
registration, fake kernel vs real kernel, AOT dispatch with static and dynamic
shapes), and folds the results into the outcome of each test that made the call
(one outcome per collected test). See ``plugin.py`` for the options, the
``opcheck`` marker and fixture.

Modules:
    plugin     the pytest hooks, options, marker and fixture (imports no torch)
    recording  capturing calls and deduplicating them by signature
    checks     the checks, one function each, built on torch's opcheck utilities
    runner     a session: record, check, apply the failures file
    failures   torch's failures-dict JSON format, read and written
    reporting  verdicts folded into each item's report; pytest items as failures-file names
    summary    the op x check table and the --opcheck-list listing

Importing this package does not import torch: pytest loads the plugin in every
session, and only an opcheck option, marker or fixture pays for torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHECKS", "OpcheckFailure", "run_checks"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `import opcheck` (and the plugin) stays torch-free.
    if name in ("CHECKS", "run_checks"):
        from opcheck import checks

        return getattr(checks, name)
    if name == "OpcheckFailure":
        from opcheck.runner import OpcheckFailure

        return OpcheckFailure
    raise AttributeError(f"module 'opcheck' has no attribute {name!r}")
