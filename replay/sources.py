"""How a record gets code back at replay: by reference, or from the program's own source.

A record never pickles code. Each function or class a frame reaches is found again in
one of two ways, and this module decides which and keeps the books:

- **by reference** -- :func:`reference_of` gives ``module:qualname`` when importing it
  in the replaying process gives back *the very same object* (torch, the standard
  library, installed packages, the user's importable modules). Only modules the program
  already imported are looked in: pt2kit never imports on a program's behalf. The
  ``sys.path`` root a user module needs is noted (:meth:`SourceBook.note_import`);
- **by source** -- the program's own code (``__main__``, the module of the recorded
  frame) may not be importable at all. :class:`SourceBook` keeps its *source block*
  (the ``def`` or ``class`` statement as written) with what compiling it again needs:
  the file and line, ``from __future__`` flags, the class a method sits in, the free
  variables a closure binds, the module's imports. A function's block is compiled
  straight away and must give back the bytecode that ran (:mod:`replay.rebuild` does the
  compiling at replay too); a file edited since it was imported is refused here, not
  discovered at replay.

Source blocks read globals, and replay has to provide them: every module whose code a
block reads has a *namespace* (its name, file and the globals recorded from it), and
:func:`global_names` finds, from the bytecode, which globals a block loads. The book
only *queues* them (:attr:`SourceBook.pending`); describing their values is the
encoder's job (:mod:`replay.values`), which records them until the queue is empty.
"""

from __future__ import annotations

import dis
import functools
import inspect
import sys
import types
from typing import Any

from . import rebuild

_GLOBAL_OPS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"}
_FUTURE_FLAGS = 0
for _feature in __import__("__future__").all_feature_names:
    _FUTURE_FLAGS |= getattr(__import__("__future__"), _feature).compiler_flag

#: Modules whose callables are always referenced by name, never rebuilt.
_SEARCH_NAMESPACES = (
    "torch",
    "torch.nn.functional",
    "torch.linalg",
    "torch.fft",
    "torch.special",
    "operator",
    "math",
    "builtins",
)


class SourceBook:
    """The source blocks of one record, the namespaces their globals come from, and the imports it needs."""

    def __init__(self) -> None:
        self.sources: list[dict[str, Any]] = []
        self.namespaces: dict[str, dict[str, Any]] = {}
        #: module name -> the ``sys.path`` root it is imported from at replay.
        self.imports: dict[str, str] = {}
        #: (namespace key, global name) still to be recorded, in order.
        self.pending: list[tuple[str, str]] = []
        self._source_index: dict[tuple[Any, ...], int] = {}
        self._ns_of: dict[int, str] = {}
        self._ns_dicts: dict[str, dict[str, Any]] = {}  # also keeps each dict alive, so its id stays unique

    def namespace_key(self, globals_dict: dict[str, Any]) -> str:
        """The key of the namespace that is this module's globals (made on first sight)."""
        key = self._ns_of.get(id(globals_dict))
        if key is None:
            module = str(globals_dict.get("__name__", "?"))
            key = module if module not in self.namespaces else f"{module}#{len(self.namespaces)}"
            self._ns_of[id(globals_dict)] = key
            self._ns_dicts[key] = globals_dict
            self.namespaces[key] = {"module": module, "file": globals_dict.get("__file__"), "globals": {}}
        return key

    def scope(self, key: str) -> dict[str, Any]:
        """The live globals dict of the namespace ``key``."""
        return self._ns_dicts[key]

    def queue_globals(self, key: str, names: list[str]) -> None:
        self.pending.extend((key, name) for name in names)

    def function_source(self, code: types.CodeType, globals_dict: dict[str, Any]) -> int:
        """Keep the source block of a function's ``code``, check that it rebuilds, queue its globals.

        Raises ``OSError``/``TypeError`` when the source cannot be found, ``rebuild.RebuildError``
        when it no longer compiles to the bytecode that ran.
        """
        cache_key = ("function", code.co_filename, code.co_firstlineno, code.co_name)
        if cache_key in self._source_index:
            return self._source_index[cache_key]
        lines, start = inspect.getsourcelines(code)
        qualname = getattr(code, "co_qualname", code.co_name)
        parts = qualname.split(".")
        # a method compiles inside a class of its name (super(), name mangling); a closure
        # inside a factory that binds its free variables
        wrap_class = parts[-2] if len(parts) >= 2 and parts[-2] != "<locals>" else None
        freevars = [v for v in code.co_freevars if not (wrap_class and v == "__class__")]
        entry: dict[str, Any] = {
            "kind": "function",
            "name": code.co_name,
            "qualname": qualname,
            "module": globals_dict.get("__name__"),
            "namespace": self.namespace_key(globals_dict),
            "file": code.co_filename,
            "firstlineno": max(start, 1),
            "code_firstlineno": code.co_firstlineno,
            "text": "".join(lines),
            "wrap_class": wrap_class,
            "freevars": freevars,
            "flags": code.co_flags & _FUTURE_FLAGS,
            "imports": module_imports(code.co_filename),
        }
        module_code = rebuild.compile_source(entry)
        rebuilt = rebuild.find_code(module_code, code.co_name, code.co_firstlineno)
        if not rebuild.same_bytecode(rebuilt, code):
            raise rebuild.RebuildError(
                f"the source of {qualname} in {code.co_filename} no longer compiles to the code that ran (was the file edited?)"
            )
        index = self._keep(cache_key, entry)
        self.queue_globals(entry["namespace"], global_names(module_code, module_level=False))
        return index

    def class_source(self, cls: type, globals_dict: dict[str, Any]) -> int:
        """Keep the source block of a class defined at the top of its module, queue its globals.

        Raises ``OSError``/``TypeError`` when the source cannot be found, ``SyntaxError`` or
        ``rebuild.RebuildError`` when it does not compile.
        """
        lines, start, filename = class_lines(cls, globals_dict)
        cache_key = ("class", filename, start, cls.__name__)
        if cache_key in self._source_index:
            return self._source_index[cache_key]
        entry: dict[str, Any] = {
            "kind": "class",
            "name": cls.__name__,
            "qualname": cls.__qualname__,
            "module": cls.__module__,
            "namespace": self.namespace_key(globals_dict),
            "file": filename,
            "firstlineno": start,
            "code_firstlineno": None,
            "text": "".join(lines),
            "wrap_class": None,
            "freevars": [],
            "flags": module_flags(globals_dict),
            "imports": module_imports(filename),
        }
        module_code = rebuild.compile_source(entry)
        index = self._keep(cache_key, entry)
        self.queue_globals(entry["namespace"], [n for n in global_names(module_code) if n != cls.__name__])
        return index

    def note_import(self, module_name: str) -> None:
        """Remember the sys.path root a user module needs (none for torch, stdlib, site-packages)."""
        top = module_name.split(".")[0]
        if top in self.imports or top in sys.builtin_module_names:
            return
        from pt2kit.script import module_import_spec

        spec = module_import_spec(module_name)
        if spec is not None:
            self.imports[module_name] = spec[1]

    def _keep(self, cache_key: tuple[Any, ...], entry: dict[str, Any]) -> int:
        index = len(self.sources)
        self.sources.append(entry)
        self._source_index[cache_key] = index
        return index


def global_names(code: types.CodeType, *, module_level: bool = True) -> list[str]:
    """Every global name ``code`` and the code nested in it load or store, in order.

    ``module_level=False`` skips the outermost code object: for a function's source
    block that is the ``def`` statement itself (decorators, the name it binds), which
    replay never runs.
    """
    names: dict[str, None] = {}
    for current in rebuild.all_code_objects(code)[0 if module_level else 1 :]:
        for instruction in dis.get_instructions(current):
            if instruction.opname in _GLOBAL_OPS and isinstance(instruction.argval, str):
                names[instruction.argval] = None
    return list(names)


@functools.lru_cache(maxsize=256)
def module_imports(filename: str) -> list[str]:
    """Names a source file binds with ``import`` at module level (they change the bytecode of calls on them)."""
    import ast
    import linecache

    text = "".join(linecache.getlines(filename))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    names: dict[str, None] = {}
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = None
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = None
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return sorted(names)


def module_flags(globals_dict: dict[str, Any]) -> int:
    """The ``from __future__`` flags a module's code compiles with (``annotations``, the one that matters)."""
    annotations = globals_dict.get("annotations")
    import __future__

    feature = __future__.annotations
    return feature.compiler_flag if annotations is feature else 0


def reference_of(obj: Any) -> str | None:
    """``module:qualname`` that imports back to this very object, or None."""
    module = getattr(obj, "__module__", None)
    candidates = []
    qualname = getattr(obj, "__qualname__", None)
    name = getattr(obj, "__name__", None)
    if isinstance(module, str) and module != "__main__":
        if isinstance(qualname, str) and "<" not in qualname:
            candidates.append((module, qualname))
        if isinstance(name, str):
            candidates.append((module, name))
    if isinstance(name, str):
        candidates.extend((ns, name) for ns in _SEARCH_NAMESPACES)
    for module_name, attr in candidates:
        found = _lookup(module_name, attr)
        if found is obj:
            return f"{module_name}:{attr}"
    return None


def _lookup(module_name: str, qualname: str) -> Any:
    """``module.qualname`` if the program imported ``module`` (we never import on its behalf)."""
    obj: Any = sys.modules.get(module_name)
    if obj is None:
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            return None
    return obj


_MISSING = object()


__all__ = ["SourceBook", "global_names", "module_flags", "module_imports", "reference_of"]


def class_lines(cls: type, globals_dict: dict[str, Any]) -> tuple[list[str], int, str]:
    """The source lines of a class defined at the top of the module whose globals are ``globals_dict``, its first line
    and its file.

    ``inspect`` finds a class's file through ``sys.modules[cls.__module__]``: a script's module, once runpy has
    left it (a backward that fails after the frame returned is recorded then), is no longer there, and
    ``__main__`` is another file. The module's own ``__file__`` is read instead, and its last top-level
    definition of the class taken, the one its globals hold. Raises ``OSError`` where there is none.
    """
    import ast
    import linecache

    module = sys.modules.get(cls.__module__)
    if module is not None and getattr(module, "__dict__", None) is globals_dict:
        lines, start = inspect.getsourcelines(cls)
        return lines, start, inspect.getsourcefile(cls) or "<replay>"
    filename = globals_dict.get("__file__")
    source = linecache.getlines(filename) if isinstance(filename, str) else []
    if not source:
        raise OSError(f"no source file for the module of {cls.__qualname__}")
    found = [n for n in ast.parse("".join(source)).body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    if not found:
        raise OSError(f"could not find the class {cls.__name__} at the top of {filename}")
    node = found[-1]
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return source[start - 1 : node.end_lineno], start, str(filename)
