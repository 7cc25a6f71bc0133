"""Rebuilding a recorded frame: the value tree back into objects, and one compiled call.

A record (:mod:`replay.records`) describes a frame declaratively. This module is the
other half of :mod:`replay.values`: it turns that description back into a function, its
arguments and closure, its globals, and the torch state around the call, then calls it
through ``torch.compile``. It imports only torch and the standard library, because
``replay script`` copies this file whole into the scripts it writes; in pt2kit it runs
only in the isolated replay process.

**The value tree.** Plain JSON values stand for themselves (``None``, bools, ints, strings,
finite floats). Everything else is an object ``{"t": kind, ...}``. Objects whose identity
matters (lists, dicts, sets, tensors, modules, functions, user objects...) live once in
the manifest's ``objects`` table and are referred to as ``{"t": "ref", "id": "12"}``, so
aliasing survives and the table can be rebuilt in any order (containers are created
empty first, which also makes cycles work). Tensors point into ``tensors.pt`` (loaded
with ``weights_only=True`` by the caller): a view is rebuilt from its base with
``as_strided``, so views of one storage stay views of one storage, and a tensor that
shares a saved tensor's storage as another dtype (``x.view(torch.int32)``: ``torch.save``
keeps one dtype per storage) is set on that tensor's storage (``storage_of``).

**Code.** Functions and classes of the user's own modules come back from their *source*
(``sources``): the function's block is compiled (never executed) and its code object is
taken out of the result, so decorators such as ``@torch.compile`` are not applied; a
class statement is executed, in a namespace holding the recorded globals. Methods are
compiled inside a class of the same name (for ``super()`` and name mangling) and
closures inside a factory function that names the free variables. Everything else
(torch, libraries, the standard library, importable user modules) is a reference
``module:qualname`` that is imported here, at replay, and only here.

Nothing in this module runs when a record is merely *read*: loading validates JSON and
tensors; executing sources and importing classes happen when a frame is rebuilt.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import importlib
import random
import sys
import types
from typing import Any, ClassVar, cast

import torch

FORMAT = "pt2kit-replay"
VERSION = 1


class RebuildError(Exception):
    """A record cannot be turned back into a frame (a missing class, a changed source...)."""


class Unrecordable:
    """Stands in, in a partial replay, for a value that could not be recorded."""

    def __init__(self, name: str, type_name: str, reason: str) -> None:
        self.name, self.type_name, self.reason = name, type_name, reason

    def __repr__(self) -> str:
        return f"<unrecordable {self.type_name} {self.name}: {self.reason}>"


# --------------------------------------------------------------------------- #
# References and sources
# --------------------------------------------------------------------------- #


def add_import_roots(modules: Any) -> None:
    """Put the directory of each recorded user module (``[name, root]`` pairs) on ``sys.path``."""
    for _, root in modules:
        if root and root not in sys.path:
            sys.path.insert(0, root)


def resolve(ref: str) -> Any:
    """Import ``module:qualname`` (``qualname`` may be dotted) and return the object."""
    module_name, _, qualname = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure means the same to the user
        raise RebuildError(f"cannot import {module_name} (for {ref}): {type(e).__name__}: {e}") from None
    for part in qualname.split(".") if qualname else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RebuildError(f"{ref} does not exist: {module_name} has no {qualname}") from None
    return obj


def source_text(entry: dict[str, Any]) -> str:
    """The text compiled for a source entry: its block at its own line numbers, wrapped as needed."""
    lines = entry["text"].splitlines()
    first = lines[0] if lines else ""
    indent = first[: len(first) - len(first.lstrip())]
    # Lines that do not start with the block's indentation are inside a string literal.
    body = [line.removeprefix(indent) for line in lines]
    header: list[str] = []
    prefix = ""
    if entry.get("imports"):
        # Never runs; it tells the compiler which globals are modules bound by ``import``,
        # which changes the bytecode it emits for ``F.relu(x)`` (CPython 3.11+).
        header.append(f"if 0: import {', '.join(entry['imports'])}")
    if entry.get("freevars"):
        header.append(f"def __pt2kit_factory__({', '.join(entry['freevars'])}):")
        prefix += "    "
    if entry.get("wrap_class"):
        header.append(f"{prefix}class {entry['wrap_class']}:")
        prefix += "    "
    if header:
        body = [prefix + line if line.strip() else line for line in body]
    pad = max(0, int(entry.get("firstlineno", 1)) - 1 - len(header))
    return "\n" * pad + "\n".join(header + body) + "\n"


def compile_source(entry: dict[str, Any]) -> types.CodeType:
    """Compile a source entry (nothing runs): the module-level code object."""
    try:
        return compile(
            source_text(entry),
            entry.get("file") or "<replay>",
            "exec",
            flags=int(entry.get("flags", 0)),
            dont_inherit=True,
        )
    except SyntaxError as e:
        raise RebuildError(f"the recorded source of {entry.get('qualname')} does not compile: {e}") from None


def all_code_objects(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and every code object nested in it, outermost first."""
    found, todo = [], [code]
    while todo:
        current = todo.pop(0)
        found.append(current)
        todo.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return found


def find_code(module_code: types.CodeType, name: str, firstlineno: int | None) -> types.CodeType:
    """The code object named ``name`` (at ``firstlineno``) inside compiled source."""
    candidates = [c for c in all_code_objects(module_code)[1:] if c.co_name == name]
    exact = [c for c in candidates if firstlineno is None or c.co_firstlineno == firstlineno]
    chosen = exact or candidates
    if len(chosen) != 1:
        raise RebuildError(f"the recorded source holds {len(chosen)} functions named {name}")
    return chosen[0]


def same_bytecode(a: types.CodeType, b: types.CodeType) -> bool:
    """Do two code objects run the same instructions on the same names?"""
    fields = ("co_code", "co_names", "co_varnames", "co_freevars", "co_argcount", "co_kwonlyargcount")
    return all(getattr(a, name) == getattr(b, name) for name in fields)


def bytecode_digest(code: types.CodeType) -> str:
    return hashlib.sha256(code.co_code + repr((code.co_names, code.co_varnames)).encode()).hexdigest()


# --------------------------------------------------------------------------- #
# The value tree
# --------------------------------------------------------------------------- #


class Decoder:
    """Turns the manifest's value tree back into objects (one decoder per rebuilt frame)."""

    def __init__(
        self, manifest: dict[str, Any], tensors: list[torch.Tensor], *, allow_unrecordable: bool = False
    ) -> None:
        self.manifest = manifest
        self.tensors = tensors
        self.objects: dict[str, Any] = manifest.get("objects", {})
        self.sources: list[dict[str, Any]] = manifest.get("sources", [])
        self.allow_unrecordable = allow_unrecordable
        self.done: dict[str, Any] = {}
        self.in_progress: set[str] = set()
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.ns_in_progress: set[tuple[str, str]] = set()
        self.codes: dict[int, types.CodeType] = {}
        self.classes: dict[int, type] = {}
        self.tensor_nodes: list[torch.Tensor] = []
        #: the program's own ``__main__``, rebuilt: ``sys.modules["__main__"]`` while the frame runs (:func:`as_main`)
        self.main: types.ModuleType | None = None

    # -- namespaces ------------------------------------------------------------------

    def namespace(self, key: str) -> dict[str, Any]:
        """The globals dict of a recorded module; names are filled in as they are needed."""
        ns = self.namespaces.get(key)
        if ns is None:
            spec = self.manifest["namespaces"][key]
            ns = {"__name__": spec.get("module", key), "__builtins__": builtins, "__file__": spec.get("file")}
            if ns["__name__"] == "__main__":  # (a module dynamo can import by that name: its guards do)
                self.main = types.ModuleType("__main__")
                self.main.__dict__.update(ns)
                ns = self.main.__dict__
            self.namespaces[key] = ns
        return ns

    def global_value(self, key: str, name: str) -> Any:
        ns = self.namespace(key)
        recorded = self.manifest["namespaces"][key]["globals"]
        if name in recorded and name not in ns and (key, name) not in self.ns_in_progress:
            self.ns_in_progress.add((key, name))
            ns[name] = self.value(recorded[name])
        return ns.get(name)

    def fill_namespace(self, key: str) -> dict[str, Any]:
        for name in self.manifest["namespaces"][key]["globals"]:
            self.global_value(key, name)
        return self.namespace(key)

    # -- code ------------------------------------------------------------------------

    def code(self, index: int) -> types.CodeType:
        """The code object of source ``index`` (compiled, not run)."""
        if index not in self.codes:
            entry = self.sources[index]
            self.codes[index] = find_code(compile_source(entry), entry["name"], entry.get("code_firstlineno"))
        return self.codes[index]

    def klass(self, index: int) -> type:
        """Execute a recorded class statement in its namespace and return the class."""
        if index in self.classes:
            return self.classes[index]
        entry = self.sources[index]
        key = entry["namespace"]
        ns = self.namespace(key)
        module_code = compile_source(entry)
        # The names the class statement itself evaluates (bases, decorators, class body).
        for code in all_code_objects(module_code):
            if code is module_code or not (code.co_flags & 0x2):  # not CO_NEWLOCALS: module or class body
                for name in code.co_names:
                    self.global_value(key, name)
        try:
            exec(module_code, ns)  # noqa: S102 - replay runs the user's class statement, by design
        except Exception as e:  # noqa: BLE001
            raise RebuildError(f"the class statement of {entry['qualname']} raised {type(e).__name__}: {e}") from None
        cls = ns[entry["name"]]
        self.classes[index] = cls
        return cls

    def function(self, node: dict[str, Any], key: str | None) -> types.FunctionType:
        entry = self.sources[node["source"]]
        code = self.code(node["source"])
        ns = self.namespace(entry["namespace"])
        closure_values = node.get("closure", {})
        cells = [types.CellType() for _ in code.co_freevars]
        fn = types.FunctionType(code, ns, code.co_name, None, tuple(cells) or None)
        if key is not None:
            self.done[key] = fn
        for name, cell in zip(code.co_freevars, cells):
            if name in closure_values:
                cell.cell_contents = self.value(closure_values[name])
        if node.get("defaults") is not None:
            fn.__defaults__ = tuple(self.value(node["defaults"]))
        if node.get("kwdefaults") is not None:
            fn.__kwdefaults__ = self.value(node["kwdefaults"])
        fn.__qualname__ = entry.get("qualname", fn.__qualname__)
        fn.__module__ = cast(str, ns.get("__name__"))  # None where the namespace has no __name__
        for name, value in node.get("attrs", {}).items():
            setattr(fn, name, self.value(value))
        return fn

    # -- values ----------------------------------------------------------------------

    def value(self, node: Any) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            raise RebuildError("malformed record: a bare JSON list in the value tree")
        kind = node.get("t")
        if kind == "ref":
            return self.ref(node["id"])
        return self.build(node, None)

    def ref(self, key: str) -> Any:
        if key in self.done:
            return self.done[key]
        if key in self.in_progress:
            raise RebuildError(f"malformed record: object {key} contains itself through an immutable value")
        node = self.objects.get(key)
        if node is None:
            raise RebuildError(f"malformed record: object {key} is missing")
        self.in_progress.add(key)
        value = self.build(node, key)
        self.done[key] = value
        self.in_progress.discard(key)
        return value

    def build(self, node: dict[str, Any], key: str | None) -> Any:
        """Make what ``node`` describes with the builder ``BUILDERS`` holds for its kind (none: a malformed record)."""
        kind = node.get("t")
        builder = self.BUILDERS.get(kind) if isinstance(kind, str) else None
        if builder is None:
            raise RebuildError(f"malformed record: unknown value kind {kind!r}")
        return builder(self, node, key)

    def _remember(self, key: str | None, value: Any) -> None:
        if key is not None:
            self.done[key] = value

    def tensor(self, node: dict[str, Any], key: str | None) -> torch.Tensor:
        if "view" in node:
            view = node["view"]
            base = self.value(view["base"])
            t = base.as_strided(view["size"], view["stride"], view["offset"])
        elif "storage_of" in node:
            t = self._on_storage_of(node)
        else:
            t = self._saved(node["data"])
            if node.get("parameter"):
                t = torch.nn.Parameter(t, requires_grad=bool(node.get("requires_grad")))
            elif node.get("requires_grad"):
                t = t.detach().requires_grad_(True)
        if key is not None:
            self.done[key] = t
        if "grad" in node:
            t.grad = self.value(node["grad"])
        for name, item in node.get("attrs", {}).items():
            t.__dict__[name] = self.value(item)
        self.tensor_nodes.append(t)
        return t

    def _saved(self, index: Any) -> torch.Tensor:
        if not isinstance(index, int) or not 0 <= index < len(self.tensors):
            raise RebuildError(f"malformed record: tensor {index} is not in tensors.pt")
        return self.tensors[index]

    def _on_storage_of(self, node: dict[str, Any]) -> torch.Tensor:
        """A tensor on the storage of a saved tensor of another dtype (the encoder's ``storage_of``)."""
        shared, dtype = node["storage_of"], getattr(torch, str(node.get("dtype")), None)
        if not isinstance(dtype, torch.dtype) or not isinstance(shared, dict):
            raise RebuildError(f"malformed record: a tensor on another's storage, as {node.get('dtype')!r}: {shared!r}")
        owner = self._saved(shared.get("data"))
        try:
            t = torch.empty(0, dtype=dtype, device=owner.device)
            t.set_(owner.untyped_storage(), shared["offset"], shared["size"], shared["stride"])
        except (RuntimeError, KeyError, TypeError) as e:
            raise RebuildError(f"malformed record: a tensor on tensor {shared.get('data')}'s storage: {e}") from None
        return t.requires_grad_(True) if node.get("requires_grad") else t

    # -- one builder per kind: BUILDERS maps a kind to builder(decoder, node, key) ----------------------
    # Containers and objects are registered under ``key`` before their items are built, so cycles find them.

    def _build_list(self, node: dict[str, Any], key: str | None) -> list[Any]:
        out: list[Any] = []
        self._remember(key, out)
        out.extend(self.value(item) for item in node["items"])
        return out

    def _build_mapping(self, node: dict[str, Any], key: str | None) -> Any:
        import collections

        kind = node["t"]
        mapping: Any = {"dict": dict, "odict": collections.OrderedDict, "defaultdict": collections.defaultdict}[kind]()
        self._remember(key, mapping)
        if kind == "defaultdict":
            mapping.default_factory = self.value(node["factory"])
        for k, item in node["items"]:
            mapping[self.value(k)] = self.value(item)
        return mapping

    def _build_set(self, node: dict[str, Any], key: str | None) -> set[Any]:
        out: set[Any] = set()
        self._remember(key, out)
        out.update(self.value(item) for item in node["items"])
        return out

    def _build_object(self, node: dict[str, Any], key: str | None) -> Any:
        """A module or user object: made by ``cls.__new__`` (no ``__init__``), then its attributes set one by one."""
        cls = self.value(node["class"])
        obj = cls.__new__(cls)
        self._remember(key, obj)
        for name, item in node["state"].items():
            object.__setattr__(obj, name, self.value(item))
        return obj

    def _build_subclass(self, node: dict[str, Any], key: str | None) -> torch.Tensor:
        cls = self.value(node["class"])
        inner = {name: self.value(item) for name, item in node["inner"].items()}
        t = cls.__tensor_unflatten__(inner, self.value(node["ctx"]), torch.Size(node["size"]), tuple(node["stride"]))
        if node.get("requires_grad"):
            t.requires_grad_(True)
        return t

    def _build_generator(self, node: dict[str, Any], key: str | None) -> torch.Generator:
        g = torch.Generator(device=node["device"])
        g.set_state(self.value(node["state"]))
        return g

    def _build_op(self, node: dict[str, Any], key: str | None) -> Any:
        op: Any = torch.ops
        for part in node["name"].split("."):
            op = getattr(op, part)
        return op

    def _build_partial(self, node: dict[str, Any], key: str | None) -> Any:
        import functools

        return functools.partial(self.value(node["func"]), *self.value(node["args"]), **self.value(node["keywords"]))

    def _build_enum(self, node: dict[str, Any], key: str | None) -> Any:
        cls = self.value(node["class"])
        return cls[node["name"]] if node.get("name") is not None else cls(self.value(node["value"]))

    def _build_unrecordable(self, node: dict[str, Any], key: str | None) -> Unrecordable:
        """A placeholder, in a partial replay only; otherwise the missing value stops the rebuild."""
        if not self.allow_unrecordable:
            raise RebuildError(f"{node.get('name')} ({node.get('type')}) was not recorded: {node.get('reason')}")
        return Unrecordable(node.get("name", "?"), node.get("type", "?"), node.get("reason", ""))

    BUILDERS: ClassVar[dict[str, Any]] = {
        "float": lambda d, node, key: float(node["v"]),
        "complex": lambda d, node, key: complex(node["re"], node["im"]),
        "bytes": lambda d, node, key: bytes.fromhex(node["hex"]),
        "tuple": lambda d, node, key: tuple(d.value(item) for item in node["items"]),
        "frozenset": lambda d, node, key: frozenset(d.value(item) for item in node["items"]),
        "ellipsis": lambda d, node, key: ...,
        "slice": lambda d, node, key: slice(d.value(node["start"]), d.value(node["stop"]), d.value(node["step"])),
        "range": lambda d, node, key: range(node["start"], node["stop"], node["step"]),
        "list": _build_list,
        "dict": _build_mapping,
        "odict": _build_mapping,
        "defaultdict": _build_mapping,
        "set": _build_set,
        "dtype": lambda d, node, key: getattr(torch, node["name"]),
        "device": lambda d, node, key: torch.device(node["name"]),
        "size": lambda d, node, key: torch.Size(node["items"]),
        "layout": lambda d, node, key: getattr(torch, node["name"]),
        "memory_format": lambda d, node, key: getattr(torch, node["name"]),
        "qscheme": lambda d, node, key: getattr(torch, node["name"]),
        "tensor": lambda d, node, key: d.tensor(node, key),
        "subclass": _build_subclass,
        "generator": _build_generator,
        "ndarray": lambda d, node, key: d.value(node["tensor"]).numpy(),
        "class": lambda d, node, key: d.klass(node["source"]) if "source" in node else resolve(node["ref"]),
        "function": lambda d, node, key: resolve(node["ref"]) if "ref" in node else d.function(node, key),
        "pymodule": lambda d, node, key: importlib.import_module(node["name"]),
        "op": _build_op,
        "attr": lambda d, node, key: getattr(d.value(node["of"]), node["name"]),
        "method": lambda d, node, key: getattr(d.value(node["self"]), node["name"]),
        "partial": _build_partial,
        "enum": _build_enum,
        "namedtuple": lambda d, node, key: tuple.__new__(d.value(node["class"]), list(map(d.value, node["items"]))),
        "structseq": lambda d, node, key: d.value(node["class"])(list(map(d.value, node["items"]))),
        "module": _build_object,
        "object": _build_object,
        "unrecordable": _build_unrecordable,
    }


# --------------------------------------------------------------------------- #
# The frame
# --------------------------------------------------------------------------- #


class Frame:
    """A rebuilt frame: the function and the arguments it was entered with."""

    def __init__(self, fn: Any, args: list[Any], kwargs: dict[str, Any], decoder: Decoder) -> None:
        self.fn, self.args, self.kwargs, self.decoder = fn, args, kwargs, decoder

    @property
    def tensors(self) -> list[torch.Tensor]:
        """Every tensor rebuilt for this frame (arguments, globals, closure)."""
        return self.decoder.tensor_nodes


def rebuild_frame(
    manifest: dict[str, Any],
    tensors: list[torch.Tensor],
    internals: dict[str, Any],
    *,
    allow_unrecordable: bool = False,
) -> Frame:
    """The recorded frame's function, arguments and globals, ready to call.

    ``internals`` holds the few private torch hooks replay needs (pt2kit passes its seams;
    a script written by ``replay script`` passes copies): ``regenerate_resume`` rebuilds a
    resume function from the original function's code.
    """
    add_import_roots(manifest.get("imports", []))
    decoder = Decoder(manifest, tensors, allow_unrecordable=allow_unrecordable)
    frame = manifest["frame"]
    code_spec = frame["code"]
    namespace_key = frame.get("namespace")
    if "unavailable" in code_spec:
        raise RebuildError(
            f"the source of the recorded function was not available when it was recorded ({code_spec['unavailable']})"
        )
    if "ref" in code_spec:
        original = resolve(code_spec["ref"])
        code = getattr(original, "__code__", None)
        if code is None:
            raise RebuildError(f"{code_spec['ref']} is not a Python function")
        ns = original.__globals__
    else:
        code = decoder.code(code_spec["source"])
        ns = decoder.fill_namespace(namespace_key) if namespace_key else {"__builtins__": builtins}
    if frame.get("resume"):
        code = internals["regenerate_resume"](code, frame["resume"])
    for key in manifest.get("namespaces", {}):
        decoder.fill_namespace(key)
    closure_values = frame.get("closure", {})
    cells = tuple(types.CellType() for _ in code.co_freevars)
    for name, cell in zip(code.co_freevars, cells):
        if name in closure_values:
            cell.cell_contents = decoder.value(closure_values[name])
    fn = types.FunctionType(code, ns, code.co_name, None, cells or None)
    fn.__qualname__ = frame.get("qualname", code.co_name)
    values = {name: decoder.value(node) for name, node in frame["args"].items()}
    args, kwargs = call_arguments(code, values)
    return Frame(fn, args, kwargs, decoder)


def call_arguments(code: types.CodeType, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments that enter ``code`` with its locals set to ``values``."""
    names = code.co_varnames
    positional = [values[n] for n in names[: code.co_argcount]]
    kwargs = {n: values[n] for n in names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]}
    index = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & 0x04:  # CO_VARARGS
        positional.extend(values[names[index]])
        index += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        kwargs.update(values[names[index]])
    return positional, kwargs


# --------------------------------------------------------------------------- #
# State around the call: config, global state, RNG
# --------------------------------------------------------------------------- #


def apply_config(manifest: dict[str, Any], decoder: Decoder) -> None:
    """Set every recorded non-default compiler config value."""
    for module_name, values in manifest.get("config", {}).items():
        module = importlib.import_module(module_name)
        for name, node in values.items():
            setattr(module, name, decoder.value(node))


def apply_global_state(state: dict[str, Any]) -> contextlib.ExitStack:
    """Set the process-wide state and return the contexts (grad, autocast...) to call inside."""
    torch.set_default_dtype(getattr(torch, state.get("default_dtype", "float32")))
    if state.get("deterministic") is not None:
        torch.use_deterministic_algorithms(
            bool(state["deterministic"]), warn_only=bool(state.get("deterministic_warn_only"))
        )
    if state.get("float32_matmul_precision"):
        torch.set_float32_matmul_precision(state["float32_matmul_precision"])
    for name, value in state.get("backends", {}).items():
        owner: Any = torch.backends
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        with contextlib.suppress(Exception):
            setattr(owner, attr, value)
    stack = contextlib.ExitStack()
    if state.get("inference_mode"):
        stack.enter_context(torch.inference_mode(True))
    stack.enter_context(torch.set_grad_enabled(bool(state.get("grad_enabled", True))))
    for device, autocast in state.get("autocast", {}).items():
        if autocast.get("enabled"):
            stack.enter_context(
                torch.autocast(
                    device,
                    dtype=getattr(torch, autocast["dtype"]),
                    cache_enabled=state.get("autocast_cache_enabled", True),
                )
            )
    return stack


def restore_rng(manifest: dict[str, Any], decoder: Decoder) -> None:
    """Put every random number generator back where it was when the frame was entered."""
    rng = manifest.get("rng", {})
    if "torch" in rng:
        torch.set_rng_state(decoder.value(rng["torch"]))
    if "python" in rng:
        state = decoder.value(rng["python"])
        random.setstate((state[0], tuple(state[1]), state[2]))
    if rng.get("numpy") is not None:
        import numpy as np

        name, keys, pos, has_gauss, cached = rng["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    if rng.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([decoder.value(s) for s in rng["cuda"]])


# --------------------------------------------------------------------------- #
# The call
# --------------------------------------------------------------------------- #


class BackendNotFound(RebuildError):
    """The recorded backend cannot be had here (its module, its name or its definition)."""


def resolve_backend(name: str) -> Any:
    """A registered backend name (checked), or ``module:function``."""
    if ":" in name:
        return resolve(name)
    # public API on purpose: this module is copied into standalone replay scripts
    registered = torch.compiler.list_backends(exclude_tags=())
    if name not in registered:
        raise BackendNotFound(f"no backend is registered as {name!r} (registered: {', '.join(registered)})")
    return name


def recorded_backend(recorded: dict[str, Any], definitions: dict[str, Any] | None = None) -> Any:
    """The backend the record names: import its modules, run its carried definitions, resolve it.

    ``definitions``: the namespace they already ran in (a replay script runs them as its own
    top-level code, where ``minify run`` finds their source); None runs them here, apart.
    """
    if not recorded.get("name"):
        raise BackendNotFound(
            f"the recorded backend cannot be rebuilt ({recorded.get('why') or 'it has no name'}); choose one with --backend"
        )
    add_import_roots(recorded.get("modules", []))
    for name, _ in recorded.get("modules", []):
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001
            raise BackendNotFound(
                f"the recorded backend {recorded['name']!r} lives in {name}, which does not import here: {type(e).__name__}: {e}"
            ) from None
    if recorded.get("definitions") and definitions is None:
        # the backend's own source, carried from the user's program (a script, a lambda...)
        definitions = {"__name__": "__pt2kit_backend__", "__builtins__": builtins}
        try:
            exec(compile(recorded["definitions"], "<the recorded backend's definitions>", "exec"), definitions)  # noqa: S102
        except Exception as e:  # noqa: BLE001
            raise BackendNotFound(f"the recorded backend's definitions fail here: {type(e).__name__}: {e}") from None
    if recorded.get("definitions") and recorded.get("binds") and definitions is not None:  # (always set above then)
        return definitions[recorded["binds"]]
    return resolve_backend(recorded["name"])


def replay_call(
    manifest: dict[str, Any], tensors: list[torch.Tensor], internals: dict[str, Any], **options: Any
) -> Any:
    """Rebuild the frame and call it compiled, as it was called when it failed (see :func:`prepare_call`)."""
    return prepare_call(manifest, tensors, internals, **options)()


def prepare_call(
    manifest: dict[str, Any],
    tensors: list[torch.Tensor],
    internals: dict[str, Any],
    *,
    backend: Any = None,
    fullgraph: bool | None = None,
    static: bool = False,
    allow_unrecordable: bool = False,
    definitions: dict[str, Any] | None = None,
) -> Any:
    """Everything up to the call; returns the call itself (no arguments).

    In order: reset dynamo, import the backend's modules, rebuild the frame, set the
    recorded config and global state, restore automatic-dynamic state (``static``: drop
    it and every ``mark_dynamic`` mark instead) and wrap the function with
    ``torch.compile(fn, backend=..., fullgraph=...)``. The returned call restores the RNGs
    and calls it once (then, for a frame whose backward failed, runs a backward through its
    outputs, each with a gradient of ones); it returns the outputs, and whatever it raises propagates.
    ``definitions``: see :func:`recorded_backend`.
    """
    torch.compiler.reset()
    compile_options = manifest.get("compile", {})
    recorded = compile_options.get("backend", {})
    if backend is None:
        backend = recorded_backend(recorded, definitions)
        options = recorded.get("config", {}).get("torch._inductor.config") or None
    else:
        options = None
    frame = rebuild_frame(manifest, tensors, internals, allow_unrecordable=allow_unrecordable)
    apply_config(manifest, frame.decoder)
    contexts = apply_global_state(manifest.get("global_state", {}))
    if static:
        for t in frame.tensors:
            internals["strip_dynamic_marks"](t)
    else:
        automatic = manifest.get("dynamic", {}).get("automatic")
        if automatic:
            internals["restore_automatic_dynamic"](frame.fn.__code__, frame.fn.__closure__, automatic)
    if fullgraph is None:
        fullgraph = bool(compile_options.get("fullgraph"))
    kwargs: dict[str, Any] = {"backend": backend, "fullgraph": fullgraph}
    if static:
        kwargs["dynamic"] = False
    if options:
        kwargs["options"] = options
    compiled = torch.compile(frame.fn, **kwargs)

    def call() -> Any:
        restore_rng(manifest, frame.decoder)
        with contexts, as_main(frame.decoder.main):
            outputs = compiled(*frame.args, **frame.kwargs)
            if manifest.get("failure", {}).get("stage") == "backward":  # (replay.backward.BACKWARD)
                needs = [t for t in flat_outputs(outputs) if isinstance(t, torch.Tensor) and t.requires_grad]
                torch.autograd.backward(needs, [torch.ones_like(t) for t in needs])
            return outputs

    return call


@contextlib.contextmanager
def as_main(module: types.ModuleType | None) -> Any:
    """The program's ``__main__`` (rebuilt) as ``sys.modules["__main__"]`` for a while.

    Dynamo reads the globals of a function it inlines from another module's frame
    through that function's module, imported by name (a guard on
    ``G['__import___main__'].torch``): in a replay, ``__main__`` is the replay's own.
    """
    if module is None:
        yield
        return
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def flat_outputs(value: Any) -> list[Any]:
    """The leaves of an output: tensors and plain values, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flat_outputs(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in flat_outputs(item)]
    return [value]


def digest(value: Any) -> dict[str, Any]:
    """Shape, dtype and the sha256 of an output's contiguous CPU bytes (or of a plain value's repr)."""
    if not isinstance(value, torch.Tensor):
        return {
            "shape": None,
            "dtype": type(value).__name__,
            "sha256": hashlib.sha256(repr(value).encode()).hexdigest(),
        }
    t = value.detach()
    if t.is_meta:
        return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "sha256": None}
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.cpu().resolve_conj().resolve_neg().clone(memory_format=torch.contiguous_format)
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "sha256": hashlib.sha256(bytes(t.untyped_storage())).hexdigest(),
    }


__all__ = [
    "FORMAT",
    "VERSION",
    "BackendNotFound",
    "Decoder",
    "Frame",
    "RebuildError",
    "Unrecordable",
    "add_import_roots",
    "apply_config",
    "apply_global_state",
    "call_arguments",
    "compile_source",
    "digest",
    "find_code",
    "flat_outputs",
    "prepare_call",
    "rebuild_frame",
    "recorded_backend",
    "replay_call",
    "resolve",
    "restore_rng",
    "same_bytecode",
    "source_text",
]
