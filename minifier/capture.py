"""Capture: run a user's program with pt2kit armed and keep every graph it compiles.

The first step of following a bug. :func:`capture_script` runs the user's script
(inside a worker, see :mod:`minifier.worker`) with a :class:`Recorder` sitting in
torch's dynamo backend hook (:func:`minifier.hooks.dynamo_backends`). For each graph
dynamo hands to a backend, the recorder

1. turns it into a :class:`~minifier.case.GraphCase` with the *real* example inputs
   dynamo passes to backends (values, shapes, strides, dtypes, ``requires_grad``),
   the non-default compiler config (:func:`non_default_config`), the backend's name
   and the user modules that define the backend or the graph's custom ops;
2. saves it at once as an unminified ``repro.py`` (so a later segfault loses
   nothing) and logs an event line;
3. calls the backend the user asked for (or ``--backend``), so the program behaves
   as it would without pt2kit, until it fails.

The AOTAutograd graphs are not captured here: :mod:`minifier.stages` derives them,
with real inputs, by lowering a dynamo graph in a worker. That also works when the
inner compile fails, when torch's own minifier has only fake inputs.

A watchdog thread turns a compiled call (or compile) that runs past the query
timeout into a ``timeout`` event, so a hang inside compiled code does not hang us.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import os
import re
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from . import hooks
from .seams import backend_registry, dynamo_exc, ops, symbolic_shapes
from .seams import config as config_seam
from .case import GraphCase, GraphInput, TensorMeta
from .errors import UnknownBackend
from .extract import merge_definitions, slice_script
from .script import is_internal_file, is_launcher_file, main_module_file, run_script
from .signature import (
    COMPILE_PHASE_ATTR,
    Failure,
    Signature,
    exception_chain,
    signature_of_exception,
    signature_of_timeout,
    tagging_compile_errors,
)
from .writer import load_repro, write_repro

#: Config pt2kit itself changes, or that only steers torch's own debug tooling.
IGNORED_CONFIG = {"compile_threads", "repro_after", "repro_level", "debug_dir_root"}
#: Namespaces of ops that ship with torch; anything else is a custom op from user code.
TORCH_OP_NAMESPACES = {"aten", "prims", "quantized", "higher_order", "_c10d_functional", "c10d_functional", "_dtensor", "inductor", "debugprims", "rngprims", "profiler", "_quantized", "quantized_decomposed", "mkldnn", "onednn", "_inductor_test"}


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

    thread = threading.Thread(target=compile_noop, name="pt2kit-config-baseline", daemon=True)
    thread.start()
    thread.join(timeout=60)  # (a guard: called from the wrong place, it would wait for dynamo's lock forever)
    if thread.is_alive():
        return
    _DYNAMO_OWN_PATCHES.clear()
    _DYNAMO_OWN_PATCHES.update(seen[0] if seen else {})
    _LEARNED.set()


def non_default_config(extra: dict[str, dict[str, Any]] | None = None, *, in_backend: bool = False) -> dict[str, dict[str, Any]]:
    """Config values the user changed, per module, that can be written back as literals.

    Keys torch marks ``compile_ignored`` do not change what gets compiled and are
    left out, as are values whose ``repr`` does not read back (torch 2.13 writes those
    into repros as-is and produces a SyntaxError, pytorch#128830). ``in_backend``:
    we are inside a backend call, so dynamo's own patches are discounted.
    """
    own = _DYNAMO_OWN_PATCHES if in_backend else {}
    config: dict[str, dict[str, Any]] = {}
    for name, values in _changed_config().items():
        values.update((extra or {}).get(name, {}))
        kept = {
            k: v
            for k, v in values.items()
            if k not in IGNORED_CONFIG and _is_literal(v) and not (k in own.get(name, {}) and own[name][k] == v)
        }
        if kept:
            config[name] = kept
    return config


@dataclass
class BackendInfo:
    """How to name a backend in a repro and what must be imported or carried for the name to resolve."""

    name: str  # a registered name ("inductor", "bw_tanh_bug"), "module:function", or a display name
    modules: list[tuple[str, str]]
    config: dict[str, dict[str, Any]] = field(default_factory=dict)  # from torch.compile(mode=, options=)
    dynamic: bool | None = None
    definitions: str = ""  # source the repro carries (see minifier.extract); may bind BACKEND_NAME
    unrecoverable: str | None = None  # why the backend cannot be written into a repro, if it cannot


MAIN_MODULES = ("__main__", "__mp_main__")


def script_source() -> str | None:
    """The text of the user's script (the program's ``__main__``), if it can be read."""
    path = main_module_file()
    try:
        return Path(path).read_text() if path else None
    except OSError:
        return None


def is_user_module(module_name: str) -> bool:
    """A module of the user's (not torch, the standard library, site-packages or pt2kit itself)."""
    if module_name in MAIN_MODULES or module_name.split(".")[0] in ("torch", "functorch", "minifier", "replay", "validation", "explain", "opcheck"):
        return False
    return module_import_spec(module_name) is not None


def module_import_spec(module_name: str) -> tuple[str, str] | None:
    """``(import name, sys.path root)`` for a user module, or None for torch/stdlib/site-packages.

    The user's script itself (``__main__``) is never a module to import: a repro that
    imported it would run the whole program again (see :mod:`minifier.extract`).
    """
    if module_name in MAIN_MODULES:
        return None
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path is None:
        return None
    path = os.path.abspath(path)
    if any(part in path for part in ("site-packages", "dist-packages")) or path.startswith(sys.base_prefix) or is_launcher_file(path):
        return None
    root = Path(path).parent
    for _ in range(module_name.count(".") + (1 if path.endswith("__init__.py") else 0)):
        root = root.parent
    return module_name, str(root)


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
    a partial or a closure is carried as source (:func:`minifier.extract.backend_definition`);
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
                return BackendInfo(registered, modules, unrecoverable=f"backend {registered!r} is registered by the script, whose source cannot be read")
        return BackendInfo(registered, modules, definitions=definitions)
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module and qualname and "<" not in qualname and module not in MAIN_MODULES:
        spec = module_import_spec(module)
        return BackendInfo(f"{spec[0] if spec else module}:{qualname}", modules)
    display = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None) or type(fn).__name__
    try:
        definitions = backend_definition(fn, script_source())
    except Unrecoverable as e:
        return BackendInfo(display, modules, unrecoverable=f"the backend {display} cannot be written into a repro: {e}")
    return BackendInfo(display, modules, definitions=definitions)


def resolve_backend(name: str) -> Callable[..., Any]:
    """Look up a backend by registered name or ``module:function``; :class:`UnknownBackend` if neither."""
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise UnknownBackend(f"unknown backend {name!r}: {e}") from None
    try:
        return backend_registry.lookup(name)
    except Exception:  # noqa: BLE001 - torch raises InvalidBackend (a dynamo exception)
        raise UnknownBackend(
            f"unknown backend {name!r}; registered backends: {', '.join(backend_registry.names())}"
        ) from None


def custom_op_sources(gm: fx.GraphModule) -> tuple[list[tuple[str, str]], str]:
    """Where the custom ops a graph calls are defined: user modules to import, and script source to carry.

    ``torch.library.custom_op`` remembers the function it decorated. For ops registered
    some other way (``Library.define``), the user modules whose source mentions the
    op's namespace are the candidates. An op defined in the user's script is carried
    as a slice of the script (:func:`minifier.extract.slice_script`), never imported.
    """
    from .extract import slice_script

    unknown: set[str] = set()
    in_script: set[str] = set()
    modules: list[tuple[str, str]] = []
    for node in _all_nodes(gm):
        target = node.target
        if node.op != "call_function" or not (ops.is_overload(target) or ops.is_packet(target)):
            continue
        qualname = ops.schema_name(target)
        namespace = qualname.split("::")[0]
        if namespace in TORCH_OP_NAMESPACES:
            continue
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
            if is_user_module(name) and _mentions(sys.modules[name], namespace):
                modules.append(module_import_spec(name))  # type: ignore[arg-type]
    return list(dict.fromkeys(modules)), definitions


def script_patches() -> dict[str, str]:
    """Functions of the user's script installed into torch's modules: ``{torch target: function name}``.

    A program can break torch on purpose (a test planting a bug in Inductor's
    codegen) or by accident. Such a patch lives in the script, not in any graph, so a
    repro must carry it (:func:`minifier.extract.slice_script` keeps the assignment)
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
    return found


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
# Graph → case
# --------------------------------------------------------------------------- #


def _flat_constants(gm: fx.GraphModule) -> dict[str, torch.Tensor]:
    """Give every tensor ``get_attr`` a flat name, so the repro can register it as a buffer."""
    constants: dict[str, torch.Tensor] = {}
    for node in gm.graph.find_nodes(op="get_attr"):
        value = gm
        for part in str(node.target).split("."):
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor):
            continue  # submodules of higher-order ops stay as they are
        name = str(node.target).replace(".", "_")
        if name != node.target:
            gm.register_buffer(name, value)
            node.target = name
        constants[name] = value.detach()
    gm.recompile()
    return constants


def _example(node: fx.Node) -> Any:
    """A placeholder's traced value: ``example_value`` (dynamo graphs) or ``val`` (aot graphs)."""
    return node.meta.get("example_value", node.meta.get("val"))


_is_symbolic = symbolic_shapes.is_symbolic


def symbolic_dims(node: fx.Node) -> tuple[int, ...]:
    """Dims of a placeholder's traced value that are symbolic (dynamic shapes)."""
    value = _example(node)
    if not isinstance(value, torch.Tensor):
        return ()
    return tuple(d for d, size in enumerate(value.shape) if _is_symbolic(size))


def derived_sizes(placeholders: list[fx.Node]) -> dict[str, tuple[str, int]]:
    """Symbolic-int placeholders that are a tensor placeholder's size: name -> (tensor's name, dim).

    dynamo (and AOTAutograd) pass the free symbols of a dynamic graph as inputs of their
    own (``s0``); a repro reads them off the tensors instead, so that torch.compile
    sees them as the same symbol, as the program did.
    """
    sizes: dict[Any, tuple[str, int]] = {}
    for node in placeholders:
        value = _example(node)
        if isinstance(value, torch.Tensor):
            for d, size in enumerate(value.shape):
                if _is_symbolic(size):
                    sizes.setdefault(symbolic_shapes.expression(size), (str(node.target), d))
    derived = {}
    for node in placeholders:
        value = _example(node)
        if _is_symbolic(value) and symbolic_shapes.expression(value) in sizes:
            derived[str(node.target)] = sizes[symbolic_shapes.expression(value)]
    return derived


def make_case(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    backend: BackendInfo,
    index: int,
    frame: dict[str, Any] | None = None,
    in_backend: bool = True,
) -> GraphCase:
    """A :class:`GraphCase` of a dynamo graph and the real values dynamo passed with it."""
    gm = fx.GraphModule(gm, copy.deepcopy(gm.graph))  # the backend still gets the original
    constants = _flat_constants(gm)
    placeholders = gm.graph.find_nodes(op="placeholder")
    inputs = graph_inputs(placeholders, example_inputs)
    dynamic = any(i.symbolic_dims or i.derived_from or _is_symbolic(_example(n)) for i, n in zip(inputs, placeholders))
    op_modules, op_definitions = custom_op_sources(gm)
    return GraphCase(
        gm=gm,
        inputs=inputs,
        boundary="dynamo",
        kind="dynamo",
        backend=backend.name,
        config=non_default_config(backend.config, in_backend=in_backend),
        modules=list(dict.fromkeys(backend.modules + op_modules)),
        definitions=merge_definitions(op_definitions, backend.definitions),
        constants=constants,
        backward=any(i.meta is not None and i.meta.requires_grad for i in inputs),
        dynamic=bool(dynamic or backend.dynamic),
        index=index,
        frame=frame,
    )


def graph_inputs(placeholders: list[fx.Node], values: Sequence[Any]) -> list[GraphInput]:
    """One :class:`GraphInput` per placeholder: the real value, its metadata and its dynamic dims."""
    derived = derived_sizes(placeholders)
    inputs = []
    for node, value in zip(placeholders, values):
        name = str(node.target)
        if isinstance(value, torch.Tensor):
            inputs.append(GraphInput(name, value.detach().requires_grad_(value.requires_grad), TensorMeta.of(value), None, symbolic_dims(node)))
        else:
            symbolic = _is_symbolic(_example(node))
            # (never int(value): that would add a guard and specialize the program's graph)
            plain = symbolic_shapes.hint(value) if isinstance(value, torch.SymInt) else value
            inputs.append(GraphInput(name, plain, None, derived_from=derived.get(name), symbolic_int=symbolic and name not in derived))
    return inputs


_STACK_LINE = re.compile(r'File "(?P<filename>[^"]+)", line (?P<lineno>\d+), in (?P<name>\S+)')


def current_frame(gm: fx.GraphModule | None = None) -> dict[str, Any] | None:
    """The user function dynamo is compiling right now, if any.

    When dynamo's root frame is torch's own (``torch.compile(nn.Sequential(...))``
    starts in a wrapper), the first user frame of the graph's stack traces stands in
    for it, else the user's line that called the compiled function.
    """
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        code = InstructionTranslator.current_tx().f_code
    except (AttributeError, ImportError):
        return None
    if not is_internal_file(code.co_filename):
        return {"name": code.co_name, "filename": code.co_filename, "lineno": code.co_firstlineno}
    for node in gm.graph.nodes if gm is not None else ():
        for match in _STACK_LINE.finditer(node.meta.get("stack_trace") or ""):
            if not is_internal_file(match["filename"]):
                return {"name": match["name"], "filename": match["filename"], "lineno": int(match["lineno"])}
    for caller in reversed(traceback.extract_stack()):
        if not is_internal_file(caller.filename):
            return {"name": caller.name, "filename": caller.filename, "lineno": caller.lineno, "line": caller.line}
    return {"name": code.co_name, "filename": code.co_filename, "lineno": code.co_firstlineno}


def frame_of_exception(exc: BaseException) -> dict[str, Any] | None:
    """The user frame a dynamo error points at (its ``real_stack``), if it has one."""
    stack = dynamo_exc.user_stack(exc)
    if stack:
        last = stack[-1]
        return {"name": last.name, "filename": last.filename, "lineno": last.lineno, "line": last.line}
    return None


# --------------------------------------------------------------------------- #
# Frames dynamo failed to trace
# --------------------------------------------------------------------------- #


@dataclass
class FailingFrame:
    """A user frame dynamo was compiling when it raised: code, globals, arguments."""

    code: types.CodeType
    globals: dict[str, Any]
    locals: dict[str, Any]
    closure: tuple[Any, ...] | None

    def function(self) -> types.FunctionType:
        return types.FunctionType(self.code, self.globals, self.code.co_name, None, self.closure)

    def arguments(self) -> tuple[list[Any], dict[str, Any]]:
        """The call's positional and keyword-only arguments, read from the frame's locals."""
        code = self.code
        names = code.co_varnames
        positional = [self.locals[n] for n in names[: code.co_argcount]]
        keyword = {n: self.locals[n] for n in names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]}
        index = code.co_argcount + code.co_kwonlyargcount
        if code.co_flags & inspect.CO_VARARGS:
            positional += list(self.locals[names[index]])
            index += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            keyword.update(self.locals[names[index]])
        return positional, keyword


def failing_frame(exc: BaseException) -> FailingFrame | None:
    """The frame whose tracing raised ``exc``, from dynamo's ``_compile`` on the traceback."""
    from torch._dynamo import convert_frame

    # inspect.unwrap: other tools (explain/, replay/) may have wrapped _compile
    compile_code = inspect.unwrap(convert_frame._compile).__code__
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if frame.f_code is compile_code:
            local = frame.f_locals
            return FailingFrame(local["code"], local["globals"], dict(local["locals"]), local["closure"])
    return None


def lift_frame(failing: FailingFrame, frame: dict[str, Any] | None) -> GraphCase:
    """Trace a frame dynamo could not trace into an aten graph, with its real arguments.

    ``make_fx`` runs the function in Python on real tensors, so what broke dynamo's
    tracing (a fake kernel, a shape check) is replayed when dynamo traces the lifted
    graph at the ``eager`` stage; if it is not, the graph does not count as a repro.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    args, kwargs = failing.arguments()
    fn = failing.function()
    flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))

    def flat_call(*values: Any) -> Any:
        call_args, call_kwargs = torch.utils._pytree.tree_unflatten(list(values), spec)
        return fn(*call_args, **call_kwargs)

    gm = make_fx(flat_call, tracing_mode="real")(*flat)
    case = make_case(gm, flat, backend=BackendInfo("eager", []), index=0, frame=frame, in_backend=False)
    return case.replace(backward=False)


# --------------------------------------------------------------------------- #
# The recorder
# --------------------------------------------------------------------------- #


class Recorder:
    """Sits in torch's backend hook during a capture run; see the module docstring."""

    def __init__(self, out_dir: Path, *, backend_override: str | None = None, timeout: float | None = None) -> None:
        self.out_dir = out_dir
        self.backend_override = backend_override
        self.timeout = timeout
        self.cases: list[GraphCase] = []
        self._events = open(out_dir / "events.jsonl", "a", buffering=1)  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._busy_since: dict[int, tuple[float, str]] = {}  # active compiled regions -> (start, what)
        self._watchdog: threading.Thread | None = None
        self._patches: dict[str, str] = {}

    # events ------------------------------------------------------------------

    def event(self, **fields: Any) -> None:
        with self._lock:
            self._events.write(json.dumps(fields, default=str) + "\n")
            self._events.flush()

    def close(self) -> None:
        self._events.close()

    # the hook ----------------------------------------------------------------

    def wrap_backend(self, fn: Callable[..., Any], name: str | None) -> Callable[..., Any]:
        """The dynamo backend pt2kit installs in place of the user's (see :func:`hooks.dynamo_backends`)."""
        recorder = self

        def pt2kit_capture(gm: fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Callable[..., Any]:
            backend_fn, backend_name = fn, name
            if recorder.backend_override:
                backend_fn, backend_name = resolve_backend(recorder.backend_override), recorder.backend_override
            info = describe_backend(backend_fn, backend_name)
            case = recorder.record(gm, example_inputs, info)
            if info.unrecoverable:
                recorder.event(event="unrecoverable", index=case.index, message=info.unrecoverable)
            with recorder.busy(f"compiling {case.label()}"):
                compiled = tagging_compile_errors(backend_fn)(gm, example_inputs, **kwargs)
            return recorder.watch(compiled, case.label())

        pt2kit_capture.__name__ = getattr(fn, "__name__", "pt2kit_capture")
        return pt2kit_capture

    def wrap_aot_compiler(self, kind: str, compiler: Callable[..., Any]) -> Callable[..., Any]:
        """Mark errors of AOTAutograd's (lazy) compiles as compile errors; watch for hangs."""
        tagged = tagging_compile_errors(compiler)
        recorder = self

        def pt2kit_aot_compiler(gm: fx.GraphModule, example_inputs: Any) -> Any:
            with recorder.busy(f"compiling a {kind} graph"):
                return recorder.watch(tagged(gm, example_inputs), f"a {kind} graph")

        return pt2kit_aot_compiler

    def record(self, gm: fx.GraphModule, example_inputs: Sequence[Any], backend: BackendInfo) -> GraphCase:
        index = len(self.cases)
        case = make_case(gm, example_inputs, backend=backend, index=index, frame=current_frame(gm))
        patches = script_patches()
        if patches:  # the program patched torch: the repro carries the patch
            source = script_source()
            carried = slice_script(source, sorted(set(patches.values()))) if source else ""
            case = case.replace(definitions=merge_definitions(case.definitions, carried))
            if patches != self._patches:
                self._patches = patches
                self.event(event="patches", patches=patches, carried=bool(carried))
        self.cases.append(case)
        path = write_repro(case, self.out_dir / f"g{index}", stage=case.backend)
        self.event(event="graph", index=index, path=str(path), frame=case.frame, nodes=case.node_count, backend=case.backend, roots=[root for _, root in case.modules])
        return case

    def record_failing_frame(self, exc: BaseException, frame: dict[str, Any] | None) -> None:
        """Dynamo failed while tracing a frame: save the frame, lifted to a graph, if it can be."""
        failing = failing_frame(exc)
        if failing is None:
            return
        try:
            case = lift_frame(failing, frame)
        except Exception as e:  # noqa: BLE001 - lifting is best effort; the failure stands without it
            self.event(event="frame", path=None, error=f"{type(e).__name__}: {e}")
            return
        path = write_repro(case, self.out_dir / "frame", stage="eager", note=f"Frame {failing.code.co_name} traced with make_fx; dynamo failed on it.")
        self.event(event="frame", path=str(path), nodes=case.node_count)

    # hang detection ----------------------------------------------------------

    def watch(self, compiled: Callable[..., Any], label: str) -> Callable[..., Any]:
        """Wrap a compiled callable so the watchdog can see time spent inside it."""
        if self.timeout is None:
            return compiled
        recorder = self

        def pt2kit_watched(*args: Any, **kwargs: Any) -> Any:
            with recorder.busy(f"running {label}"):
                return compiled(*args, **kwargs)

        for attr in ("_boxed_call", "zero_grad"):
            if hasattr(compiled, attr):
                setattr(pt2kit_watched, attr, getattr(compiled, attr))
        return pt2kit_watched

    def busy(self, what: str) -> _Busy:
        return _Busy(self, what)

    def start_watchdog(self) -> None:
        if self.timeout is None:
            return
        self._watchdog = threading.Thread(target=self._watch_loop, name="pt2kit-watchdog", daemon=True)
        self._watchdog.start()

    def _watch_loop(self) -> None:
        assert self.timeout is not None
        while True:
            time.sleep(min(1.0, self.timeout / 10))
            with self._lock:
                started = [(t, what) for t, what in self._busy_since.values()]
            if started:
                oldest, what = min(started)
                if time.monotonic() - oldest > self.timeout:
                    failure = signature_of_timeout(self.timeout)
                    self.event(event="failed", failure=failure.signature.to_json(), details=f"{what}: {failure.details}", graphs=len(self.cases))
                    os._exit(124)


class _Busy:
    def __init__(self, recorder: Recorder, what: str) -> None:
        self.recorder, self.what = recorder, what

    def __enter__(self) -> None:
        with self.recorder._lock:
            self.recorder._busy_since[id(self)] = (time.monotonic(), self.what)

    def __exit__(self, *exc: object) -> None:
        with self.recorder._lock:
            self.recorder._busy_since.pop(id(self), None)


# --------------------------------------------------------------------------- #
# Running a script under capture
# --------------------------------------------------------------------------- #


@dataclass
class CaptureResult:
    """What a capture run saw: the graphs (as saved repros) and how the program ended."""

    graph_paths: list[Path]
    failure: Failure | None  # None: the program ran to the end
    failure_frame: dict[str, Any] | None = None  # user frame of a failure in dynamo's tracing
    graphs_at_failure: int = 0  # graphs captured before the failure
    unknown_backend: str | None = None
    unrecoverable: list[str] = field(default_factory=list)  # backends that cannot be written into a repro
    roots: list[str] = field(default_factory=list)  # sys.path entries of the user modules the graphs import
    patches: dict[str, str] = field(default_factory=dict)  # torch targets the script replaced -> its function
    patches_carried: bool = True
    frame_path: Path | None = None  # a frame dynamo failed to trace, lifted to a graph
    events: list[dict[str, Any]] = field(default_factory=list)

    def load_cases(self) -> list[GraphCase]:
        return [load_repro(p).case for p in self.graph_paths]


def capture_command(script: Path, args: Sequence[str], out_dir: Path, *, backend: str | None, timeout: float | None) -> list[str]:
    """The command that runs :func:`capture_script` in a fresh process (``minify _capture``)."""
    from .worker import python_command

    options = ["--out", str(out_dir)] + (["--backend", backend] if backend else []) + (["--timeout", str(timeout)] if timeout else [])
    return python_command("minifier", "_capture", *options, "--", str(script), *args)


def capture_script(
    script: Path,
    args: Sequence[str],
    out_dir: Path,
    *,
    backend: str | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Run ``script`` with a :class:`Recorder` armed (in a worker child); returns a plain summary.

    The graphs themselves go to ``out_dir/g<N>/repro.py`` as they are compiled, and
    every event to ``out_dir/events.jsonl``; :func:`read_capture` assembles the result,
    even after this process died mid-run.
    """
    from .seams.compile_fx import keep_torch_aot_minifier_off

    out_dir.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(out_dir, backend_override=backend, timeout=timeout)
    keep_torch_aot_minifier_off()  # the program may turn torch's minifier on in code
    learn_dynamo_own_patches()
    recorder.start_watchdog()
    try:
        with hooks.dynamo_backends(recorder.wrap_backend), hooks.aot_compilers(recorder.wrap_aot_compiler):
            run_script(script, args)
    except SystemExit as e:
        if e.code not in (None, 0):
            recorder.event(event="exit", code=str(e.code), graphs=len(recorder.cases))
        else:
            recorder.event(event="finished", graphs=len(recorder.cases))
    except UnknownBackend as e:
        recorder.event(event="unknown_backend", message=str(e))
    except BaseException as e:  # noqa: BLE001 - the user's failure is the data we want
        unknown = next((x for x in exception_chain(e) if isinstance(x, UnknownBackend)), None)
        if unknown is not None:
            recorder.event(event="unknown_backend", message=str(unknown))
        else:
            failure = signature_of_exception(e)
            where = where_it_failed(e)
            frame = frame_of_exception(e) or current_frame()
            recorder.event(
                event="failed",
                failure=failure.signature.to_json(),
                where=where,
                details=failure.details,
                traceback="".join(traceback.format_exception(e))[-8000:],
                frame=frame,
                graphs=len(recorder.cases),
            )
            if where == "tracing":
                recorder.record_failing_frame(e, frame)
    else:
        recorder.event(event="finished", graphs=len(recorder.cases))
    finally:
        recorder.close()
    return {"graphs": len(recorder.cases)}


def where_it_failed(exc: BaseException) -> str:
    """``backend`` (a compiler raised), ``tracing`` (dynamo itself raised) or ``runtime``."""
    chain = list(exception_chain(exc))
    if any(dynamo_exc.is_backend_failure(e) or getattr(e, COMPILE_PHASE_ATTR, False) for e in chain):
        return "backend"
    if isinstance(exc, dynamo_exc.dynamo_exception()):
        return "tracing"
    return "runtime"


def read_capture(out_dir: Path, crash: Failure | None = None) -> CaptureResult:
    """Assemble a :class:`CaptureResult` from a capture run's event log."""
    events = []
    log = out_dir / "events.jsonl"
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
    paths = [Path(e["path"]) for e in events if e["event"] == "graph"]
    roots = list(dict.fromkeys(root for e in events if e["event"] == "graph" for root in e.get("roots", ())))
    result = CaptureResult(graph_paths=paths, failure=None, events=events, graphs_at_failure=len(paths), roots=roots)
    for e in events:
        if e["event"] == "failed":
            result.failure = Failure(Signature.from_json(e["failure"]), e.get("details", ""))
            result.failure_frame = e.get("frame")
            result.graphs_at_failure = e.get("graphs", len(paths))
        elif e["event"] == "exit":
            result.failure = Failure(Signature("runtime_error", "SystemExit", f"exit status {e['code']}"))
        elif e["event"] == "unknown_backend":
            result.unknown_backend = e["message"]
        elif e["event"] == "patches":
            result.patches, result.patches_carried = e["patches"], e["carried"]
        elif e["event"] == "unrecoverable" and e["message"] not in result.unrecoverable:
            result.unrecoverable.append(e["message"])
        elif e["event"] == "frame" and e.get("path"):
            result.frame_path = Path(e["path"])
    if crash is not None and result.failure is None:
        result.failure = crash
    return result

