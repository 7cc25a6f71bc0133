"""The program's changes to torch itself: patched functions and entries in the compilers' tables.

A program can break torch on purpose (a test planting a bug in Inductor's codegen) or
by accident, or extend it (a serving stack registering its own lowering). Such a
change lives in the script, not in any graph, so a repro must carry it, or the failure
cannot reproduce on its own:

- :func:`script_patches` finds the script's functions installed in torch: module
  attributes, class attributes (``CppOverrides.relu = staticmethod(...)``), and
  entries of Inductor's lowering and decomposition tables
  (:mod:`minifier.seams.compiler_state`); :func:`patch_definitions` slices the script
  for the source that makes them (:func:`minifier.capture.extract.slice_script` keeps the
  assignments that install them);
- :func:`state_modules` names the user modules whose functions sit in those tables
  (a repro imports them);
- :func:`state_missing` names what no repro can carry (a lambda, a function of a
  module no repro can import): exit 5 and ``report.json``'s ``state_missing`` say it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .context import MAIN_MODULES, module_import_spec, script_source
from ..seams import compiler_state

if TYPE_CHECKING:
    from ..unit.case import GraphCase


def script_patches() -> dict[str, str]:
    """Functions of the user's script installed into torch's modules: ``{torch target: function name}``.

    A program can break torch on purpose (a test planting a bug in Inductor's
    codegen) or by accident. Such a patch lives in the script, not in any graph, so a
    repro must carry it (:func:`minifier.capture.extract.slice_script` keeps the assignment)
    or the failure cannot reproduce on its own.
    """
    found: dict[str, str] = {}

    # Only raw dict entries and type checks: touching arbitrary attributes of torch's
    # modules runs lazy initializers (CUDA, deprecated aliases) in the user's program.
    def user_function(value: Any) -> str | None:
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, types.FunctionType) and value.__module__ in MAIN_MODULES:
            return value.__name__
        return None

    import warnings

    with warnings.catch_warnings():  # (a deprecated alias warns when merely looked at)
        warnings.simplefilter("ignore")
        _scan(found, user_function)
    for where, fn in compiler_state.user_entries():  # a lowering or decomposition the script put in a table
        if (name := user_function(fn)) is not None and name != "<lambda>":
            found[where] = name
    return found


def state_modules() -> list[tuple[str, str]]:
    """The user modules whose functions sit in torch's compiler tables: a repro imports them (they install them)."""
    modules = [module_import_spec(str(getattr(fn, "__module__", ""))) for _, fn in compiler_state.user_entries()]
    return list(dict.fromkeys(spec for spec in modules if spec is not None))


def state_missing() -> list[str]:
    """Changes to torch's compiler tables that no repro can carry (:mod:`minifier.seams.compiler_state`).

    An entry whose code is a lambda, or lives in a module a repro cannot import (it is
    neither the script, carried as source, nor a user module), is named instead: the
    failure may need it.
    """
    missing = []
    for where, fn in compiler_state.user_entries():
        module = str(getattr(fn, "__module__", ""))
        name = getattr(fn, "__qualname__", type(fn).__name__)
        if module in MAIN_MODULES and "<lambda>" not in name:
            continue  # carried as source (script_patches)
        if module not in MAIN_MODULES and module_import_spec(module) is not None:
            continue  # its module is the user's: the repro imports it
        missing.append(f"{where} = {module}.{name}")
    return missing


def _scan(found: dict[str, str], user_function: Callable[[Any], str | None]) -> None:
    for name, module in list(sys.modules.items()):
        if not name.startswith("torch.") or not isinstance(module, types.ModuleType):
            continue
        for attr, value in list(module.__dict__.items()):
            if (fn := user_function(value)) is not None:
                found[f"{name}.{attr}"] = fn
            elif isinstance(value, type) and value.__dict__.get("__module__") == name:
                for member, inner in list(value.__dict__.items()):
                    if (fn := user_function(inner)) is not None:
                        found[f"{name}.{attr}.{member}"] = fn


def patch_definitions() -> tuple[dict[str, str], str]:
    """The script's patches of torch (:func:`script_patches`) and the source that makes them."""
    from .extract import slice_script

    patches = script_patches()
    if not patches:
        return {}, ""
    source = script_source()
    return patches, slice_script(source, sorted(set(patches.values()))) if source else ""


@dataclass(frozen=True)
class ProgramState:
    """The program's changes to torch at one compile: what a repro of that compile carries, imports, or lacks."""

    patches: dict[str, str] = field(default_factory=dict)  # torch target -> the script's function (script_patches)
    carried: str = ""  # the script's source that makes them
    modules: list[tuple[str, str]] = field(default_factory=list)  # user modules a repro imports (state_modules)
    missing: list[str] = field(default_factory=list)  # what no repro can carry (state_missing)

    def applied_to(self, case: GraphCase) -> GraphCase:
        """``case`` with the patches' source among its definitions and the modules among its imports.

        Such a case also turns torch's compile caches off: their keys hash the graph and
        the config, not a patched lowering or code generator, so a kernel cached by a
        run without the patch (the user's earlier runs, any other program) is served
        in its place and the failure vanishes.
        """
        from .extract import merge_definitions

        if self.carried:
            case = case.replace(definitions=merge_definitions(case.definitions, self.carried))
        if self.modules:
            case = case.replace(modules=list(dict.fromkeys([*case.modules, *self.modules])))
        if self.carried or self.modules:
            inductor = {**case.config.get(INDUCTOR_CONFIG, {}), "force_disable_caches": True}
            case = case.replace(config={**case.config, INDUCTOR_CONFIG: inductor})
        return case


#: Where the switch that turns torch's compile caches off lives (an alias of ``torch.compiler.config``'s).
INDUCTOR_CONFIG = "torch._inductor.config"


def program_state() -> ProgramState:
    """The program's changes to torch right now (read at each compile: a script may patch torch between two)."""
    patches, carried = patch_definitions()
    return ProgramState(patches, carried, state_modules(), state_missing())
