"""Seam: ``torch._ops.OpOverload.__call__`` and ``OpOverloadPacket.__call__``, every operator call made from Python.

Every call of an operator from Python goes through one of two ``__call__`` methods:
``torch.ops.ns.op.overload(...)`` and a ``torch.library.custom_op`` object through
``OpOverload.__call__``, ``torch.ops.ns.op(...)`` through ``OpOverloadPacket.__call__``,
which picks the overload in C++ (``torch._C._jit_resolve_packet``, the way dynamo resolves
packets too). Calls made from C++ only do not pass here.

:func:`observing` replaces both methods while at least one observer is installed and puts
torch's back with the last one. Observers stack: the innermost one sees the calls (an
in-process pytest run inside a pytest session that is itself recording, say). For each
overload call the observer is asked first (:meth:`CallObserver.calling`); if it returns a
token, it is handed back once the call returned (:meth:`CallObserver.returned`) -- a call
that raises is not. A packet call is resolved to its overload only when the observer
wants that op (:meth:`CallObserver.wants_packet`), so aten's packet calls stay on torch's
own path. Results and exceptions pass through unchanged. opcheck/ records custom-op calls
this way (:mod:`opcheck.recording` says why not with a mode).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps="torch._ops.OpOverload.__call__ / OpOverloadPacket.__call__ (replaced), torch._C._jit_resolve_packet",
    features=("opcheck",),
)


def probe() -> None:
    import torch
    from torch._ops import OpOverload, OpOverloadPacket

    for cls in (OpOverload, OpOverloadPacket):
        if not callable(getattr(cls, "__call__", None)) or "__call__" not in cls.__dict__:
            raise AttributeError(f"{cls.__name__}.__call__ is no longer defined on the class")
    name = torch._C._jit_resolve_packet("aten::add", torch.ones(1), torch.ones(1))
    if name != "Tensor":
        raise AttributeError(f"_jit_resolve_packet resolves aten::add(Tensor, Tensor) to {name!r}")


class CallObserver(Protocol):
    def wants_packet(self, qualified_name: str) -> bool:
        """Resolve packet calls of ``ns::op`` to their overload (and see them in :meth:`calling`)?"""

    def calling(self, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """An overload is about to be called; a non-None token asks for :meth:`returned`."""

    def returned(self, token: Any) -> None:
        """The call ``calling`` returned ``token`` for has returned."""


class _Wrappers:
    """The replaced ``__call__`` methods, in torch while at least one observer is installed."""

    def __init__(self) -> None:
        self.stack: list[CallObserver] = []
        self.originals: tuple[Callable[..., Any], Callable[..., Any]] | None = None

    def push(self, observer: CallObserver) -> None:
        if not self.stack:
            self._wrap()
        self.stack.append(observer)

    def pop(self, observer: CallObserver) -> None:
        self.stack.remove(observer)
        if not self.stack:
            self._unwrap()

    def _wrap(self) -> None:
        from torch._ops import OpOverload, OpOverloadPacket

        original_overload_call: Callable[..., Any] = OpOverload.__call__
        original_packet_call: Callable[..., Any] = OpOverloadPacket.__call__
        stack = self.stack

        @functools.wraps(original_overload_call)
        def overload_call(op: Any, /, *args: Any, **kwargs: Any) -> Any:
            observer = stack[-1] if stack else None
            token = observer.calling(op, args, kwargs) if observer else None
            result = original_overload_call(op, *args, **kwargs)
            if token is not None and observer is not None:  # the call succeeded (a token means an observer)
                observer.returned(token)
            return result

        @functools.wraps(original_packet_call)
        def packet_call(packet: Any, /, *args: Any, **kwargs: Any) -> Any:
            overload = _resolve(packet, args, kwargs, stack[-1]) if stack else None
            if overload is not None:
                return overload_call(overload, *args, **kwargs)
            return original_packet_call(packet, *args, **kwargs)

        self.originals = (original_overload_call, original_packet_call)
        setattr(OpOverload, "__call__", overload_call)
        setattr(OpOverloadPacket, "__call__", packet_call)

    def _unwrap(self) -> None:
        from torch._ops import OpOverload, OpOverloadPacket

        assert self.originals is not None
        overload_call, packet_call = self.originals
        setattr(OpOverload, "__call__", overload_call)
        setattr(OpOverloadPacket, "__call__", packet_call)
        self.originals = None


def _resolve(packet: Any, args: tuple[Any, ...], kwargs: dict[str, Any], observer: CallObserver) -> Any:
    """The overload a packet call dispatches to, if the observer wants this op."""
    import torch

    qualified_name = packet._qualified_op_name
    if not observer.wants_packet(qualified_name):
        return None  # e.g. aten: stay on torch's own path
    try:
        name = torch._C._jit_resolve_packet(qualified_name, *args, **kwargs)
    except RuntimeError:
        return None  # let the real call raise its own error
    return getattr(packet, name)


_wrappers = _Wrappers()


def add_observer(observer: CallObserver) -> None:
    """From now on, the innermost observer (this one) sees every operator call made from Python."""
    _wrappers.push(observer)


def remove_observer(observer: CallObserver) -> None:
    _wrappers.pop(observer)


@contextlib.contextmanager
def observing(observer: CallObserver) -> Iterator[None]:
    add_observer(observer)
    try:
        yield
    finally:
        remove_observer(observer)


def installed() -> bool:
    """Whether the replaced ``__call__`` methods are in torch right now."""
    return _wrappers.originals is not None
