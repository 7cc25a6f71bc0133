"""The program's changes to torch itself, put back before a replay compiles.

A program can change torch without touching any graph: a script that plants a bug in an
Inductor lowering (``lowering.lowerings[aten.relu.default] = broken_relu``), a library
that registers its own decomposition, a function of torch replaced by the user's. The
failure lives in that change, so a replay without it passes and proves nothing.

The recorder keeps them in the manifest's ``program_state``
(:func:`replay.state.program_changes`, found by the minifier's :func:`minifier.program_state`):

- ``carried``: the script's source that makes them (its named top-level functions and the
  statements that install them), run here again;
- ``modules``: ``[name, root]`` of the user modules whose functions sit in torch, imported
  here again (importing them installs them);
- ``missing``: what no record can carry (a lambda, a nested function), by torch target:
  a replay that passes without them says so (:attr:`replay.runner.ReplayResult.caveat`).

Like :mod:`replay.rebuild`, :func:`apply_program_state` needs torch and the standard
library alone: ``replay script`` copies it into the scripts it writes (which run
``carried`` as their own top-level code, where ``minify run`` finds and slices it).
"""

from __future__ import annotations

import builtins
import importlib
from typing import Any

from .rebuild import add_import_roots

#: The manifest's key (absent from records written before it existed: no changes known).
KEY = "program_state"


def apply_program_state(
    manifest: dict[str, Any], internals: dict[str, Any], definitions: dict[str, Any] | None = None
) -> None:
    """Import the recorded user modules and run the carried source (unless ``definitions``: it ran there).

    Then Inductor's caches are turned off (``force_disable_caches``), as pt2kit's repros do:
    their keys hash the graph and the config, not a patched lowering, so a kernel an
    unpatched run cached would be served in its place. ``internals["refresh_compiler_tables"]``
    drops Inductor's cached copy of its decomposition table, read again with the change.
    Whatever the user's code raises propagates (the caller says the frame cannot be rebuilt).
    """
    state = manifest.get("program_state") or {}
    modules = state.get("modules") or []
    carried = state.get("carried") or ""
    add_import_roots(modules)
    for name, _ in modules:
        importlib.import_module(name)
    if carried and definitions is None:
        namespace = {"__name__": "__pt2kit_program__", "__builtins__": builtins}
        exec(compile(carried, "<the program's changes to torch>", "exec"), namespace)  # noqa: S102
    if carried or modules:
        forget_copies = internals.get("refresh_compiler_tables")
        if forget_copies is not None:
            forget_copies()
        inductor_config: Any = importlib.import_module("torch._inductor.config")
        inductor_config.force_disable_caches = True


def missing_changes(manifest: dict[str, Any]) -> list[str]:
    """The program's changes to torch the record could not carry (``target = module.function``)."""
    return [str(item) for item in (manifest.get(KEY) or {}).get("missing") or []]
