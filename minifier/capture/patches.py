"""The program's changes to torch itself: patched functions and entries in the compilers' tables.

A program can break torch on purpose (a test planting a bug in Inductor's codegen) or
by accident, or extend it (a serving stack registering its own lowering). Such a
change lives in the script, not in any graph, so a repro must carry it, or the failure
cannot reproduce on its own:

- :func:`script_patches` finds the script's functions installed in torch: module
  attributes, class attributes (``CppOverrides.relu = staticmethod(...)``), and
  entries of Inductor's lowering and decomposition tables
  (:mod:`pt2kit.seams.compiler_state`); :func:`patch_definitions` slices the script
  for the source that makes them (:func:`minifier.capture.extract.slice_script` keeps the
  assignments that install them);
- :func:`state_modules` names the user modules whose functions sit in those tables
  (a repro imports them);
- :func:`state_missing` names what no repro can carry (a lambda or a nested function,
  in a table or as an attribute; a function of a module no repro can import): exit 5
  and ``report.json``'s ``state_missing`` say it.

:func:`program_state` also carries the custom ops that code with no graph yet names (a
frame ``replay`` records): a graph's own are found by :mod:`minifier.capture.casemaker`.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pt2kit.script import MAIN_MODULES, module_import_spec

from .context import TORCH_OP_NAMESPACES, op_sources, script_source
from pt2kit.seams import compiler_state

if TYPE_CHECKING:
    from ..unit.case import GraphCase


def script_patches(attributes: list[tuple[str, types.FunctionType]] | None = None) -> dict[str, str]:
    """Functions of the user's script installed into torch's modules: ``{torch target: function name}``.

    A program can break torch on purpose (a test planting a bug in Inductor's
    codegen) or by accident. Such a patch lives in the script, not in any graph, so a
    repro must carry it (:func:`minifier.capture.extract.slice_script` keeps the assignment)
    or the failure cannot reproduce on its own. Only named top-level functions can be
    sliced out of the script; the rest are :func:`state_missing`.
    """
    attributes = attribute_patches() if attributes is None else attributes
    found = {where: fn.__name__ for where, fn in attributes if _carried_as_source(fn)}
    for where, fn in compiler_state.user_entries():  # a lowering or decomposition the script put in a table
        if _carried_as_source(fn):
            found[where] = fn.__name__
    return found


def attribute_patches() -> list[tuple[str, types.FunctionType]]:
    """User functions that are attributes of torch's modules or of their classes: ``(torch target, function)``.

    A user function is the script's or one of the user's own modules' (never a library's:
    torch's modules hold functions they import from elsewhere, ``typing.cast``, by design).
    """
    found: list[tuple[str, types.FunctionType]] = []
    users: dict[str, bool] = {}  # module name -> is it the user's (asked once a scan)

    def user_function(value: Any) -> types.FunctionType | None:
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if not isinstance(value, types.FunctionType):
            return None
        module = str(value.__module__)
        if module.startswith(("torch", "functorch")):
            return None
        if module not in users:
            users[module] = module in MAIN_MODULES or module_import_spec(module) is not None
        return value if users[module] else None

    import warnings

    with warnings.catch_warnings():  # (a deprecated alias warns when merely looked at)
        warnings.simplefilter("ignore")
        # Only raw dict entries and type checks: touching arbitrary attributes of torch's
        # modules runs lazy initializers (CUDA, deprecated aliases) in the user's program.
        for name, module in list(sys.modules.items()):
            if not name.startswith("torch.") or not isinstance(module, types.ModuleType):
                continue
            for attr, value in list(module.__dict__.items()):
                if (fn := user_function(value)) is not None:
                    found.append((f"{name}.{attr}", fn))
                elif isinstance(value, type) and value.__dict__.get("__module__") == name:
                    for member, inner in list(value.__dict__.items()):
                        if (fn := user_function(inner)) is not None:
                            found.append((f"{name}.{attr}.{member}", fn))
    return found


def _carried_as_source(fn: Any) -> bool:
    """A named function at the top of the script: a repro carries its source and the assignment that installs it."""
    return str(getattr(fn, "__module__", "")) in MAIN_MODULES and "<" not in getattr(fn, "__qualname__", "<")


def state_modules(attributes: list[tuple[str, types.FunctionType]] | None = None) -> list[tuple[str, str]]:
    """The user modules whose functions sit in torch (tables, attributes): a repro imports them (they install them)."""
    attributes = attribute_patches() if attributes is None else attributes
    functions = [fn for _, fn in compiler_state.user_entries()] + [fn for _, fn in attributes]
    modules = [module_import_spec(str(getattr(fn, "__module__", ""))) for fn in functions]
    return list(dict.fromkeys(spec for spec in modules if spec is not None))


def state_missing(attributes: list[tuple[str, types.FunctionType]] | None = None) -> list[str]:
    """Changes to torch that no repro can carry: in its compiler tables (:mod:`pt2kit.seams.compiler_state`), or as attributes.

    A function that is a lambda or nested in another (no name in the script to slice
    out), or that lives in a module a repro cannot import (neither the script, carried
    as source, nor a user module), is named instead: the failure may need it.
    """
    attributes = attribute_patches() if attributes is None else attributes
    missing = []
    for where, fn in [*compiler_state.user_entries(), *attributes]:
        module = str(getattr(fn, "__module__", ""))
        name = getattr(fn, "__qualname__", type(fn).__name__)
        if _carried_as_source(fn):
            continue  # carried as source (script_patches)
        if module not in MAIN_MODULES and module_import_spec(module) is not None:
            continue  # its module is the user's: the repro imports it
        missing.append(f"{where} = {module}.{name}")
    return missing


def patch_definitions(attributes: list[tuple[str, types.FunctionType]] | None = None) -> tuple[dict[str, str], str]:
    """The script's patches of torch (:func:`script_patches`) and the source that makes them."""
    from .extract import slice_script

    patches = script_patches(attributes)
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


def program_state(ops: Iterable[str] = (), sources: Iterable[str] = ()) -> ProgramState:
    """The program's changes to torch right now (read at each compile: a script may patch torch between two).

    Code with no graph yet (a frame ``replay`` records) names the custom ops it needs as
    ``ops`` (``namespace::name``, torch's own left out) or calls them as ``torch.ops.ns.op``
    in ``sources``: their definitions join what is carried, their user modules what is imported.
    """
    import torch

    from .extract import merge_definitions, ops_named_in

    attributes = attribute_patches()  # (one scan of torch's modules, read by all three)
    patches, carried = patch_definitions(attributes)

    def registered(name: str) -> bool:  # (a name no op answers to is left out)
        namespace, op = name.split("::")
        return hasattr(getattr(torch.ops, namespace), op)

    called = {name for text in sources for name in ops_named_in(text) if registered(name)}
    custom = sorted(name for name in {*ops, *called} if name.split("::")[0] not in TORCH_OP_NAMESPACES)
    op_modules, op_definitions = op_sources(custom) if custom else ([], "")
    modules = list(dict.fromkeys([*op_modules, *state_modules(attributes)]))
    return ProgramState(patches, merge_definitions(op_definitions, carried), modules, state_missing(attributes))
