"""The unit pt2kit works on: one FX graph, its inputs, and how to run it through a stage.

A :class:`GraphCase` is everything needed to ask "does this graph still fail?":

- ``gm``: the graph, either a dynamo graph (torch-level ops, run through
  ``torch.compile(backend=...)``) or an AOTAutograd graph (aten ops; ``forward``,
  ``backward`` or ``inference``, run through the backend's inner compiler);
- ``inputs``: one :class:`GraphInput` per placeholder, holding the *real* value the
  program passed (values matter: a bug may only show on some data), the metadata
  of that value, and optionally a seed that replaces it by a random stand-in of the
  same shape, strides, dtype and ``requires_grad``;
- ``constants``: tensors the graph reads with ``get_attr``;
- the context that makes it fail: the final backend's name, the non-default
  compiler config, and the user modules that register custom backends or ops;
- ``context``: the state the program called the graph in, which its graph does not
  hold (:class:`CompileContext`: an outer ``torch.autocast``, the default dtype...).

Captured graphs, checkpoints, and the final ``repro.py`` are all the same thing on
disk: :mod:`minifier.repro.writer` renders a case as a runnable script and reads it back;
:func:`~minifier.unit.runtime.rand_tensor` makes the random stand-ins (a repro carries it).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from .copies import clone_tensor, storage_window, view_into
from .runtime import guarded_view, rand_tensor
from pt2kit.names import op_name
from pt2kit.seams import ops, special_tensors
from pt2kit.words import Word


class Boundary(Word):
    """Where a graph was taken: as dynamo hands it to the backend, or after AOTAutograd (a forward, backward
    or inference graph of aten ops)."""

    DYNAMO = "dynamo"
    AOT = "aot"


#: How a config value that is not a literal travels in :attr:`GraphCase.config`: a
#: one-key dict (itself a literal) naming how the repro gets the value back.
CONFIG_IMPORT = "pt2kit:import"  # {"pt2kit:import": "module:qualname"}: imported by reference
CONFIG_CARRIED = "pt2kit:carried"  # {"pt2kit:carried": name}: bound by the carried definitions
CONFIG_MISSING = "pt2kit:missing"  # {"pt2kit:missing": why}: the user must supply it


@dataclass(frozen=True)
class CompileContext:
    """The state around a compiled call that its graph does not hold, replayed around every run of it.

    A graph traced inside an outer ``with torch.autocast(...)`` holds no cast: AOTAutograd applies autocast while
    it traces, from the state at the call, and so does eager. A repro that calls the graph outside it compiles
    another program, and a wrong bf16 gradient passes every replay. The default dtype (tensors the graph creates),
    float32 matmul precision (TF32), deterministic algorithms (Inductor's fallbacks) and the thread count
    (Inductor's C++ kernels are written for it) change what compiles and what runs the same way. Read at the
    compile, inside the program's call (:meth:`current`); each field is at torch's default unless the program changed it.
    """

    autocast: tuple[tuple[str, str], ...] = ()  # (device type, dtype) of each device whose autocast is on
    default_dtype: str = "float32"
    matmul_precision: str = "highest"  # torch.get_float32_matmul_precision()
    deterministic: bool = False  # torch.are_deterministic_algorithms_enabled()
    threads: int = 0  # torch.get_num_threads() where the program set its own (0: its environment's)

    #: The devices whose autocast state is read.
    AUTOCAST_DEVICES = ("cpu", "cuda")

    @classmethod
    def current(cls) -> CompileContext:
        """The state right now (in a backend: the state the program's call was made in)."""
        autocast = tuple(
            (device, _dtype_name(torch.get_autocast_dtype(device)))
            for device in cls.AUTOCAST_DEVICES
            if torch.is_autocast_enabled(device)
        )
        return cls(
            autocast,
            _dtype_name(torch.get_default_dtype()),
            torch.get_float32_matmul_precision(),
            torch.are_deterministic_algorithms_enabled(),
            threads if (threads := torch.get_num_threads()) != (_threads_at_start or [environment_threads()])[0] else 0,
        )

    #: The global state a backward runs under, which a program may switch after the forward (besides autocast,
    #: usually left by then; the thread count is the process's).
    BACKWARD_FIELDS = ("default_dtype", "matmul_precision", "deterministic")
    #: How a repro sets each global field (``str.format`` of its value).
    SETTERS = {
        "default_dtype": "torch.set_default_dtype(torch.{})",
        "matmul_precision": "torch.set_float32_matmul_precision({!r})",
        "deterministic": "torch.use_deterministic_algorithms({!r})",
        "threads": "torch.set_num_threads({})",
    }

    def for_backward(self, forward: CompileContext) -> CompileContext | None:
        """This state, read as a backward starts, where it differs from ``forward``'s (the state at its forward) or
        autocast is on (a backward runs outside any, unless the program calls it inside one)."""
        if not self.autocast and all(getattr(self, f) == getattr(forward, f) for f in self.BACKWARD_FIELDS):
            return None
        return dataclasses.replace(forward, autocast=self.autocast, **{f: getattr(self, f) for f in self.BACKWARD_FIELDS})

    def to_json(self) -> dict[str, Any]:
        """The fields that differ from torch's defaults (empty: a repro needs none of it)."""
        default = CompileContext()
        out = {k: v for k, v in dataclasses.asdict(self).items() if v != getattr(default, k)}
        if "autocast" in out:
            out["autocast"] = [list(pair) for pair in self.autocast]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompileContext:
        data = dict(data)
        if "autocast" in data:
            data["autocast"] = tuple((str(device), str(dtype)) for device, dtype in data["autocast"])
        return cls(**data)


#: The thread count the program started with, where pt2kit knows it: the capture notes it before the program runs
#: (:func:`note_threads_at_start`). Elsewhere (the hook, the API), its environment's stands for it.
_threads_at_start: list[int] = []


def note_threads_at_start() -> None:
    """The program is about to start: what it runs with now is not its own setting."""
    _threads_at_start[:] = [torch.get_num_threads()]


def environment_threads() -> int:
    """The thread count a process gets from its environment: ``OMP_NUM_THREADS``, else the cores it may run on."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


BOUNDARIES = ("dynamo", "aot")
GRAPH_KINDS = ("dynamo", "forward", "backward", "inference")


#: An aot graph that a user's backend handed to Inductor (``standalone_compile``, ``compile_fx``): its repro compiles it as the ``inductor`` stage does.
INDUCTOR_INNER_COMPILE = "torch._inductor.compile_fx:compile_fx_inner"
#: The name a repro's ``definitions`` bind a backend to when it has no importable name.
BACKEND_NAME = "pt2kit_backend"


DISTINCT_RANGE = 1 << 24  # the widest value range whose distinct integers stand-ins draw without repeats


@dataclass(frozen=True)
class TensorMeta:
    """Shape, strides, dtype, device and ``requires_grad`` of a tensor, and its value range."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    device: str
    requires_grad: bool
    low: float | None = None  # value range of the real data (integer tensors only)
    high: float | None = None
    distinct: bool = False  # integer data whose values all differ (an index without repeats): stand-ins do too
    ordered: bool = False  # 1-d integer data that never decreases (a jagged tensor's offsets): stand-ins too, low to high
    is_leaf: bool = True  # False: a non-leaf requiring grad (the output of a differentiable op)
    special: str | None = None  # a ZeroTensor, or a conjugate or negative view (pt2kit.seams.special_tensors)
    subclass: str | None = None  # a plain tensor subclass: how a repro names its class (``Tagged``, ``mylib.Tagged``)
    # a window into a larger storage (a slice of a tensor the graph never saw): (storage offset, storage size)
    storage: tuple[int, int] | None = None
    view: str | None = None  # a view autograd guards, by how it was made (pt2kit.seams.special_tensors.VIEW_KINDS)
    view_function: str | None = None  # a custom_function view: the Function's name (autograd's errors say it)

    @classmethod
    def of(cls, t: torch.Tensor, window: bool = False) -> TensorMeta:
        """``t``'s metadata; with ``window``, also the storage around it when it is a view into more memory.

        Only a graph's own inputs keep their window (:func:`storage_window`): a graph that reads past a view's
        elements (``as_strided`` with an offset) needs the memory around it. A value cut out of a graph is its own tensor.
        """
        low = high = None
        special, distinct, ordered = special_tensors.kind_of(t), False, False
        if not (t.is_floating_point() or t.is_complex()) and t.dtype != torch.bool and t.numel() and special is None:
            low, high = float(t.min()), float(t.max())
            distinct = 1 < t.numel() <= high - low + 1 <= DISTINCT_RANGE and t.unique().numel() == t.numel()
            ordered = t.dim() == 1 and t.numel() > 1 and bool((t[1:] >= t[:-1]).all())
        return cls(
            shape=tuple(t.shape),
            stride=tuple(t.stride()),
            dtype=str(t.dtype).removeprefix("torch."),
            device=str(t.device),
            requires_grad=bool(t.requires_grad),
            low=low,
            high=high,
            distinct=distinct,
            ordered=ordered,
            is_leaf=bool(t.is_leaf) or not t.requires_grad,
            special=special,
            storage=storage_window(t) if window and special is None else None,
        )

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def describe(self) -> str:
        grad = (", requires_grad" if self.is_leaf else ", requires_grad, non-leaf") if self.requires_grad else ""
        special = {"zerotensor": ", a ZeroTensor", "conj": ", conjugate bit", "neg": ", negative bit"}.get(
            self.special or "", ""
        )
        special += f", a {self.subclass}" if self.subclass else ""
        if self.storage:
            special += f", a view at offset {self.storage[0]} into a storage of {self.storage[1]}"
        special += f", {GUARDED_VIEWS[self.view]}" if self.view else ""
        return f"{self.dtype}{list(self.shape)} stride={list(self.stride)}{grad}{special}"


@dataclass
class GraphInput:
    """One placeholder's value: the real one, or a seeded random stand-in."""

    name: str
    value: Any  # the real value (tensor or scalar)
    meta: TensorMeta | None  # None for scalars
    seed: int | None = None  # when set, a random tensor replaces ``value``
    symbolic_dims: tuple[int, ...] = ()  # dims that were dynamic when dynamo captured the graph
    source: str | None = None  # minifier: the origin graph's node whose value this input takes
    derived_from: tuple[str, int] | None = None  # a symbolic size: (tensor input, dim) it is read from
    symbolic_int: bool = False  # a symbolic int that no tensor input's size gives (compile with dynamic=True)
    dtensor: dict[str, Any] | None = None  # a DTensor: ``value``/``meta`` are its local shard; placements and mesh here
    opaque: str | None = None  # a value pt2kit cannot write (a DeviceMesh, a script object): its type
    view_of: tuple[str, int] | None = (
        None  # a view into another input's memory: (that input, storage offset from its own)
    )
    static: str | None = None  # dynamo marked it a static address (a buffer, a parameter): "unguarded" or "guarded"
    shares_only: bool = False  # with view_of: that memory, as a tensor of its own (``nn.Parameter(y)``), no view

    @property
    def is_tensor(self) -> bool:
        return self.meta is not None

    @property
    def is_random(self) -> bool:
        return self.seed is not None

    def materialize(self) -> Any:
        """A fresh value for one run: a clone of the real tensor, or the random stand-in.

        A DTensor is rebuilt from its local shard (and a DeviceMesh made) over the
        process group of the running query (a fake one).
        """
        if self.dtensor is not None:
            from pt2kit.seams import dtensor

            if self.meta is None:
                return dtensor.mesh(self.dtensor["mesh_shape"], self.dtensor.get("device_type", "cpu"))
            return dtensor.rebuild(self._materialize_tensor(), self.dtensor)
        if self.meta is None:
            return self.value
        return self._materialize_tensor()

    def _materialize_tensor(self) -> Any:
        assert self.meta is not None
        m = self.meta
        if self.seed is not None:
            r = (m.low, m.high, m.device, m.storage, m.distinct, m.ordered)
            value = rand_tensor(m.shape, m.stride, m.torch_dtype, m.requires_grad, self.seed, *r)
        else:  # placed here, in the child
            value = clone_tensor(self.value, m.requires_grad, device=m.device, window=m.storage is not None)
        value = special_tensors.rebuild(value, m.special)  # (``value`` is the plain tensor behind it)
        if m.requires_grad and not m.is_leaf:  # as the program passed it: the output of a differentiable op
            with torch.enable_grad():
                value = value.clone(memory_format=torch.preserve_format)
        return guarded_view(value, m.view, m.view_function) if m.view else value


#: How a repro's comment names each view autograd guards (:attr:`TensorMeta.view`).
GUARDED_VIEWS = {
    "custom_function": "a view returned as-is by a custom autograd.Function",
    "no_grad": "a view made under no_grad",
    "multi_output": "a view, one of several outputs of one op",
}


def snapshot(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of ``gm``'s graph over the same module: the graph as a compiler was handed it.

    Compilers rewrite the graph they are given in place (Inductor's post-grad passes
    reinplace ops, for one); a query must compile what the compiler got, not what its
    passes made of it.
    """
    return fx.GraphModule(gm, copy.deepcopy(gm.graph))


@dataclass(frozen=True)
class GraphId:
    """Which graph of a program: dynamo's ``g0``, or one of its aot graphs, ``g0.forward``.

    ``number``: the how-manyth aot graph of that kind the dynamo graph compiled (a
    recompile's is ``g0.forward2``). Its text names the graph's directory in a capture.
    """

    index: int
    kind: str | None = None  # forward, backward, inference: None for the dynamo graph
    number: int = 1

    def __str__(self) -> str:
        return f"g{self.index}" + (f".{self.kind}{self.number if self.number > 1 else ''}" if self.kind else "")

    @classmethod
    def parse(cls, text: str) -> GraphId:
        match = _GRAPH_ID.fullmatch(text)
        if match is None:
            raise ValueError(f"not a graph id: {text!r}")
        index, kind, number = match.groups()
        return cls(int(index), kind, int(number) if number else 1)

    @property
    def owner(self) -> GraphId:
        """The dynamo graph this one was compiled from (itself for a dynamo graph)."""
        return GraphId(self.index)


_GRAPH_ID = re.compile(r"g(\d+)(?:\.([a-z]+)(\d*))?")


@dataclass(frozen=True)
class BackwardCall:
    """One of a program's several backward calls through one compiled call of a dynamo graph (one ``backward()``
    or ``torch.autograd.grad``): the graph's outputs its gradients reached, by their nodes' names, and whether it
    retained the graph (``retain_graph=True``) for the next."""

    outputs: tuple[str, ...]
    retain_graph: bool = False


@dataclass
class GraphCase:
    """A graph, its inputs, and what it takes to run it through the failing stage."""

    gm: fx.GraphModule
    inputs: list[GraphInput]
    boundary: str = "dynamo"  # dynamo | aot
    kind: str = "dynamo"  # dynamo | forward | backward | inference
    backend: str = "inductor"  # the final stage: "inductor" or the user's backend name
    config: dict[str, dict[str, Any]] = field(default_factory=dict)  # module -> {key: literal or a CONFIG_* marker}
    modules: list[tuple[str, str]] = field(default_factory=list)  # (import name, sys.path root) of user modules
    compile_kwargs: dict[str, Any] = field(default_factory=dict)  # aot inner-compile kwargs
    # aot backward graphs: the inputs (placeholder names) AOTAutograd donates to Inductor, which may reuse their memory
    donated: tuple[str, ...] = ()
    compiler: str | None = None  # aot graphs of a user backend: "module:function" of its compiler (INDUCTOR_INNER_COMPILE: Inductor's)
    constants: dict[str, torch.Tensor] = field(default_factory=dict)  # get_attr targets
    backward: bool = True  # dynamo graphs: also run backward when an output needs grad
    grad_enabled: bool = True  # dynamo graphs: the grad mode the program compiled them under
    dynamic: bool = False  # dynamo graphs: compile with dynamic=True (symbolic sizes captured)
    handed: bool = False  # dynamo graphs: handed to the backend as dynamo handed it (dynamo cannot trace it again)
    fullgraph: bool = False  # a frame dynamo failed on: compiled with fullgraph=True, as the program compiled it
    index: int = 0  # position among the program's captured graphs
    parent: int | None = None  # aot graphs: index of the dynamo graph they were lowered from
    frame: dict[str, Any] | None = None  # the user frame dynamo compiled: name, filename, lineno
    distributed: dict[str, int] | None = None  # {"rank", "world_size"} of the job it comes from
    definitions: str = ""  # user source the repro carries: backends/ops with no importable name (see extract)
    context: CompileContext = field(default_factory=CompileContext)  # the state around the call (see there)
    # dynamo graphs, what the program did between the forward and its backward (see minifier.capture.between): the
    # outputs (their nodes' names) no gradient reached, which the repro's loss leaves out (AOTAutograd gives them zero
    # gradients), and the inputs and outputs (by name) it wrote into in place, which the repro writes into there too
    unreached: tuple[str, ...] = ()
    written_between: tuple[str, ...] = ()
    # the global state the program's backward ran under, where it differs from the forward's (None: the same)
    backward_context: CompileContext | None = None
    # the program's backward calls through one compiled call, in order, where it made more than one (a loss per
    # output, pytorch#118739): AOTAutograd's backward is one autograd node, which the first call frees
    backward_calls: tuple[BackwardCall, ...] = ()
    # the gradient the program's backward gave an output (by name), where it weighs its elements differently
    output_grads: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, not {self.boundary!r}")
        if self.kind not in GRAPH_KINDS:
            raise ValueError(f"kind must be one of {GRAPH_KINDS}, not {self.kind!r}")
        # Type annotations only clutter the repro, and some (strings, Parameter) do not
        # survive a round trip through its text.
        modules = [self.gm]
        while modules:
            module = modules.pop()
            for node in module.graph.nodes:
                node.type = None
            modules += [m for m in module.children() if isinstance(m, fx.GraphModule)]

    @property
    def unsupported(self) -> list[str]:
        """Inputs a repro cannot rebuild yet (as ``name: type``)."""
        return [f"{i.name}: {i.opaque}" for i in self.inputs if i.opaque and i.name in self.used_inputs()]

    def used_inputs(self) -> set[str]:
        """Placeholders some node of the graph reads."""
        return {str(n.target) for n in self.gm.graph.find_nodes(op="placeholder") if n.users}

    @property
    def backend_is_defined(self) -> bool:
        """Is the final backend bound by :attr:`definitions` (it has no importable name)?"""
        return f"{BACKEND_NAME} = " in self.definitions

    @property
    def op_nodes(self) -> list[fx.Node]:
        return [n for n in self.gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]

    @property
    def node_count(self) -> int:
        """Op nodes, the size ``report.json``'s ``nodes_before``/``nodes_after`` report."""
        return len(self.op_nodes)

    def op_names(self) -> list[str]:
        """The op of each op node, e.g. ``aten.relu.default`` or ``torch.sin`` or ``Tensor.sin``."""
        return [op_name(n, self.gm) for n in self.op_nodes]

    def materialize_inputs(self) -> list[Any]:
        values = [i.materialize() for i in self.inputs]
        names = [i.name for i in self.inputs]
        for k, i in enumerate(self.inputs):  # an input that shared another's memory shares it again
            if i.view_of and i.view_of[0] in names and i.meta is not None:
                base = values[names.index(i.view_of[0])]
                values[k] = view_into(
                    base, i.meta.shape, i.meta.stride, i.meta.requires_grad, i.view_of[1], not i.shares_only, i.meta.torch_dtype
                )
        for k, i in enumerate(self.inputs):  # a symbolic size is the size of its tensor, whatever that is now
            if i.derived_from and i.derived_from[0] in names:
                values[k] = values[names.index(i.derived_from[0])].size(i.derived_from[1])
        return values

    @property
    def graph_id(self) -> GraphId:
        if self.boundary == Boundary.AOT:
            return GraphId(self.index if self.parent is None else self.parent, self.kind)
        return GraphId(self.index)

    def label(self) -> str:
        return str(self.graph_id)

    def output_names(self) -> list[str] | None:
        """The names of the nodes the graph returns, by position (None: it returns more than a flat tuple of nodes)."""
        output = next(iter(self.gm.graph.find_nodes(op="output")), None)
        values = output.args[0] if output is not None else None
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        return [v.name for v in values] if all(isinstance(v, fx.Node) for v in values) else None

    def unreached_positions(self) -> list[int]:
        """The positions among the graph's outputs of those the program's backward never reached (:attr:`unreached`)."""
        names = (self.output_names() or []) if self.unreached else []
        return [k for k, name in enumerate(names) if name in self.unreached]

    def backward_positions(self) -> list[tuple[list[int], bool]]:
        """The :attr:`backward_calls` by output position: each call's outputs, and whether it retains the graph. An
        output none of them names and the program's backward reached (one the reduction made) joins the first."""
        names, unreached = self.output_names() or [], self.unreached_positions()
        named = {name for call in self.backward_calls for name in call.outputs}
        calls = [([k for k, name in enumerate(names) if name in call.outputs], call.retain_graph) for call in self.backward_calls]
        if calls:
            rest = [k for k, name in enumerate(names) if k not in unreached and name not in named]
            calls[0] = (sorted(calls[0][0] + rest), calls[0][1])
        return calls

    def replace(self, **changes: Any) -> GraphCase:
        """A shallow copy with some fields changed (the graph module is shared unless given)."""
        return dataclasses.replace(self, **changes)


#: Python's in-place operators: on a tensor, ``x += y`` in a dynamo graph writes into ``x``.
_IN_PLACE_OPERATORS = frozenset(
    f"i{name}"
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift", "matmul")
)


#: The operators (and Tensor dunders) that write into their first operand: ``x += y``, ``x[0] = y``, ``del x[0]``.
_WRITES = _IN_PLACE_OPERATORS | {"setitem", "delitem"}


def has_effect(node: fx.Node) -> bool:
    """Does running ``node`` matter even when nothing reads its value?

    FX's own rule (``Node.is_impure``: mutable aten ops, asserts, random ops...), plus
    what a dynamo graph writes in place (``x.mul_(y)``, ``x += y``) and the mode switches
    around ``with torch.inference_mode():``, which FX does not count: a graph whose only
    effect is a write into its input is not dead code.
    """
    if node.is_impure() or ops.switches_mode(node.target):
        return True
    name = (
        node.target
        if node.op == "call_method"
        else getattr(node.target, "__name__", "")
        if node.op == "call_function"
        else ""
    )
    if not isinstance(name, str):
        return False
    # x.mul_(y); x[0] = y (``Tensor.__setitem__``); x += y (``Tensor.__iadd__``)
    in_place_method = (name.endswith("_") and not name.startswith("_")) or (
        name.startswith("__") and name.endswith("__") and name[2:-2] in _WRITES
    )
    return in_place_method or (
        node.op == "call_function" and getattr(node.target, "__module__", None) in ("_operator", "operator") and name in _WRITES
    )


def leaves_a_mode_on(nodes: dict[str, fx.Node], kept: Iterable[str]) -> bool:
    """Would the graph of only the ``kept`` nodes enter a mode and never leave it (``_exit_autocast`` dropped, a
    vmap level opened by ``_vmap_increment_nesting`` never closed)? ``nodes``: the graph's, in graph order.

    The mode would then stay on for whatever runs after the graph, its eager reference and the
    compiler too (hunt j: an open vmap level made Inductor's own pattern setup raise in a fresh
    process): what such a graph shows is its own doing, never the program's failure.
    """
    kept = set(kept)
    switches = [n for n in nodes.values() if n.name in kept and n.op == "call_function"]
    left = {id(enter) for enter, _ in ops.mode_brackets(switches)}
    return any(ops.enters_mode(n.target) and id(n) not in left for n in switches)
