"""What a graph needs around it to fail again elsewhere: config, backend, user modules, carried source.

A graph alone rarely fails. :func:`non_default_config` keeps the compiler config the
user changed (literals as they are, functions by reference or as carried source);
:func:`describe_backend` names the backend so
that another process can get it back: a registered name, an importable
``module:function``, or source carried into the repro (:mod:`minifier.capture.extract`) for a
backend defined in the script, a lambda, a partial or a closure;
:func:`custom_op_sources` finds where the graph's custom ops are defined;
:func:`script_patches` finds the patches the script made to torch. Nothing here ever
imports the user's script: importing it would run the whole program again.
"""

from __future__ import annotations

import ast
import importlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from . import hooks
from ..unit.case import CONFIG_CARRIED, CONFIG_IMPORT, CONFIG_MISSING
from pt2kit.script import MAIN_MODULES, is_carried_module, main_module_file, module_import_spec
from pt2kit.seams import aot_autograd, backend_registry, device_guard, ops
from pt2kit.seams import config as config_seam

#: Config pt2kit itself changes, or that only steers torch's own debug tooling.
IGNORED_CONFIG = {"compile_threads", "repro_after", "repro_level", "debug_dir_root"}
#: Namespaces of ops that ship with torch; anything else is a custom op from user code.
TORCH_OP_NAMESPACES = {
    "aten",
    "prims",
    "quantized",
    "higher_order",
    "_c10d_functional",
    "c10d_functional",
    "_dtensor",
    "inductor",
    "debugprims",
    "rngprims",
    "profiler",
    "_quantized",
    "quantized_decomposed",
    "mkldnn",
    "onednn",
    "_inductor_test",
}


# --------------------------------------------------------------------------- #
# What a graph needs around it: config, backend, user modules
# --------------------------------------------------------------------------- #


def _is_literal(value: Any) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _changed_config() -> dict[str, dict[str, Any]]:
    return {name: config_seam.changed_values(name) for name in config_seam.MODULES}


_DYNAMO_OWN_PATCHES: dict[str, dict[str, Any]] = {}
_LEARNED = threading.Event()


def learn_dynamo_own_patches() -> None:
    """Learn the config dynamo itself patches while it compiles, by compiling a no-op.

    A backend runs inside those patches, so they look like user changes from in there.
    torch 2.13 keeps config in context variables and a new thread starts from the
    defaults, so compiling the no-op on a fresh thread sees dynamo's patches and none
    of the user's settings. Runs once per process. Call it where torch.compile resolves
    a backend, never from inside a compile or an import: the thread would wait forever
    for dynamo's compile lock or the import lock.
    """
    with _LEARNING:
        if _LEARNED.is_set() or _LEARNING_NOW:
            return
        _LEARNING_NOW.append(True)  # a compile in the learning thread must not learn again
    try:
        _learn()
    finally:
        _LEARNING_NOW.clear()


_LEARNING = threading.Lock()
_LEARNING_NOW: list[bool] = []


def _learn() -> None:
    seen: list[dict[str, dict[str, Any]]] = []

    @hooks.internal
    def snapshot_backend(gm: fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        seen.append(_changed_config())
        return gm.forward

    def compile_noop() -> None:
        torch.compile(lambda x: x + 1, backend=snapshot_backend)(torch.zeros(1))

    device_guard.set_here()  # (before the thread's compile sets it: torch 2.11 then segfaults on this thread's)
    thread = threading.Thread(target=compile_noop, name="pt2kit-config-baseline", daemon=True)
    thread.start()
    thread.join(timeout=60)  # (a guard: called from the wrong place, it would wait for dynamo's lock forever)
    if thread.is_alive():
        return
    _DYNAMO_OWN_PATCHES.clear()
    for name, values in (seen[0] if seen else {}).items():
        # A default torch read from the environment shows in every thread; dynamo did not patch it.
        environment = {*config_seam.ENVIRONMENT_DEFAULTS.get(name, ()), *config_seam.from_environment(name)}
        _DYNAMO_OWN_PATCHES[name] = {k: v for k, v in values.items() if k not in environment}
    _LEARNED.set()


@dataclass
class CompilerConfig:
    """The non-default compiler config a graph needs, and what the repro needs to set it."""

    values: dict[str, dict[str, Any]]  # module -> {key: literal or a CONFIG_* marker}
    modules: list[tuple[str, str]] = field(default_factory=list)  # user modules the references import
    definitions: str = ""  # source binding the carried values


def non_default_config(
    extra: dict[str, dict[str, Any]] | None = None, *, in_backend: bool = False, custom_ops: bool = True
) -> CompilerConfig:
    """Config values the user changed, per module, in a form a repro can write back.

    Keys torch marks ``compile_ignored`` do not change what gets compiled and are
    left out. A literal is kept as it is. Anything else (a pass function, a callable)
    is kept *by reference* when it can be imported (``module:qualname``), carried as
    source when it lives in the script (:func:`minifier.capture.extract.value_definition`), and
    otherwise marked :data:`CONFIG_MISSING` with the reason, so the report names it and
    the repro says what the user must supply (torch 2.13 writes such values into its
    repros as ``repr`` text, a SyntaxError: pytorch#128830). ``in_backend``: we are
    inside a backend call, so dynamo's own patches are discounted. ``custom_ops=False``:
    the graph calls none, so keys that only act on custom ops are left out.
    """
    own = _DYNAMO_OWN_PATCHES if in_backend else {}
    config = CompilerConfig({})
    for name, values in _changed_config().items():
        values.update((extra or {}).get(name, {}))
        kept = {}
        for key, value in values.items():
            if key in IGNORED_CONFIG or (key in own.get(name, {}) and own[name][key] == value):
                continue
            if not custom_ops and key in config_seam.CUSTOM_OP_KEYS.get(name, ()):
                continue
            kept[key] = value if _is_literal(value) else _config_reference(config, key, value)
        if kept:
            config.values[name] = kept
    return config


def _config_reference(config: CompilerConfig, key: str, value: Any) -> dict[str, str]:
    """The marker for a non-literal config value (see :data:`CONFIG_IMPORT`), noting what it needs in ``config``."""
    from .extract import Unrecoverable, merge_definitions, value_definition

    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if (
        module
        and qualname
        and module not in MAIN_MODULES
        and "<" not in qualname
        and _resolves(module, qualname, value)
    ):
        if spec := module_import_spec(module):
            config.modules.append(spec)
        return {CONFIG_IMPORT: f"{module}:{qualname}"}
    name = "pt2kit_config_" + "".join(c if c.isalnum() else "_" for c in key)
    try:
        config.definitions = merge_definitions(config.definitions, value_definition(value, name, script_source()))
    except Unrecoverable as e:
        return {CONFIG_MISSING: f"a {type(value).__name__} pt2kit cannot write into a repro: {e}"}
    return {CONFIG_CARRIED: name}


def _resolves(module: str, qualname: str, value: Any) -> bool:
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - not importable by that name
        return False
    return found is value


def missing_config(config: dict[str, dict[str, Any]]) -> list[str]:
    """``module.key: why`` for each config value the repro cannot set by itself."""
    return [
        f"{module}.{key}: {value[CONFIG_MISSING]}"
        for module, values in sorted(config.items())
        for key, value in sorted(values.items())
        if isinstance(value, dict) and CONFIG_MISSING in value
    ]


@dataclass
class BackendInfo:
    """How to name a backend in a repro and what must be imported or carried for the name to resolve."""

    name: str  # a registered name ("inductor", "bw_tanh_bug"), "module:function", or a display name
    modules: list[tuple[str, str]]
    config: dict[str, dict[str, Any]] = field(default_factory=dict)  # from torch.compile(mode=, options=)
    dynamic: bool | None = None
    definitions: str = ""  # source the repro carries (see minifier.capture.extract); may bind BACKEND_NAME
    unrecoverable: str | None = None  # why the backend cannot be written into a repro, if it cannot




def script_source() -> str | None:
    """The text of the user's script (the program's ``__main__``), if it can be read."""
    path = main_module_file()
    try:
        return Path(path).read_text() if path else None
    except OSError:
        return None


def is_user_module(module_name: str) -> bool:
    """A module of the user's (not torch, the standard library, site-packages or pt2kit itself)."""
    if module_name in MAIN_MODULES or module_name.split(".")[0] in (
        "torch",
        "functorch",
        "minifier",
        "replay",
        "validation",
        "explain",
        "opcheck",
    ):
        return False
    return module_import_spec(module_name) is not None


def _defining_modules(obj: Any) -> list[str]:
    """Names of the modules whose code makes up a backend object."""
    found: list[str] = []
    todo = [obj]
    seen: set[int] = set()
    while todo:
        item = todo.pop()
        if id(item) in seen or item is None:
            continue
        seen.add(id(item))
        for inner in ("func", "compiler_fn"):  # functools.partial, torch.compile's backend wrapper
            if hasattr(item, inner):
                todo.append(getattr(item, inner))
        if hasattr(item, "kwargs") and isinstance(item.kwargs, dict):  # AotAutograd
            todo.extend(v for v in item.kwargs.values() if callable(v))
        module = getattr(item, "__module__", None)
        if isinstance(module, str) and not module.startswith(("torch", "functools", "functorch")):
            found.append(module)
    return found


def describe_backend(fn: Callable[..., Any], name: str | None) -> BackendInfo:
    """Name a resolved backend so that a repro in another process can get it back.

    A registered name or an importable ``module:function`` is used as is (with the
    user modules that define it imported). A backend defined in the script, a lambda,
    a partial or a closure is carried as source (:func:`minifier.capture.extract.backend_definition`);
    when even that fails, ``unrecoverable`` says why. Never raises.
    """
    from .extract import Unrecoverable, backend_definition, slice_script

    defining = _defining_modules(fn)
    modules = list(dict.fromkeys(spec for m in defining if (spec := module_import_spec(m))))
    in_script = any(m in MAIN_MODULES for m in defining)
    inductor = backend_registry.inductor_wrapper(fn)
    if inductor is not None:
        return BackendInfo("inductor", [], {"torch._inductor.config": inductor[0]}, inductor[1])
    fn = backend_registry.unwrap(fn)  # torch.compile(backend=<anything but inductor>)
    compiler_fns = backend_registry.registered()
    registered = next((r for r, candidate in compiler_fns.items() if candidate is fn), None)
    if registered is None and isinstance(name, str) and ":" not in name and name in compiler_fns:
        registered = name
    if registered is not None:
        definitions = ""
        if in_script:  # registered by the script itself: carry the registration
            source = script_source()
            definitions = slice_script(source, [getattr(fn, "__name__", "")], [registered]) if source else ""
            if not definitions:
                return BackendInfo(
                    registered,
                    modules,
                    unrecoverable=f"backend {registered!r} is registered by the script, whose source cannot be read",
                )
        return BackendInfo(registered, modules, definitions=definitions)
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module and qualname and "<" not in qualname and module not in MAIN_MODULES:
        spec = module_import_spec(module)
        return BackendInfo(f"{spec[0] if spec else module}:{qualname}", modules)
    display = backend_display_name(fn)
    try:
        definitions = backend_definition(fn, script_source())
    except Unrecoverable as e:
        return BackendInfo(display, modules, unrecoverable=f"the backend {display} cannot be written into a repro: {e}")
    return BackendInfo(display, modules, definitions=definitions)


def backend_display_name(fn: Any) -> str:
    """How tables and repro headers name a backend that has no registered or importable name.

    A function by its name; an ``aot_autograd(...)`` object as the call that made it,
    with its compilers' names (its class name, ``AotAutograd``, is not what the user wrote).
    """
    compilers = aot_autograd.compiler_kwargs(fn)
    if compilers is not None:  # (read before or after a compile: AOTAutograd fills in and wraps some of them)
        forward = compilers.get("fw_compiler")
        named = [
            f"{key}={getattr(getattr(value, 'func', value), '__name__', type(value).__name__)}"
            for key in ("fw_compiler", "bw_compiler")
            if (value := aot_autograd.user_compiler(compilers.get(key))) is not None and (key == "fw_compiler" or value is not forward)
        ]
        return f"aot_autograd({', '.join(named)})"
    return (
        getattr(fn, "__qualname__", None)
        or getattr(getattr(fn, "func", None), "__qualname__", None)
        or type(fn).__name__
    )


def custom_op_names(gm: fx.GraphModule) -> list[str]:
    """The ``namespace::name`` of every custom op (not one of torch's) that ``gm`` or its subgraphs call."""
    names = []
    for node in _all_nodes(gm):
        target = node.target
        if node.op != "call_function" or not (ops.is_overload(target) or ops.is_packet(target)):
            continue
        qualname = ops.schema_name(target)
        if qualname.split("::")[0] not in TORCH_OP_NAMESPACES:
            names.append(qualname)
    return names


def custom_op_sources(gm: fx.GraphModule) -> tuple[list[tuple[str, str]], str]:
    """Where the custom ops a graph calls are defined (:func:`op_sources`)."""
    return op_sources(custom_op_names(gm))


def op_sources(qualnames: list[str]) -> tuple[list[tuple[str, str]], str]:
    """Where custom ops (``namespace::name``) are defined: user modules to import, and script source to carry.

    ``torch.library.custom_op`` remembers the function it decorated. For ops registered
    some other way (``Library.define``), the user modules whose source mentions the
    op's namespace are the candidates. An op defined in the user's script is carried
    as a slice of the script (:func:`minifier.capture.extract.slice_script`), never imported.
    """
    from .extract import slice_script

    unknown: set[str] = set()
    in_script: set[str] = set()
    modules: list[tuple[str, str]] = []
    for qualname in qualnames:
        namespace = qualname.split("::")[0]
        fn = ops.custom_op_function(qualname)
        if fn is not None and fn.__module__ in MAIN_MODULES:
            in_script.add(namespace)
        elif fn is not None and (spec := module_import_spec(fn.__module__)):
            modules.append(spec)
        else:
            unknown.add(namespace)
    source = script_source() if (in_script or unknown) else None
    definitions = slice_script(source, (), in_script | unknown) if source else ""
    for namespace in unknown:
        if definitions and f'"{namespace}' in definitions or f"'{namespace}" in definitions:
            continue  # the script defines it
        for name in list(sys.modules):
            # (a user module is one with an import spec)
            if is_user_module(name) and _mentions(sys.modules[name], namespace) and (spec := module_import_spec(name)):
                modules.append(spec)
    return list(dict.fromkeys(modules)), definitions


def class_reference(cls: type) -> str:
    """How a repro names a user's class: by its name when the script defines it (carried), else ``module.qualname``."""
    module = cls.__module__
    return cls.__qualname__ if module in MAIN_MODULES or is_carried_module(module) else f"{module}.{cls.__qualname__}"


def class_sources(classes: list[type | None]) -> tuple[list[tuple[str, str]], str]:
    """Where the classes of a graph's subclass inputs come from: user modules to import, and script source to carry."""
    from .extract import slice_script

    modules: list[tuple[str, str]] = []
    in_script = []
    for cls in dict.fromkeys(c for c in classes if c is not None):
        if cls.__module__ in MAIN_MODULES:
            in_script.append(cls.__qualname__.split(".")[0])
        elif spec := module_import_spec(cls.__module__):
            modules.append(spec)
    source = script_source() if in_script else None
    return modules, slice_script(source, in_script) if source else ""


def _all_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    """The nodes of a graph and of its subgraphs (higher-order ops' bodies)."""
    nodes = list(gm.graph.nodes)
    for child in gm.children():
        if isinstance(child, fx.GraphModule):
            nodes += _all_nodes(child)
    return nodes


def _mentions(module: Any, namespace: str) -> bool:
    try:
        text = Path(module.__file__).read_text()
    except (OSError, TypeError, AttributeError):
        return False
    return f'"{namespace}' in text or f"'{namespace}" in text


# --------------------------------------------------------------------------- #


def importable_name(fn: Callable[..., Any]) -> str | None:
    """``module:qualname`` of a module-level function a repro can import, or its bare name
    when the script defines it (the repro carries the script's definitions)."""
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not qualname or "<" in qualname or module.startswith("torch"):
        return None
    if module in MAIN_MODULES:
        return qualname
    spec = module_import_spec(module)
    return f"{spec[0] if spec else module}:{qualname}"
