"""Capture the custom-op calls a test makes, one copy per distinct signature.

Mechanism: wrapping ``OpOverload.__call__``
-------------------------------------------
While a recording is active, ``torch._ops.OpOverload.__call__`` and
``OpOverloadPacket.__call__`` are replaced by a thin wrapper that looks at the
call, then calls the original. We chose this over the two mode-based options:

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
of a test that give identical signatures are checked once, under the first one.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._dynamo.utils import clone_input
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._python_dispatch import _disable_current_modes

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

_AUTOGRAD = torch._C.DispatchKey.AutogradFunctionality
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

    op: OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    signature: Signature
    test: str  # nodeid of the test that first made this call
    calls: int = 1  # how many calls (from any test) shared the signature

    def release_tensors(self) -> None:
        """Drop the argument copies once checked; the signature stays for the summary."""
        self.args, self.kwargs = (), {}


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
        self._decided: dict[OpOverload, bool] = {}

    def __call__(self, op: OpOverload) -> bool:
        decided = self._decided.get(op)
        if decided is None:
            name = op.name()
            qualified = name.split(".")[0]
            decided = name in self.ops or qualified in self.ops or self._selects_namespace(qualified)
            self._decided[op] = decided
        return decided

    def may_select(self, qualified_name: str) -> bool:
        """Could some overload of ``ns::name`` be selected? Cheap, for packet calls."""
        return self._selects_namespace(qualified_name) or any(
            name == qualified_name or name.startswith(qualified_name + ".") for name in self.ops
        )

    def _selects_namespace(self, qualified_name: str) -> bool:
        namespace = qualified_name.split("::")[0]
        return namespace in self.namespaces or (self.all_custom and namespace not in TORCH_NAMESPACES)


class CallRecorder:
    """Owns the ``__call__`` wrappers and the session-wide table of signatures seen."""

    def __init__(self) -> None:
        self.seen: dict[Signature, RecordedCall] = {}
        self.total_calls = 0
        self._fresh: list[RecordedCall] = []
        self._selector: OpSelector | None = None
        self._test: str | None = None
        self._lock = threading.Lock()
        self._paused = threading.local()
        self._installed = False

    # -- lifetime -------------------------------------------------------------
    def install(self) -> None:
        """Wrap ``OpOverload.__call__``; a no-op if this recorder is already installed."""
        if not self._installed:
            _wrappers.push(self)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            _wrappers.pop(self)
            self._installed = False

    @contextmanager
    def recording(self, test: str, selector: OpSelector) -> Iterator[None]:
        """Record the calls ``selector`` picks while the block runs, attributed to ``test``."""
        self._test, self._selector = test, selector
        try:
            yield
        finally:
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

    def record(self, op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], test: str) -> RecordedCall | None:
        """Record one call explicitly (the fixture's path); None if its signature was seen already.

        Raises :class:`NotRecordable` for arguments that are not plain eager tensors.
        """
        pending = self._observe(op, args, kwargs, test, strict=True)
        if pending is not None:
            self._commit(pending, fresh=False)  # the caller checks it right away
        return pending

    # -- the hot path -----------------------------------------------------------
    def _before_call(self, op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RecordedCall | None:
        selector, test = self._selector, self._test
        if selector is None or test is None or getattr(self._paused, "depth", 0):
            return None
        if not selector(op) or torch.compiler.is_compiling():
            return None  # Dynamo is tracing: the arguments are not real
        return self._observe(op, args, kwargs, test)

    def _observe(
        self, op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], test: str, strict: bool = False
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
                return None
        grad_active = _grad_active()
        # Copy outside any active mode or tracer (make_fx, a user's logging mode):
        # they must not see our clones.
        with _disable_current_modes(), torch._C.DisableTorchFunction():
            copy_args, copy_kwargs = pytree.tree_map_only(
                torch.Tensor, functools.partial(snapshot_tensor, grad_active=grad_active), (args, dict(kwargs))
            )
        return RecordedCall(op, copy_args, copy_kwargs, signature, test)

    def _commit(self, call: RecordedCall, fresh: bool = True) -> None:
        with self._lock:
            known = self.seen.get(call.signature)
            if known is not None:  # another thread got there first
                known.calls += 1
                return
            self.seen[call.signature] = call
            if fresh:
                self._fresh.append(call)


def snapshot_tensor(tensor: torch.Tensor, grad_active: bool = True) -> torch.Tensor:
    """A private copy with the same strides; it requires grad iff the call took part in autograd."""
    copy = clone_input(tensor).detach()
    return copy.requires_grad_(grad_active and tensor.requires_grad)


class NotRecordable(Exception):
    """An argument is not a plain eager tensor (fake, meta, functional, a subclass)."""


def signature_of(op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Signature:
    """The dedup key of a call; raises :class:`NotRecordable` for traced or exotic tensors."""
    grad_active = _grad_active()
    tensors: list[torch.Tensor] = []
    positional = tuple(_meta(a, grad_active, tensors) for a in args)
    keyword = tuple((name, _meta(kwargs[name], grad_active, tensors)) for name in sorted(kwargs))
    return Signature(op.name(), (positional, keyword), _alias_groups(tensors))


def _meta(value: Any, grad_active: bool, tensors: list[torch.Tensor]) -> Any:
    """A hashable stand-in for one argument (see the module docstring for what counts)."""
    if isinstance(value, torch.Tensor):
        if (
            type(value) not in _PLAIN_TENSOR_TYPES
            or value.is_meta
            or torch._C._functorch.is_functorch_wrapped_tensor(value)  # vmap, grad
            or torch._is_functional_tensor(value)
        ):
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


def _grad_active() -> bool:
    """Would autograd see this call? Not under no_grad, nor below the autograd key."""
    return torch.is_grad_enabled() and not torch._C._dispatch_tls_is_dispatch_key_excluded(_AUTOGRAD)


class _CallWrappers:
    """Installs the ``__call__`` wrappers while at least one recorder is active.

    Recorders stack (a pytester run inside a pytest session that is itself
    recording); the innermost one sees the calls.
    """

    def __init__(self) -> None:
        self.stack: list[CallRecorder] = []
        self.original_overload_call: Callable[..., Any] | None = None
        self.original_packet_call: Callable[..., Any] | None = None

    def push(self, recorder: CallRecorder) -> None:
        if not self.stack:
            self._wrap()
        self.stack.append(recorder)

    def pop(self, recorder: CallRecorder) -> None:
        self.stack.remove(recorder)
        if not self.stack:
            self._unwrap()

    def _wrap(self) -> None:
        original_overload_call = OpOverload.__call__
        original_packet_call = OpOverloadPacket.__call__
        stack = self.stack

        @functools.wraps(original_overload_call)
        def overload_call(op: OpOverload, /, *args: Any, **kwargs: Any) -> Any:
            recorder = stack[-1] if stack else None
            pending = recorder._before_call(op, args, kwargs) if recorder else None
            result = original_overload_call(op, *args, **kwargs)
            if pending is not None:  # the call succeeded: keep it
                recorder._commit(pending)
            return result

        @functools.wraps(original_packet_call)
        def packet_call(packet: OpOverloadPacket, /, *args: Any, **kwargs: Any) -> Any:
            overload = _resolve_overload(packet, args, kwargs) if stack else None
            if overload is not None:
                return overload_call(overload, *args, **kwargs)
            return original_packet_call(packet, *args, **kwargs)

        self.original_overload_call, self.original_packet_call = original_overload_call, original_packet_call
        OpOverload.__call__ = overload_call  # type: ignore[method-assign]
        OpOverloadPacket.__call__ = packet_call  # type: ignore[method-assign]

    def _unwrap(self) -> None:
        OpOverload.__call__ = self.original_overload_call  # type: ignore[method-assign]
        OpOverloadPacket.__call__ = self.original_packet_call  # type: ignore[method-assign]


def _resolve_overload(packet: OpOverloadPacket, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpOverload | None:
    """The overload a packet call dispatches to (resolved as Dynamo does), if it may be recorded."""
    recorder = _wrappers.stack[-1]
    if recorder._selector is None or not recorder._selector.may_select(packet._qualified_op_name):
        return None  # not recording, or e.g. aten: stay on torch's own path
    try:
        name = torch._C._jit_resolve_packet(packet._qualified_op_name, *args, **kwargs)
    except RuntimeError:
        return None  # let the real call raise its own error
    return getattr(packet, name)


_wrappers = _CallWrappers()
