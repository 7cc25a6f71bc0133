"""Describing live Python values as a JSON value tree plus one list of tensors.

The recording half of the record format (:mod:`replay.rebuild` is the other half and
documents the tree). An :class:`Encoder` walks a frame's arguments, closure cells and
globals and writes down *what* each value is, never *how to run code that makes it*:

- scalars, strings, containers, ``torch.dtype``/``device``/``Size``, enums, slices...
  as they are;
- tensors as an index into ``tensors.pt`` plus what ``torch.save`` does not keep the way
  dynamo sees it: ``Parameter``-ness, ``requires_grad``, the view relationship to a base
  (rebuilt with ``as_strided``), the storage it shares with a tensor of another dtype
  (``torch.save`` keeps one dtype per storage: the second is rebuilt on the first's
  storage), ``.grad`` and the tensor's ``__dict__`` (where ``mark_dynamic`` leaves its
  marks); tensor subclasses through ``__tensor_flatten__``;
- ``nn.Module`` objects, dataclasses and plain Python objects as their class and
  ``__dict__`` (rebuilt with ``cls.__new__``, ``__init__`` never runs), NamedTuples as
  class and fields;
- operators by name (``aten.add.Tensor``), the function ``torch.library.custom_op`` returns
  as the overload it calls (:attr:`Encoder.ops` names them: a custom op's definition rides
  with the record, :func:`replay.state.program_changes`);
- functions, classes and modules by reference (``module:qualname``, imported at replay)
  when an import gives back the very same object, and from *source* when they belong to
  the program itself (``__main__`` or the module of the frame): the source block is
  kept, with the globals its code reads, and those globals are recorded in turn.
  Which of the two, and the books of source blocks, namespaces and imports, are
  :mod:`replay.sources`'s job; the encoder describes the values (closures, defaults,
  the globals queued) around them.

Objects with identity (containers, tensors, modules, functions...) are described once
and referred to by id, so aliasing and cycles survive. A value that cannot be described
(a generator, a lock, an open file, a C object) becomes an ``unrecordable`` node with a
reason, and is listed by name (``x``, ``global LOCK``, ``self.cache[0]``): the record is
then *partial*.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import io
import itertools
import math
import sys
import threading
import types
from typing import Any

import torch

from pt2kit.seams import ops

from . import rebuild
from .sources import SourceBook, global_names, module_imports, reference_of

#: Python classes whose instances are C objects bound to the running process.
_PROCESS_BOUND: tuple[tuple[tuple[type, ...], str, str], ...] = (
    (
        (types.GeneratorType, types.AsyncGeneratorType),
        "generator",
        "a running generator's position cannot be written down",
    ),
    ((types.CoroutineType,), "coroutine", "a running coroutine's position cannot be written down"),
    ((type(threading.Lock()), type(threading.RLock())), "lock", "a lock belongs to the running process"),
    ((io.IOBase,), "file", "an open file belongs to the running process"),
    ((types.FrameType, types.TracebackType), "frame", "a live interpreter frame cannot be written down"),
)

#: C-level callables (builtin functions and methods, slot wrappers, method descriptors), found by name.
_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)


class Encoder:
    """Builds the value tree of one record: objects, tensors, and (through its :class:`SourceBook`) sources."""

    def __init__(self, source_modules: dict[str, dict[str, Any] | None] | None = None) -> None:
        #: Modules whose functions are rebuilt from source (the frame's, and ``__main__``), with their globals where
        #: known: a script's are no longer ``sys.modules["__main__"]``'s once runpy has left it (a backward fails later)
        self.source_modules = {"__main__": None, **(source_modules or {})}
        self.objects: dict[str, Any] = {}
        self.tensors: list[torch.Tensor] = []
        self.book = SourceBook()
        # the book's tables, under the names the manifest gives them
        self.sources: list[dict[str, Any]] = self.book.sources
        self.namespaces: dict[str, dict[str, Any]] = self.book.namespaces
        self.imports: dict[str, str] = self.book.imports
        self.unrecordable: list[dict[str, str]] = []
        self.notes: list[str] = []
        #: ``namespace::name`` of every operator described (a record of custom ops carries their definitions)
        self.ops: set[str] = set()
        self._memo: dict[int, str] = {}
        self._ids = itertools.count(1)
        self._alive: list[Any] = []  # keeps ids unique while encoding
        #: (device, storage address) -> (index in ``tensors``, dtype) of the first tensor saved on that storage
        self._storages: dict[tuple[str, int], tuple[int, torch.dtype]] = {}

    # -- the public surface ------------------------------------------------------

    def encode(self, value: Any, path: str) -> Any:
        """The node for ``value``; ``path`` names it in the list of unrecordable values."""
        try:
            return self._encode(value, path)
        except RecursionError:
            return self._unrecordable(path, value, "nested too deeply to describe")

    def record_globals(self, globals_dict: dict[str, Any], names: list[str]) -> str:
        """Record ``names`` of a module's globals (those that exist); returns the namespace key."""
        key = self.namespace_key(globals_dict)
        self.book.queue_globals(key, names)
        self.finish()
        return key

    def finish(self) -> None:
        """Record the globals that sources found along the way read, until none are left."""
        pending = self.book.pending
        while pending:
            key, name = pending.pop(0)
            recorded = self.namespaces[key]["globals"]
            scope = self.book.scope(key)
            if name in recorded or name not in scope or name.startswith("__") and name.endswith("__"):
                continue
            recorded[name] = None  # placeholder: a global that reaches itself stops here
            recorded[name] = self.encode(scope[name], f"global {name}")

    def namespace_key(self, globals_dict: dict[str, Any]) -> str:
        return self.book.namespace_key(globals_dict)

    def source_entry(self, code: types.CodeType, globals_dict: dict[str, Any]) -> int:
        """Keep the source block of a function's ``code`` (:meth:`SourceBook.function_source`)."""
        return self.book.function_source(code, globals_dict)

    # -- values ------------------------------------------------------------------

    def _encode(self, value: Any, path: str) -> Any:  # one branch per kind
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
        if kind is complex:
            return {"t": "complex", "re": self._encode(value.real, path), "im": self._encode(value.imag, path)}
        if kind is bytes:
            return {"t": "bytes", "hex": value.hex()}
        if value is Ellipsis:
            return {"t": "ellipsis"}
        if kind is slice:
            return {
                "t": "slice",
                "start": self.encode(value.start, path),
                "stop": self.encode(value.stop, path),
                "step": self.encode(value.step, path),
            }
        if kind is range:
            return {"t": "range", "start": value.start, "stop": value.stop, "step": value.step}
        if kind is torch.dtype:
            return {"t": "dtype", "name": str(value).removeprefix("torch.")}
        if kind is torch.device:
            return {"t": "device", "name": str(value)}
        if kind is torch.Size:
            return {"t": "size", "items": list(value)}
        if kind is torch.layout:
            return {"t": "layout", "name": str(value).removeprefix("torch.")}
        if kind is torch.memory_format:
            return {"t": "memory_format", "name": str(value).removeprefix("torch.")}
        if kind is tuple:
            return {"t": "tuple", "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(value)]}
        if kind is frozenset:
            return {"t": "frozenset", "items": [self.encode(v, f"{path}[...]") for v in value]}
        if isinstance(value, enum.Enum):
            return self._enum(value, path)
        if isinstance(value, tuple) and hasattr(kind, "_fields"):
            return {
                "t": "namedtuple",
                "class": self._class(kind, path),
                "items": [self.encode(v, f"{path}.{f}") for f, v in zip(kind._fields, value)],
            }
        if isinstance(value, tuple) and hasattr(kind, "n_fields") and kind.__module__.startswith("torch"):
            return {
                "t": "structseq",
                "class": self._class(kind, path),
                "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(value)],
            }
        # everything below has an identity worth keeping
        known = self._memo.get(id(value))
        if known is not None:
            return {"t": "ref", "id": known}
        return self._identity(value, path)

    def _identity(self, value: Any, path: str) -> Any:
        kind = type(value)
        if isinstance(value, torch.Tensor):
            return self._define(value, lambda: self._tensor(value, path))
        if kind is list:
            return self._define(
                value, lambda: {"t": "list", "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(value)]}
            )
        if kind in (dict, collections.OrderedDict, collections.defaultdict):
            tag = {dict: "dict", collections.OrderedDict: "odict", collections.defaultdict: "defaultdict"}[kind]
            return self._define(value, self._mapping, value, path, tag)
        if kind is set:
            return self._define(value, lambda: {"t": "set", "items": [self.encode(v, f"{path}[...]") for v in value]})
        if isinstance(value, type):
            return self._define(value, lambda: self._class_node(value, path))
        if isinstance(value, types.ModuleType):
            return self._module_object(value, path)
        if isinstance(value, types.FunctionType):
            return self._define(value, lambda: self._function(value, path))
        if isinstance(value, types.MethodType):
            return self._define(value, self._bound_method, value, path)
        if isinstance(value, functools.partial) and kind is functools.partial:
            return self._define(value, self._partial, value, path)
        if ops.is_custom_op_def(value):  # what @torch.library.custom_op returns: calling it calls its overload
            value = ops.custom_op_def_overload(value)
        if ops.is_overload(value) or ops.is_packet(value):
            self.ops.add(ops.schema_name(value))
            return _op(value)
        if kind is torch.Generator:
            return self._define(value, self._generator, value, path)
        if isinstance(value, _BUILTIN_CALLABLES):
            return self._callable_reference(value, path)
        for classes, name, reason in _PROCESS_BOUND:
            if isinstance(value, classes):
                return self._unrecordable(path, value, reason, name)
        if _is_ndarray(value):
            return self._define(value, lambda: self._ndarray(value, path))
        if isinstance(value, torch.nn.Module):
            return self._define(value, lambda: self._object(value, path, "module"))
        if isinstance(value, torch.optim.Optimizer):  # (its __setstate__ fills in old pickles' fields: its __dict__ is all of it)
            return self._define(value, lambda: self._object(value, path, "object"))
        if dataclasses.is_dataclass(value) or _plain_object(kind):
            return self._define(value, lambda: self._object(value, path, "object"))
        reference = reference_of(value)
        if reference is not None:
            return {"t": "function", "ref": reference}
        return self._unrecordable(path, value, f"pt2kit cannot describe a {_type_name(value)}")

    def _define(self, value: Any, make: Any, *args: Any) -> Any:
        """Describe ``value`` once (as ``make(*args)``), in the objects table, and return a reference to it."""
        key = str(next(self._ids))
        self._memo[id(value)] = key
        self._alive.append(value)
        node = make(*args)
        if not isinstance(node, dict) or node.get("t") == "unrecordable":
            # referred to again, it is unrecordable again (and named once)
            self._memo.pop(id(value), None)
            return node
        self.objects[key] = node
        return {"t": "ref", "id": key}

    def _unrecordable(self, path: str, value: Any, reason: str, type_name: str | None = None) -> dict[str, Any]:
        type_name = type_name or _type_name(value)
        self.unrecordable.append({"name": path, "type": type_name, "reason": reason})
        return {"t": "unrecordable", "name": path, "type": type_name, "reason": reason}

    # -- kinds -------------------------------------------------------------------

    def _tensor(self, t: torch.Tensor, path: str) -> dict[str, Any]:
        kind = type(t)
        if kind not in (torch.Tensor, torch.nn.Parameter):
            if hasattr(t, "__tensor_flatten__") and hasattr(kind, "__tensor_unflatten__"):
                names, ctx = t.__tensor_flatten__()
                return {
                    "t": "subclass",
                    "class": self._class(kind, path),
                    "inner": {n: self.encode(getattr(t, n), f"{path}.{n}") for n in names},
                    "ctx": self.encode(ctx, f"{path} (flatten context)"),
                    "size": list(t.size()),
                    "stride": list(t.stride()),
                    "requires_grad": t.requires_grad,
                }
            return self._unrecordable(path, t, f"a {kind.__name__} tensor has no __tensor_flatten__")
        node: dict[str, Any] = {
            "t": "tensor",
            "shape": list(t.shape),
            "dtype": str(t.dtype).removeprefix("torch."),
            "device": str(t.device),
            "requires_grad": t.requires_grad,
            "parameter": kind is torch.nn.Parameter,
            "leaf": t.is_leaf,
        }
        base = t._base
        if (
            base is not None
            and type(base) in (torch.Tensor, torch.nn.Parameter)
            and base.dtype == t.dtype
            and t.layout == torch.strided
        ):
            node["view"] = {
                "base": self.encode(base, f"{path}._base"),
                "size": list(t.size()),
                "stride": list(t.stride()),
                "offset": t.storage_offset(),
            }
        else:
            node.update(self._data(t))
        if t.is_leaf and t.grad is not None:
            node["grad"] = self.encode(t.grad, f"{path}.grad")
        attrs = {k: v for k, v in vars(t).items()}
        if attrs:
            node["attrs"] = {k: self.encode(v, f"{path}.{k}") for k, v in attrs.items()}
        return node

    def _data(self, t: torch.Tensor) -> dict[str, Any]:
        """Where ``t``'s values are: its index in ``tensors``, or the storage of the tensor there it shares as another dtype."""
        storage = (str(t.device), t.untyped_storage().data_ptr()) if t.layout == torch.strided and t.untyped_storage().nbytes() else None
        first = self._storages.get(storage) if storage is not None else None
        if first is not None and first[1] != t.dtype:
            return {"storage_of": {"data": first[0], "size": list(t.size()), "stride": list(t.stride()), "offset": t.storage_offset()}}
        if storage is not None and first is None:
            self._storages[storage] = (len(self.tensors), t.dtype)
        self.tensors.append(t.detach())
        return {"data": len(self.tensors) - 1}

    def _mapping(self, value: Any, path: str, tag: str) -> dict[str, Any]:
        """A dict, OrderedDict or defaultdict as its items in order (and a defaultdict's factory)."""
        node: dict[str, Any] = {
            "t": tag,
            "items": [
                [self.encode(k, f"{path} key"), self.encode(v, f"{path}[{k!r}]")] for k, v in list(value.items())
            ],
        }
        if tag == "defaultdict":
            node["factory"] = self.encode(value.default_factory, f"{path}.default_factory")
        return node

    def _bound_method(self, value: types.MethodType, path: str) -> dict[str, Any]:
        """A bound method as the object it is bound to and the name it is looked up by."""
        return {"t": "method", "self": self.encode(value.__self__, f"{path}.__self__"), "name": value.__func__.__name__}

    def _partial(self, value: functools.partial[Any], path: str) -> dict[str, Any]:
        """A ``functools.partial`` as its function, positional arguments and keywords."""
        return {
            "t": "partial",
            "func": self.encode(value.func, f"{path}.func"),
            "args": self.encode(value.args, f"{path}.args"),
            "keywords": self.encode(dict(value.keywords), f"{path}.keywords"),
        }

    def _generator(self, value: torch.Generator, path: str) -> dict[str, Any]:
        """A ``torch.Generator`` as its device and its state tensor."""
        return {"t": "generator", "device": str(value.device), "state": self.encode(value.get_state(), f"{path}.state")}

    def _ndarray(self, array: Any, path: str) -> dict[str, Any]:
        try:
            tensor = torch.from_numpy(array.copy())
        except TypeError as e:
            return self._unrecordable(path, array, f"numpy array of {array.dtype}: {e}")
        return {"t": "ndarray", "tensor": self.encode(tensor, path)}

    def _enum(self, value: enum.Enum, path: str) -> dict[str, Any]:
        node: dict[str, Any] = {"t": "enum", "class": self._class(type(value), path), "name": value.name}
        if value.name is None:
            node["value"] = self.encode(value.value, path)
        return node

    def _object(self, value: Any, path: str, tag: str) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for name, item in vars(value).items() if hasattr(value, "__dict__") else ():
            state[name] = item
        for name in _slot_names(type(value)):
            if name not in state and hasattr(value, name):
                state[name] = getattr(value, name)
        cls = self._class(type(value), path)
        if cls.get("t") == "unrecordable":
            return cls
        return {"t": tag, "class": cls, "state": {k: self.encode(v, f"{path}.{k}") for k, v in state.items()}}

    def _module_object(self, module: types.ModuleType, path: str) -> Any:
        name = module.__name__
        if name == "__main__" or sys.modules.get(name) is not module:
            return self._unrecordable(path, module, f"the module {name} cannot be imported by name")
        self.book.note_import(name)
        return {"t": "pymodule", "name": name}

    def _class(self, cls: type, path: str) -> dict[str, Any]:
        node: dict[str, Any] = self._encode(cls, path)
        return node

    def _class_node(self, cls: type, path: str) -> dict[str, Any]:
        module = getattr(cls, "__module__", None)
        if module not in self.source_modules:
            reference = reference_of(cls)
            if reference is not None:
                self.book.note_import(reference.partition(":")[0])
                return {"t": "class", "ref": reference}
        globals_dict = self.source_modules.get(module or "") or getattr(sys.modules.get(module or ""), "__dict__", None)
        if globals_dict is None or cls.__qualname__ != cls.__name__ or globals_dict.get(cls.__name__) is not cls:
            return self._unrecordable(
                path, cls, f"the class {cls.__qualname__} is neither importable nor defined at the top of a module"
            )
        try:
            index = self.book.class_source(cls, globals_dict)
        except (OSError, TypeError) as e:
            return self._unrecordable(path, cls, f"no source for the class {cls.__qualname__}: {e}")
        except (SyntaxError, rebuild.RebuildError) as e:
            return self._unrecordable(path, cls, str(e))
        return {"t": "class", "source": index}

    def _function(self, fn: types.FunctionType, path: str) -> dict[str, Any]:
        module = fn.__module__
        if module not in self.source_modules and fn.__globals__.get("__name__") not in self.source_modules:
            reference = reference_of(fn)
            if reference is not None:
                self.book.note_import(reference.partition(":")[0])
                return {"t": "function", "ref": reference}
        try:
            index = self.source_entry(fn.__code__, fn.__globals__)
        except (OSError, TypeError, SyntaxError, IndexError) as e:
            return self._unrecordable(path, fn, f"no source for {fn.__qualname__}: {e}")
        except rebuild.RebuildError as e:
            return self._unrecordable(path, fn, str(e))
        node: dict[str, Any] = {"t": "function", "source": index, "name": fn.__name__}
        closure = {}
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:
                continue
            closure[name] = self.encode(contents, f"{path} closure {name}")
        if closure:
            node["closure"] = closure
        if fn.__defaults__:
            node["defaults"] = self.encode(fn.__defaults__, f"{path} defaults")
        if fn.__kwdefaults__:
            node["kwdefaults"] = self.encode(dict(fn.__kwdefaults__), f"{path} defaults")
        attrs = {k: v for k, v in vars(fn).items() if k not in ("__wrapped__",)}
        if attrs:
            node["attrs"] = {k: self.encode(v, f"{path}.{k}") for k, v in attrs.items()}
        return node

    def _callable_reference(self, value: Any, path: str) -> Any:
        owner = getattr(value, "__objclass__", None)
        if owner is not None and getattr(owner, name := getattr(value, "__name__", ""), None) is value:
            return {"t": "attr", "of": self._class(owner, path), "name": name}
        bound = getattr(value, "__self__", None)
        if (
            bound is not None
            and not isinstance(bound, types.ModuleType)
            and getattr(bound, getattr(value, "__name__", ""), None) == value
        ):
            return {"t": "method", "self": self.encode(bound, f"{path}.__self__"), "name": value.__name__}
        reference = reference_of(value)
        if reference is None:
            return self._unrecordable(
                path, value, f"the builtin {getattr(value, '__qualname__', value)!r} cannot be found by name"
            )
        return {"t": "function", "ref": reference}


def _op(value: Any) -> dict[str, Any]:
    """An operator as its overload's name (``aten.add.Tensor``) or its packet's (``aten.add``)."""
    return {"t": "op", "name": str(value) if ops.is_overload(value) else ops.schema_name(value).replace("::", ".")}


def _type_name(value: Any) -> str:
    return type(value).__name__


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                names.append(name)
    return names


def _plain_object(cls: type) -> bool:
    """Is an instance of ``cls`` fully described by its ``__dict__``/slots (a Python class, default pickling)?"""
    heap = 1 << 9
    for klass in cls.__mro__:
        if klass is object:
            continue
        if not klass.__flags__ & heap:
            return False  # a C type in the bases keeps state we cannot see
    return (
        cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and "__setstate__" not in dir(cls)
        or dataclasses.is_dataclass(cls)
    )


def _is_ndarray(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


__all__ = ["Encoder", "global_names", "module_imports", "reference_of"]
