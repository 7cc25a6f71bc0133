"""Recovering the user's own definitions a repro needs, as source code it can carry.

A repro runs on the compiler engineer's machine with torch alone, plus the user's
modules the failure needs. A backend or custom op that lives in an importable
module is imported by name. But many live where no import can reach them:

- in the user's *script*: importing the script runs the whole program again (and a
  script without ``if __name__ == "__main__":`` does exactly that);
- in a ``lambda``, a ``functools.partial`` or a closure: they have no name at all.

For these, pt2kit carries the definition's source into the repro, under
``definitions`` (:attr:`minifier.unit.case.GraphCase.definitions`):

- :func:`slice_script` keeps the top-level statements of a script that define the
  names asked for, everything those definitions use, and the registrations made on
  them (``@op.register_fake``, ``lib.impl(...)``, ``register_backend(...)``), and
  drops the rest: the program itself never runs;
- :func:`backend_definition` turns a backend object into code that binds it to
  :data:`BACKEND_NAME`: a lambda's expression, a closure with its (literal) cell
  values, a partial of something recoverable with literal arguments, or a slice of
  the script for a function defined there.

When a definition cannot be recovered (a closure over a tensor, a callable object),
:class:`Unrecoverable` says what the user should do instead.
"""

from __future__ import annotations

import ast
import functools
import inspect
import symtable
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pt2kit.seams import aot_autograd
from ..unit.case import BACKEND_NAME


#: Methods whose call on a defined name registers something on it (custom-op kernels,
#: fake kernels, autograd formulas, library impls, backends).
REGISTRATION_METHODS = {
    "register_fake",
    "register_kernel",
    "register_autograd",
    "register_torch_dispatch",
    "register_autocast",
    "register_vmap",
    "impl",
    "define",
    "fallback",
    "impl_abstract",
    "_register_fake",
    "register_backend",
}


class Unrecoverable(Exception):
    """The source of a definition the repro needs cannot be carried into it."""


@dataclass
class _Statement:
    node: ast.stmt
    text: str
    binds: set[str]
    uses: set[str]
    strings: set[str]


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test))


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    names: set[str] = set()
    for target in targets:  # (``a.b = ...`` binds nothing: it uses ``a``)
        names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _free_globals(text: str) -> set[str]:
    """Module-level names a statement reads: in its own expressions and, as globals, in its bodies."""
    try:
        table = symtable.symtable(text, "<definition>", "exec")
    except SyntaxError:
        return set()
    found = {s.get_name() for s in table.get_symbols() if s.is_referenced()}

    def visit(t: symtable.SymbolTable) -> None:
        found.update(s.get_name() for s in t.get_symbols() if s.is_global())
        for child in t.get_children():
            visit(child)

    for child in table.get_children():
        visit(child)
    return found


def _without_pt2kit(node: ast.stmt) -> ast.stmt | None:
    """An import statement without pt2kit's own packages (None: it imports nothing else).

    A script that calls pt2kit's API imports it beside torch (``import torch, minifier``);
    a repro carries the script's imports and must run with torch alone.
    """
    from pt2kit.script import PT2KIT_PACKAGES

    if isinstance(node, ast.ImportFrom):
        return None if (node.module or "").split(".")[0] in PT2KIT_PACKAGES and not node.level else node
    if isinstance(node, ast.Import):
        names = [alias for alias in node.names if alias.name.split(".")[0] not in PT2KIT_PACKAGES]
        return None if not names else node if len(names) == len(node.names) else ast.Import(names=names)
    return node


def _statements(source: str) -> list[_Statement]:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    out = []
    for original in tree.body:
        if _is_main_guard(original) or (node := _without_pt2kit(original)) is None:
            continue
        first = min([original.lineno, *(d.lineno for d in getattr(original, "decorator_list", []))])
        text = "".join(lines[first - 1 : original.end_lineno]) if node is original else ast.unparse(node) + "\n"
        binds = _bound_names(node)
        uses = _free_globals(textwrap.dedent(text))
        if not isinstance(node, ast.AugAssign):
            uses -= binds
        strings = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        out.append(_Statement(node, text, binds, uses, strings))
    return out


def _attribute_chain(node: ast.AST) -> list[str]:
    """``["torch", "ops", "ns"]`` for ``torch.ops.ns``; empty for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def ops_named_in(source: str) -> list[str]:
    """``ns::op`` for each ``torch.ops.ns.op`` that ``source`` (a block of code, indented or not) names, in order.

    Code with no graph yet (a frame dynamo fails on) needs them defined; none where it is no whole statement.
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    chains = (_attribute_chain(node) for node in ast.walk(tree))
    return list(dict.fromkeys(f"{c[2]}::{c[3]}" for c in chains if len(c) >= 4 and c[:2] == ["torch", "ops"]))


def _configures_torch(statement: _Statement, namespaces: set[str]) -> bool:
    """A call of torch's own on a custom op, its result unused, reading nothing but torch
    (``torch._higher_order_ops.effects._register_effectful_op(torch.ops.ns.op.default, ...)``): a table entry.

    The op is an argument, not called (``torch.testing.assert_close(torch.ops.ns.op(x), ref)`` is the
    program checking its answer), and no value of the program is read.
    """
    node = statement.node
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) or not statement.uses <= {"torch"}:
        return False
    call = node.value
    named = [_attribute_chain(a) for a in [*call.args, *(k.value for k in call.keywords)]]
    names_op = any(len(c) >= 4 and c[:2] == ["torch", "ops"] and c[2] in namespaces for c in named)
    strings = {a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    mentions = any(text == ns or text.startswith(f"{ns}::") for text in strings for ns in namespaces)
    return _attribute_chain(call.func)[:1] == ["torch"] and (names_op or mentions)


def _registers_on(statement: _Statement, defined: set[str]) -> bool:
    """Does this statement register something on an already kept name (``@rowsum.register_fake``)?"""
    node = statement.node
    if isinstance(node, ast.Assign) and all(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets):
        # a patch: ``torch.some.module.function = user_function``
        return bool({n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & defined)
    calls: list[ast.expr] = list(getattr(node, "decorator_list", []))
    if isinstance(node, ast.Expr):
        calls.append(node.value)
    for call in calls:
        func = call.func if isinstance(call, ast.Call) else call
        if isinstance(func, ast.Attribute) and func.attr in REGISTRATION_METHODS:
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in defined:
                return True
        if isinstance(call, ast.Call) and _call_name(call) in ("register_backend", "setattr"):
            if {n.id for n in ast.walk(call) if isinstance(n, ast.Name)} & defined:
                return True
    return False


def _defines_something(node: ast.stmt) -> bool:
    """A definition or a registration, not a use (``print(torch.compile(f, backend="name")(x))``)."""
    if isinstance(
        node,
        (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom),
    ):
        return True
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and _call_name(node.value) in REGISTRATION_METHODS
    )


def _assigns(node: ast.stmt) -> bool:
    return isinstance(node, (ast.Assign, ast.AnnAssign))


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def slice_script(source: str, names: Iterable[str] = (), namespaces: Iterable[str] = ()) -> str:
    """The top-level statements of ``source`` that define ``names`` (and custom ops of ``namespaces``).

    Kept: statements binding a needed name, transitively what they use, registrations
    made on kept names, and statements that mention a custom-op namespace
    (``"myns::op"``, ``Library("myns", ...)``), calls of torch's own among them
    (``torch._higher_order_ops.effects._register_effectful_op(torch.ops.myns.op.default, ...)``:
    a table entry the op needs, pytorch#190908). Dropped: everything else, including the
    ``if __name__ == "__main__":`` block. The result is in the script's order.
    """
    statements = _statements(source)
    namespaces = set(namespaces)
    needed = set(names)
    kept: set[int] = set()
    for i, s in enumerate(statements):
        mentions = any(text == ns or text.startswith(f"{ns}::") for text in s.strings for ns in namespaces)
        # (a function that calls torch.ops.myns.op is the program using the op, not its definition)
        if (mentions and _defines_something(s.node)) or _configures_torch(s, namespaces):
            kept.add(i)
    # Names that carry a namespace (``test_ns = "myns"``, then ``lib = Library(test_ns, ...)``):
    # definitions that use them are the op's definitions too. An op's own function is no carrier:
    # what calls it (``def f``, ``out = f(x)``) is the user's program, not the op's definition.
    carriers = {name for i in kept if _assigns(statements[i].node) for name in statements[i].binds}
    changed = True
    while changed:
        changed = False
        needed |= {name for i in kept for name in statements[i].uses}
        defined = {name for i in kept for name in statements[i].binds}
        for i, s in enumerate(statements):
            if i in kept:
                continue
            carries = bool(s.uses & carriers) and _defines_something(s.node)
            if (
                (s.binds & needed and not isinstance(s.node, ast.Expr))
                or _registers_on(s, defined | set(names))
                or carries
            ):
                kept.add(i)
                carriers |= s.binds if carries and _assigns(s.node) else set()
                changed = True
    future = [
        i for i, s in enumerate(statements) if isinstance(s.node, ast.ImportFrom) and s.node.module == "__future__"
    ]
    kept |= set(future) if kept else set()
    return "\n".join(statements[i].text.rstrip("\n") + "\n" for i in sorted(kept))


def merge_definitions(*parts: str) -> str:
    """Several pieces of carried source as one, each top-level statement once, in order."""
    seen: set[str] = set()
    kept = []
    for part in parts:
        if not part.strip():
            continue
        for statement in _statements(part):
            text = statement.text.strip("\n")
            if text not in seen:
                seen.add(text)
                kept.append(text + "\n")
    return "\n".join(kept)


def _literal_repr(value: Any) -> str:
    text = repr(value)
    try:
        if ast.literal_eval(text) == value:
            return text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    raise Unrecoverable(f"a captured value of type {type(value).__name__} has no literal form")


def _function_source(fn: Callable[..., Any]) -> str:
    """The source of ``fn`` alone: a ``def`` (dedented) or a lambda's expression."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise Unrecoverable(f"the source of {getattr(fn, '__qualname__', fn)!r} is not available ({e})") from None
    text = textwrap.dedent("".join(lines))
    if fn.__name__ != "<lambda>":
        return text
    # A lambda's lines hold the statement around it (or part of it): find the lambda.
    offset = 0
    try:
        tree = ast.parse(text)
    except SyntaxError:
        text, offset = "(\n" + text + "\n)", 1
        try:
            tree = ast.parse(text)
        except SyntaxError:
            raise Unrecoverable(
                f"cannot parse the lines around the lambda at {fn.__code__.co_filename}:{start}"
            ) from None
    arguments = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Lambda)
        and n.lineno - offset == fn.__code__.co_firstlineno - start + 1
        and tuple(a.arg for a in n.args.args) == arguments
    ]
    if len(found) != 1:
        raise Unrecoverable(
            f"cannot tell which lambda at {fn.__code__.co_filename}:{fn.__code__.co_firstlineno} is the backend"
        )
    return ast.get_source_segment(text, found[0]) or ast.unparse(found[0])


def _aot_autograd_expression(compilers: dict[str, Any], script_source: str | None) -> tuple[str, str]:
    """``aot_autograd(fw_compiler=..., ...)`` made inline in the call to ``torch.compile``: the call again, each compiler by its own expression.

    AOTAutograd fills in what the user left out at its first compile (``inference_compiler``
    is the forward's, ``bw_compiler`` the forward's, wrapped): only what differs is written.
    """
    forward = aot_autograd.user_compiler(compilers.get("fw_compiler"))
    preludes, arguments = ["from torch._dynamo.backends.common import aot_autograd\n"], []
    for key, value in compilers.items():
        value = aot_autograd.user_compiler(value)
        if value is None or (key in ("bw_compiler", "inference_compiler") and value is forward):
            continue
        if key == "decompositions" and not value:
            continue
        if callable(value):
            prelude, expression = _expression(value, script_source)
            preludes.append(prelude)
        else:
            expression = _literal_repr(value)
        arguments.append(f"{key}={expression}")
    return merge_definitions(*preludes), f"aot_autograd({', '.join(arguments)})"


def _instance_expression(obj: Any, script_source: str | None) -> tuple[str, str]:
    """A callable object: its class (imported, or sliced from the script) and its literal state."""
    cls = type(obj)
    if "<" in cls.__qualname__ or cls.__module__ == "builtins":
        raise Unrecoverable(f"a backend of type {cls.__qualname__} cannot be written as source")
    state = {k: _literal_repr(v) for k, v in vars(obj).items()} if hasattr(obj, "__dict__") else {}
    if cls.__module__ in ("__main__", "__mp_main__"):
        if script_source is None:
            raise Unrecoverable("its class is defined in a script whose source is not available")
        prelude = slice_script(script_source, [cls.__qualname__.split(".")[0]])
    else:
        prelude = f"from {cls.__module__} import {cls.__qualname__.split('.')[0]}\n"
    name = f"{cls.__qualname__.split('.')[-1].lower()}_object"
    # the object is made without calling __init__, then given its fields
    made = f"{name} = {cls.__qualname__}.__new__({cls.__qualname__})\n" + "".join(
        f"{name}.{k} = {v}\n" for k, v in state.items()
    )
    return prelude + made, name


def _globals_used(code: Any) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _globals_used(const)
    return names


def _context_for(fn: Callable[..., Any], script_source: str | None) -> str:
    """Code that defines the globals ``fn`` reads: a slice of its script, or imports from its module."""
    module = getattr(fn, "__module__", None)
    used = _globals_used(fn.__code__) & set(getattr(fn, "__globals__", {}))
    if not used:
        return ""
    if module in ("__main__", "__mp_main__") or module is None:
        if script_source is None:
            raise Unrecoverable("it reads globals of a script whose source is not available")
        return slice_script(script_source, used)
    return "".join(f"from {module} import {name}\n" for name in sorted(used))


def backend_definition(fn: Callable[..., Any], script_source: str | None) -> str:
    """Code that binds a backend with no importable name to :data:`BACKEND_NAME`.

    ``script_source`` is the text of the user's script, for definitions that live in
    it (or read its globals). Raises :class:`Unrecoverable` with the reason.
    """
    return value_definition(fn, BACKEND_NAME, script_source)


def value_definition(value: Any, name: str, script_source: str | None) -> str:
    """Code that binds ``name`` to a function-like value (a backend, a config pass); see :func:`backend_definition`."""
    prelude, expression = _expression(value, script_source)
    return prelude + f"{name} = {expression}\n"


def _bound_in_script(obj: Any, script_source: str | None) -> str | None:
    """The name the script's top level binds ``obj`` to (``flaky = aot_autograd(fw_compiler=...)``), if any."""
    import re
    import sys

    main = sys.modules.get("__main__")
    if script_source is None or main is None or inspect.isfunction(obj):
        return None
    for name, value in list(vars(main).items()):
        if (
            value is obj
            and not name.startswith("_")
            and re.search(rf"^{re.escape(name)}\s*[:=]", script_source, re.MULTILINE)
        ):
            return name
    return None


def _expression(fn: Any, script_source: str | None) -> tuple[str, str]:
    """(code defining what the expression needs, an expression for ``fn``)."""
    bound = _bound_in_script(fn, script_source)  # the statement that made it, sliced from the script
    if bound is not None and script_source is not None:  # (a name is bound only in a script's source)
        return slice_script(script_source, [bound]), bound
    if isinstance(fn, functools.partial):
        prelude, inner = _expression(fn.func, script_source)
        args = [_literal_repr(a) for a in fn.args] + [f"{k}={_literal_repr(v)}" for k, v in fn.keywords.items()]
        return "import functools\n" + prelude, f"functools.partial({', '.join([inner, *args])})"
    if (compilers := aot_autograd.compiler_kwargs(fn)) is not None:
        return _aot_autograd_expression(compilers, script_source)
    if not inspect.isfunction(fn) and not isinstance(fn, type) and callable(fn) and inspect.isclass(type(fn)):
        return _instance_expression(fn, script_source)
    if not inspect.isfunction(fn):
        raise Unrecoverable(f"a backend of type {type(fn).__name__} (not a function) cannot be written as source")
    module = fn.__module__
    qualname = fn.__qualname__
    if "<" not in qualname and module not in ("__main__", "__mp_main__"):
        return f"from {module} import {qualname.split('.')[0]}\n", qualname
    if "<" not in qualname:  # a top-level function of the script
        if script_source is None:
            raise Unrecoverable("it is defined in a script whose source is not available")
        return slice_script(script_source, [qualname.split(".")[0]]), qualname
    source = _function_source(fn)
    cells = ""
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            raise Unrecoverable(f"its closure variable {name!r} is not set") from None
        if inspect.isfunction(value):
            prelude, expr = _expression(value, script_source)
            cells += prelude + f"{name} = {expr}\n"
        else:
            cells += f"{name} = {_literal_repr(value)}  # captured by the closure\n"
    context = _context_for(fn, script_source)
    if fn.__name__ == "<lambda>":
        return context + cells, f"({source})"
    return context + cells + source, fn.__name__
