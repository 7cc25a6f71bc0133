"""Capture the custom-op calls a test makes, one copy per distinct signature.

Mechanism: wrapping ``OpOverload.__call__``
-------------------------------------------
While a recording is active, ``torch._ops.OpOverload.__call__`` and
``OpOverloadPacket.__call__`` are replaced by a thin wrapper that looks at the
call, then calls the original (:mod:`pt2kit.seams.op_calls`; the dispatcher state
it reads is :mod:`pt2kit.seams.dispatch`). We chose this over the two mode-based options:

* A ``TorchFunctionMode`` (what ``generate_opcheck_tests`` uses) is traced *into*
  by Dynamo, so a test that runs ``torch.compile(fullgraph=True)`` would trace our
  bookkeeping, and torch's own tool sets ``TORCHDYNAMO_DISABLE=1`` to avoid that,
  which changes what the test does.
* A ``TorchDispatchMode`` sees every aten op of the test in Python (slow), never
  sees ``CompositeImplicitAutograd`` custom ops (they decompose first), and while
  one is active Dynamo skips every frame ("non-infra torch dispatch mode
  present"), so the test's ``torch.compile`` would silently run eagerly.

The wrapper sees every call made from Python: ``torch.ops.ns.op(...)``, a
``torch.library.custom_op`` object (its ``__call__`` goes through its
``OpOverload``), ops called from inside another op's Python kernel, and the
custom-op calls that compiled code (``aot_eager``, Inductor's fallback kernels)
makes at run time with real tensors. It does not see ops called from C++ only.

Not changing the test
---------------------
The wrapper returns the original call's result and lets its exceptions through.
It records nothing while Dynamo traces, nor when an argument is not a plain eager
tensor (fake, meta, functional, vmap/grad-wrapped, a subclass). The arguments
are cloned (strides kept) *before* the call, because the op may mutate them, and
the cloning runs with every dispatch and function mode switched off, so a tracer
or a user's mode never sees it. A call that raises is dropped.

Dedup
-----
A call's :class:`Signature` is its op plus the metadata of its arguments: for a
tensor its shape, strides, dtype, device, layout and whether it takes part in
autograd; ints, bools, strings, dtypes and devices by value; floats by type only
(so a suite that feeds random scales still collapses); and which tensor arguments
share storage. Only the first call of each signature is cloned and kept, later
ones just bump a counter, so N identical calls cost N cheap hashes and one check.
Because signatures are deduplicated across the whole session, the parametrizations
of a test that give identical signatures are checked once. Each test still learns
every signature it called (:meth:`CallRecorder.take_touched`), so each is judged on
all of its calls, whichever test made them first.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from pt2kit.seams import pytree

from pt2kit.seams import dispatch, dynamo_utils, op_calls

#: An operator overload (``torch._ops.OpOverload``; torch's operator classes are read in
#: :mod:`pt2kit.seams.ops`).
Op = Any

# Namespaces that torch itself registers ops in: "custom op" means anything else,
# unless the user names namespaces explicitly.
TORCH_NAMESPACES = frozenset(
    """
    aten prim prims quantized _quantized quantization symm_mem static_runtime c10d
    c10d_functional _c10d_functional _c10d_functional_autograd _dtensor onednn mkldnn
    mkldnn_prepacked mkl profiler sparse inductor inductor_prims _inductor_test _test
    onnx onnx_symbolic debugprims rngprims _native export debug_mode_ops streams
    flex_lib fsdp higher_order
    """.split()
)

_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


@dataclasses.dataclass(frozen=True)
class Signature:
    """What makes two calls of an op the same check: the op and its argument metadata."""

    op_name: str  # "ns::name" or "ns::name.overload", as OpOverload.name() spells it
    args_meta: tuple[Any, ...]
    alias_groups: tuple[int, ...]  # per tensor argument: index of the first one sharing its storage

    def describe(self) -> str:
        """A one-line human form, e.g. ``ex::rowsum(Tensor[4, 8] float32, dim=1)``."""
        positional, keyword = self.args_meta
        parts = [_describe_meta(m) for m in positional]
        parts += [f"{name}={_describe_meta(m)}" for name, m in keyword]
        shared = [i for i, first in enumerate(self.alias_groups) if first != i]
        suffix = f"  [tensor args {shared} share storage]" if shared else ""
        return f"{self.op_name}({', '.join(parts)}){suffix}"


@dataclasses.dataclass
class RecordedCall:
    """The first call of a signature: the op, a private copy of its arguments, where it came from."""

    op: Op
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    signature: Signature
    test: str  # nodeid of the test that first made this call
    calls: int = 1  # how many calls (from any test) shared the signature
    released: bool = False  # the argument copies were dropped: no further check can run on it

    def release_tensors(self) -> None:
        """Drop the argument copies once checked; the signature stays for the summary."""
        self.args, self.kwargs, self.released = (), {}, True


class OpSelector:
    """Decides, once per op, whether its calls are recorded.

    An op is selected when it is named in ``ops`` ("ns::name" or
    "ns::name.overload"), when its namespace is in ``namespaces``, or, with
    ``all_custom``, when torch does not own its namespace.
    """

    def __init__(
        self, *, all_custom: bool = False, namespaces: frozenset[str] = frozenset(), ops: frozenset[str] = frozenset()
    ) -> None:
        self.all_custom, self.namespaces, self.ops = all_custom, namespaces, ops
        self._decided: dict[Op, bool] = {}

    def __call__(self, op: Op) -> bool:
        decided = self._decided.get(op)
        if decided is None:
            decided = self._decided[op] = self.selects_name(op.name())
        return decided

    def selects_name(self, name: str) -> bool:
        """The same decision from the op's name, ``ns::name`` or ``ns::name.overload``."""
        qualified = name.split(".")[0]
        return name in self.ops or qualified in self.ops or self._selects_namespace(qualified)

    def may_select(self, qualified_name: str) -> bool:
        """Could some overload of ``ns::name`` be selected? Cheap, for packet calls."""
        return self._selects_namespace(qualified_name) or any(
            name == qualified_name or name.startswith(qualified_name + ".") for name in self.ops
        )

    def _selects_namespace(self, qualified_name: str) -> bool:
        namespace = qualified_name.split("::")[0]
        return namespace in self.namespaces or (self.all_custom and namespace not in TORCH_NAMESPACES)


class CallRecorder:
    """Records operator calls (an observer of :mod:`pt2kit.seams.op_calls`) into a session-wide table of signatures."""

    def __init__(self) -> None:
        self.seen: dict[Signature, RecordedCall] = {}
        self.total_calls = 0
        self._fresh: list[RecordedCall] = []
        self._touched: dict[Signature, None] = {}  # signatures called since the last take_touched, in order
        self._selector: OpSelector | None = None
        self._test: str | None = None
        self._lock = threading.Lock()
        self._paused = threading.local()
        self._installed = False

    # -- lifetime -------------------------------------------------------------
    def install(self) -> None:
        """Observe operator calls (the innermost recorder sees them); a no-op if already installed."""
        if not self._installed:
            op_calls.add_observer(self)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            op_calls.remove_observer(self)
            self._installed = False

    @contextmanager
    def recording(self, test: str, selector: OpSelector) -> Iterator[None]:
        """Record the calls ``selector`` picks while the block runs, attributed to ``test``."""
        self._test, self._selector = test, selector
        try:
            yield
        finally:
            self.stop_recording()

    def stop_recording(self) -> None:
        """Record nothing more until the next :meth:`recording` (e.g. after the test's own call phase)."""
        self._test, self._selector = None, None

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No recording in this thread, e.g. while the checks themselves call the op."""
        depth = getattr(self._paused, "depth", 0)
        self._paused.depth = depth + 1
        try:
            yield
        finally:
            self._paused.depth = depth

    def take_fresh(self) -> list[RecordedCall]:
        """The signatures first seen since the last call, in call order."""
        with self._lock:
            fresh, self._fresh = self._fresh, []
        return fresh

    def take_touched(self) -> list[Signature]:
        """Every signature recorded calls had since the last call, new or seen before, in first-call order."""
        with self._lock:
            touched, self._touched = list(self._touched), {}
        return touched

    def record(self, op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], test: str) -> RecordedCall | None:
        """Record one call explicitly (the fixture's path); None if its signature was seen already.

        Raises :class:`NotRecordable` for arguments that are not plain eager tensors.
        """
        pending = self._observe(op, args, kwargs, test, strict=True)
        if pending is not None:
            self._commit(pending, fresh=False)  # the caller checks it right away
        return pending

    # -- the hot path (pt2kit.seams.op_calls.CallObserver) --------------------------
    def wants_packet(self, qualified_name: str) -> bool:
        """Resolve packet calls of ``ns::name`` to their overload? Only while recording an op it may select."""
        selector = self._selector
        return selector is not None and selector.may_select(qualified_name)

    def calling(self, op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RecordedCall | None:
        """A copy of the call if its signature is new; committed once the call returned."""
        return self._before_call(op, args, kwargs)

    def returned(self, pending: RecordedCall) -> None:
        self._commit(pending)

    def _before_call(self, op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RecordedCall | None:
        selector, test = self._selector, self._test
        if selector is None or test is None or getattr(self._paused, "depth", 0) != 0:
            return None
        if not selector(op) or torch.compiler.is_compiling():
            return None  # Dynamo is tracing: the arguments are not real
        return self._observe(op, args, kwargs, test)

    def _observe(
        self, op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], test: str, strict: bool = False
    ) -> RecordedCall | None:
        """Count the call; return a copy of it if its signature is new (to commit once the call succeeds)."""
        try:
            signature = signature_of(op, args, kwargs)
        except NotRecordable:
            if strict:
                raise
            return None
        with self._lock:
            self.total_calls += 1
            known = self.seen.get(signature)
            if known is not None:
                known.calls += 1
                if not strict:
                    self._touched[signature] = None
                return None
        grad_active = dispatch.grad_active()
        # Copy outside any active mode or tracer (make_fx, a user's logging mode):
        # they must not see our clones.
        with dispatch.outside_modes():
            copy_args, copy_kwargs = pytree.tree_map_only(
                torch.Tensor, functools.partial(snapshot_tensor, grad_active=grad_active), (args, dict(kwargs))
            )
        return RecordedCall(op, copy_args, copy_kwargs, signature, test)

    def _commit(self, call: RecordedCall, fresh: bool = True) -> None:
        with self._lock:
            if fresh:
                self._touched[call.signature] = None
            known = self.seen.get(call.signature)
            if known is not None:  # another thread got there first
                known.calls += 1
                return
            self.seen[call.signature] = call
            if fresh:
                self._fresh.append(call)


def snapshot_tensor(tensor: torch.Tensor, grad_active: bool = True) -> torch.Tensor:
    """A private copy with the same strides; it requires grad iff the call took part in autograd."""
    copy = dynamo_utils.clone_input(tensor).detach()
    return copy.requires_grad_(grad_active and tensor.requires_grad)


class NotRecordable(Exception):
    """An argument is not a plain eager tensor (fake, meta, functional, a subclass)."""


def signature_of(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Signature:
    """The dedup key of a call; raises :class:`NotRecordable` for traced or exotic tensors."""
    grad_active = dispatch.grad_active()
    tensors: list[torch.Tensor] = []
    positional = tuple(_meta(a, grad_active, tensors) for a in args)
    keyword = tuple((name, _meta(kwargs[name], grad_active, tensors)) for name in sorted(kwargs))
    return Signature(op.name(), (positional, keyword), _alias_groups(tensors))


def _meta(value: Any, grad_active: bool, tensors: list[torch.Tensor]) -> Any:
    """A hashable stand-in for one argument (see the module docstring for what counts)."""
    if isinstance(value, torch.Tensor):
        if (
            type(value) not in _PLAIN_TENSOR_TYPES or value.is_meta or dispatch.is_transform_wrapped(value)
        ):  # vmap, grad, functional
            raise NotRecordable(type(value).__name__)
        tensors.append(value)
        return (
            "Tensor",
            tuple(value.shape),
            tuple(value.stride()) if value.layout == torch.strided else None,
            value.dtype,
            value.device,
            value.layout,
            bool(grad_active and value.requires_grad),
        )
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_meta(v, grad_active, tensors) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _meta(value[k], grad_active, tensors)) for k in sorted(value)))
    if isinstance(value, float):
        return ("float",)
    if value is None or isinstance(
        value, (bool, int, str, torch.dtype, torch.device, torch.layout, torch.memory_format)
    ):
        return ("value", value)
    return ("object", type(value).__qualname__)


def _alias_groups(tensors: list[torch.Tensor]) -> tuple[int, ...]:
    if len(tensors) < 2:
        return tuple(range(len(tensors)))
    first_by_storage: dict[int, int] = {}
    groups = []
    for index, tensor in enumerate(tensors):
        if tensor.layout != torch.strided:
            groups.append(index)
            continue
        storage = tensor.untyped_storage().data_ptr() or -index - 1  # empty storages alias nothing
        groups.append(first_by_storage.setdefault(storage, index))
    return tuple(groups)


def _describe_meta(meta: Any) -> str:
    kind = meta[0]
    if kind == "Tensor":
        _, shape, stride, dtype, device, layout, requires_grad = meta
        text = f"Tensor{list(shape)} {str(dtype).removeprefix('torch.')}"
        if stride is not None and stride != _contiguous_strides(shape):
            text += f" stride={stride}"
        if device.type != "cpu":
            text += f" {device}"
        if layout != torch.strided:
            text += f" {layout}"
        return text + (" requires_grad" if requires_grad else "")
    if kind in ("tuple", "list"):
        inner = ", ".join(_describe_meta(m) for m in meta[1])
        return f"[{inner}]" if kind == "list" else f"({inner})"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe_meta(m)}" for k, m in meta[1]) + "}"
    if kind == "value":
        return repr(meta[1])
    return meta[1] if kind == "object" else kind


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))
