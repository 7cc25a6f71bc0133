"""Seam: torch's operator objects (``torch._ops``), custom-op definitions and FX's naming of targets.

A graph's ``call_function`` targets are ``OpOverload`` / ``OpOverloadPacket`` (aten and
custom ops), ``HigherOrderOperator`` (``cond``, checkpointing, ...) or plain functions.
pt2kit names them (``aten.relu.default``, ``torch.ops.higher_order.cond``), finds which
user function defined a custom op (``torch._library.custom_ops.OPDEFS``), and writes
FX's import block for a graph's code (``torch.fx.graph_module._format_import_block``).

opcheck/ takes "the op" in any form a user holds it -- an ``OpOverload``, a packet, the
``CustomOpDef`` that ``torch.library.custom_op`` returns (its overload in ``_opoverload``,
its name in ``_qualname``) -- and reads its schema: which arguments it declares mutable
(``torch._library.utils.zip_schema``) and whether it has a fake kernel
(``torch._library.utils.has_fake_kernel``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._ops.OpOverload/OpOverloadPacket/HigherOrderOperator (_schema, _opname, _overloadname, _qualified_op_name), "
        "torch._library.custom_ops.OPDEFS / CustomOpDef (_qualname, _opoverload), torch._library.utils.zip_schema / has_fake_kernel, "
        "torch.fx.node._get_qualified_name, torch.fx.graph_module._format_import_block, "
        "torch.autograd.grad_mode._enter_inference_mode / _exit_inference_mode"
    ),
    features=("reading and writing graphs", "custom ops in repros", "opcheck"),
)


def probe() -> None:
    import torch

    relu = torch.ops.aten.relu.default
    if not is_overload(relu) or overload_name(relu) != ("aten", "relu", "default"):
        raise AttributeError("aten overloads no longer expose namespace/_opname/_overloadname")
    if not is_packet(torch.ops.aten.relu) or packet_name(torch.ops.aten.relu) != ("aten", "relu"):
        raise AttributeError("op packets no longer expose _qualified_op_name")
    if not is_higher_order(torch.ops.higher_order.cond) or torch.ops.higher_order.cond.name() != "cond":
        raise AttributeError("higher-order ops changed")
    if higher_order_module(torch.ops.higher_order.cond) is None:
        raise AttributeError("a higher-order op's class no longer says which module registers it")
    if qualified_name(torch.sin) != "torch.sin":
        raise AttributeError("fx's _get_qualified_name changed")
    from torch._library.custom_ops import OPDEFS

    if not hasattr(OPDEFS, "get"):
        raise TypeError("OPDEFS is no longer a mapping")
    import_block({"torch": torch})
    import inspect

    from torch._library.custom_ops import CustomOpDef

    if not isinstance(CustomOpDef.__dict__.get("_qualname"), property):
        raise AttributeError("CustomOpDef._qualname is gone")
    if "self._opoverload = " not in inspect.getsource(CustomOpDef):
        raise AttributeError("CustomOpDef no longer keeps its OpOverload in _opoverload")
    add_ = torch.ops.aten.add_.Tensor
    arguments = schema_arguments(add_, (torch.ones(1), torch.ones(1)), {"alpha": 1})
    if [(name, mutable) for name, _value, mutable in arguments] != [("self", True), ("other", False), ("alpha", False)]:
        raise AttributeError(f"zip_schema no longer pairs aten.add_ with its arguments as expected: {arguments}")
    if not has_fake_kernel(torch.ops.aten.sin.default):
        raise AttributeError("has_fake_kernel says aten.sin has no fake kernel")
    from torch.autograd import grad_mode

    if not (switches_mode(grad_mode._enter_inference_mode) and switches_mode(grad_mode._exit_inference_mode)):
        raise AttributeError("torch.autograd.grad_mode's inference-mode switches moved")
    from torch.amp import autocast_mode

    if not leaves_mode(autocast_mode._enter_autocast, autocast_mode._exit_autocast):
        raise AttributeError("torch.amp.autocast_mode's switches moved")


def is_overload(target: Any) -> bool:
    import torch

    return isinstance(target, torch._ops.OpOverload)


def is_packet(target: Any) -> bool:
    import torch

    return isinstance(target, torch._ops.OpOverloadPacket)


def is_higher_order(target: Any) -> bool:
    import torch

    return isinstance(target, torch._ops.HigherOrderOperator)


def overload_name(target: Any) -> tuple[str, str, str]:
    """``(namespace, op, overload)`` of an ``OpOverload``."""
    return target.namespace, target._opname, target._overloadname


def packet_name(target: Any) -> tuple[str, str]:
    """``(namespace, op)`` of an ``OpOverloadPacket``."""
    namespace, name = target._qualified_op_name.split("::")
    return namespace, name


def schema_name(target: Any) -> str:
    """``namespace::op`` of an overload or a packet."""
    return target._schema.name if is_overload(target) else target._qualified_op_name


def custom_op_function(qualname: str) -> Any:
    """The Python function ``torch.library.custom_op`` decorated for ``namespace::op``, if any."""
    from torch._library.custom_ops import OPDEFS

    return getattr(OPDEFS.get(qualname), "_init_fn", None)


def qualified_name(fn: Any) -> str:
    """FX's name for a function target (``torch.sin``, ``_operator.add``); raises for lambdas and the like."""
    from torch.fx.node import _get_qualified_name

    return _get_qualified_name(fn)


def import_block(globals_: dict[str, Any]) -> str:
    """The import lines FX's generated code needs for ``globals_``."""
    from torch.fx.graph_module import _format_import_block
    from torch.package import sys_importer

    return _format_import_block(globals_, sys_importer)


def imports_and_definitions(globals_: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """:func:`import_block`, and the source of each function in ``globals_`` that no import reaches, by name.

    A graph may call a function defined inside another one (dynamo's
    ``_lower_version_count_by_1`` for ``x.data = y``, a local function the program allowed
    in the graph): one that reads no variable of the function around it and no global
    but ``torch`` is defined in the repro from its own source. Anything else that cannot
    be imported raises, as FX's import block does.
    """
    from torch.fx.graph_module import _format_import_block
    from torch.package import sys_importer

    lines: set[str] = set()
    definitions: dict[str, str] = {}
    for name, value in globals_.items():
        try:
            line = _format_import_block({name: value}, sys_importer)
            module, dot, attribute = line.removeprefix("from ").partition(" import ")
            if dot and "." in attribute.split(" as ")[0]:  # (a method: ``from torch._C import TensorBase.set_``)
                path, _, bound = attribute.partition(" as ")
                head, _, rest = path.partition(".")
                line = f"{bound or path} = __import__({module!r}, fromlist=[{head!r}]).{head}.{rest}"
            lines.add(line)
        except Exception:
            source = standalone_source(value)
            if source is None:
                raise
            definitions[name] = source if value.__name__ == name else f"{source}\n{name} = {value.__name__}"
    return "\n".join(sorted(lines)), definitions


def standalone_source(fn: Any) -> str | None:
    """The source of a plain function that needs nothing but ``torch`` and builtins to run, else None."""
    import builtins
    import dis
    import inspect
    import textwrap

    if not inspect.isfunction(fn) or fn.__code__.co_freevars or fn.__name__ == "<lambda>":
        return None
    loaded = {i.argval for i in dis.get_instructions(fn) if i.opname == "LOAD_GLOBAL"}
    if any(name != "torch" and not hasattr(builtins, name) for name in loaded):
        return None
    try:  # (a function a repro defined: its text as the repro wrote it, minifier.repro.files.exec_repro)
        source = textwrap.dedent(getattr(fn, "__pt2kit_source__", None) or inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    return source.rstrip() if source.startswith("def ") else None


#: The module that registers Inductor's own prims (``prims._low_memory_max_pool_with_offsets``...):
#: a graph that holds one needs it imported, torch alone does not import it.
INDUCTOR_PRIMS = "torch._inductor.inductor_prims"


def needs_inductor_prims(target: Any) -> bool:
    """Is ``target`` a prim that only exists once Inductor's prims module is imported?"""
    if not is_overload(target) or target.namespace != "prims":
        return False
    import importlib

    module = importlib.import_module(INDUCTOR_PRIMS)
    # the module binds them under short names (``random`` is ``prims.inductor_random``)
    return any(is_overload(value) and value._opname == target._opname for value in vars(module).values())


def higher_order_module(target: Any) -> str | None:
    """The module that defines higher-order op ``target``'s class, and registers it as ``torch.ops.higher_order.<name>``
    when imported (``register_hook``'s is not imported by ``import torch``); None: not a higher-order op of torch's
    own, or one of the generic class, whose module says nothing (a program's own op rides with its module)."""
    module = type(target).__module__ if is_higher_order(target) else ""
    return module if module.startswith("torch.") and module != "torch._ops" else None


def load_inductor_prims() -> None:
    """Register Inductor's own prims (so ``torch.ops.prims.<name>`` resolves)."""
    import importlib

    importlib.import_module(INDUCTOR_PRIMS)


# -- what a user may hand over as "the op" (opcheck/) --------------------------------------


def is_custom_op_def(op: Any) -> bool:
    """What ``torch.library.custom_op`` returns (a ``CustomOpDef``)."""
    from torch._library.custom_ops import CustomOpDef

    return isinstance(op, CustomOpDef)


def custom_op_def_name(op: Any) -> str:
    """``namespace::op`` of a ``CustomOpDef``."""
    return op._qualname


def custom_op_def_overload(op: Any) -> Any:
    """The ``OpOverload`` a ``CustomOpDef`` registered."""
    return op._opoverload


def schema(op: Any) -> Any:
    """The ``torch.FunctionSchema`` of an overload."""
    return op._schema


def schema_arguments(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """Each argument of a call as ``(schema name, value, declared mutable)``, in schema order."""
    from torch._library.utils import zip_schema

    return [
        (info.name, value, info.alias_info is not None and info.alias_info.is_write)
        for info, value in zip_schema(op._schema, args, kwargs)
    ]


def has_fake_kernel(op: Any) -> bool:
    """Whether the overload has a fake (meta) kernel torch.compile can trace with."""
    from torch._library.utils import has_fake_kernel as torch_has_fake_kernel

    return bool(torch_has_fake_kernel(op))


#: Functions dynamo records that switch a global mode on or off for the ops between them
#: (``with torch.inference_mode():`` becomes ``_enter_inference_mode`` ... ``_exit_inference_mode``).
#: FX does not count the inference-mode pair as side effects, so its dead-code rules drop them.
MODE_SWITCHES = (
    "torch.autograd.grad_mode._enter_inference_mode",
    "torch.autograd.grad_mode._exit_inference_mode",
    # a vmap level traced into the graph (``create_block_mask``'s): the batched ops between them need it,
    # and the decompositions torch loads for them first
    "torch._functorch.predispatch._vmap_increment_nesting",
    "torch._functorch.predispatch._vmap_decrement_nesting",
    "torch._functorch.predispatch.lazy_load_decompositions",
    "torch._C._functorch._vmap_increment_nesting",
    "torch._C._functorch._vmap_decrement_nesting",
)


#: The switches dynamo records around a ``with`` block, each entering one and the one leaving it (which
#: takes the entering one's value): ``with torch.autocast(...)`` and ``with torch.inference_mode()``.
MODE_PAIRS = {
    "torch.amp.autocast_mode._enter_autocast": "torch.amp.autocast_mode._exit_autocast",
    MODE_SWITCHES[0]: MODE_SWITCHES[1],
}


#: Switches that open a nesting level, and the one that closes the innermost level open (no value
#: links the two: ``_vmap_decrement_nesting()`` takes no argument).
NESTING = {
    MODE_SWITCHES[2]: MODE_SWITCHES[3],
    MODE_SWITCHES[5]: MODE_SWITCHES[6],
}


def mode_brackets(nodes: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Each fx node in ``nodes`` (in graph order) that enters a mode, with the one among them that leaves it.

    A pair by value for a ``with`` block (:data:`MODE_PAIRS`: the leaving switch reads the
    entering one's value), by nesting for a vmap level (:data:`NESTING`: the innermost open
    level closes). A switch whose partner is not among ``nodes`` is in no pair.
    """
    names = {id(n): _name_or_none(n.target) for n in nodes if n.op == "call_function"}
    pairs: list[tuple[Any, Any]] = []
    open_levels: dict[str, list[Any]] = {}
    members = {id(n) for n in nodes}
    for node in nodes:
        name = names.get(id(node))
        if name in MODE_PAIRS:
            pairs += [(node, u) for u in node.users if id(u) in members and names.get(id(u)) == MODE_PAIRS[name]][:1]
        elif name in NESTING:
            open_levels.setdefault(NESTING[name], []).append(node)
        elif name in open_levels and open_levels[name]:
            pairs.append((open_levels[name].pop(), node))
    return pairs


def enters_mode(target: Any) -> bool:
    """Does calling ``target`` enter a mode (or open a nesting level) that another switch leaves?"""
    name = _name_or_none(target)
    return name in MODE_PAIRS or name in NESTING


def _name_or_none(target: Any) -> str | None:
    try:
        return qualified_name(target)
    except Exception:  # noqa: BLE001 - a callable torch cannot name is not one of torch's switches
        return None


def leaves_mode(enter: Any, exit: Any) -> bool:
    """Is ``exit`` the switch that leaves the mode ``enter`` enters (both call targets)?"""
    try:
        return MODE_PAIRS.get(qualified_name(enter)) == qualified_name(exit)
    except Exception:  # noqa: BLE001 - a callable torch cannot name is not one of torch's switches
        return False


def switches_mode(target: Any) -> bool:
    """Does calling ``target`` change a mode the next ops run under (an effect even when nothing reads its value)?"""
    try:
        return qualified_name(target) in MODE_SWITCHES
    except Exception:  # noqa: BLE001 - a callable torch cannot name is not one of torch's switches
        return False
