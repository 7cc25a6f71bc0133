"""Seam: ``torch.fx.experimental.symbolic_shapes.ShapeEnv``, where every shape decision of a trace is taken.

While dynamo (or any fake-tensor trace) runs with symbolic sizes, each question about a
size -- "is ``s0 % 2 == 0``?", "is ``s0 >= 2``?" -- reaches the trace's ``ShapeEnv`` in
one of three methods, and the answer it gets is an *assumption* the traced code relies on:

- ``evaluate_expr``: the question is answered from the example sizes (the *hint*) and,
  unless it could be decided without one, a guard is appended to ``ShapeEnv.guards``;
- ``_maybe_evaluate_static``: the question is answered from what is already known (value
  ranges, replacements, axioms) and no guard is added -- ``statically_known_true``,
  Inductor's ``sizevars`` and ``evaluate_expr`` itself go through here;
- ``guard_or_defer_runtime_assert``: a fact the program asserts (``torch._check``); it
  becomes a guard, a deferred runtime assert, or nothing when it is already known.

:func:`observing` wraps the three methods on the class (so every ShapeEnv, also those
created later, is seen) and hands each answer to the listeners as a :class:`Decision`.
The wrappers keep what callers rely on: they are plain functions on the class, so bound
access works; ``cache_clear``/``cache_info`` of torch's lru caches stay reachable
(``ShapeEnv`` calls ``self._maybe_evaluate_static.cache_clear()`` itself); arguments and
results pass through unchanged; a listener that fails is logged, never raised into the
trace. The originals are put back when the last listener leaves.

The readers below (:func:`symbol_sources`, :func:`value_ranges`, ...) are the only places
pt2kit reads ShapeEnv's tables.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps=(
        "torch.fx.experimental.symbolic_shapes.ShapeEnv.evaluate_expr / _maybe_evaluate_static / "
        "guard_or_defer_runtime_assert, and its tables (guards, var_to_sources, var_to_range, "
        "backed_var_to_val, replacements, deferred_runtime_asserts, tracked_fakes, unbacked_inputs)"
    ),
    features=("validation guards", "validation sizes", "GuardValidator"),
)

log = logging.getLogger(__name__)

#: The methods wrapped by :func:`observing`, with the parameters the wrappers read.
_WRAPPED = {
    "evaluate_expr": ("orig_expr", "hint", "fx_node", "size_oblivious", "fallback_value"),
    "_maybe_evaluate_static": ("expr", "unbacked_only", "compute_hint", "size_oblivious", "axioms", "var_to_range"),
    "guard_or_defer_runtime_assert": ("orig_expr", "msg", "fx_node"),
}
_TABLES = (
    "guards",
    "var_to_sources",
    "var_to_range",
    "backed_var_to_val",
    "replacements",
    "deferred_runtime_asserts",
    "num_deferred_runtime_asserts",
    "tracked_fakes",
    "unbacked_inputs",
)


def probe() -> None:
    import inspect

    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    for name, wanted in _WRAPPED.items():
        method = ShapeEnv.__dict__.get(name)
        if method is None:
            raise AttributeError(f"ShapeEnv.{name} is gone")
        parameters = list(inspect.signature(method).parameters)
        missing = [p for p in wanted if p not in parameters]
        if missing:
            raise AttributeError(f"ShapeEnv.{name} no longer takes {missing}")
    for private in ("_suppress_guards_tls", "_get_sloc"):
        if not callable(getattr(ShapeEnv, private, None)):
            raise AttributeError(f"ShapeEnv.{private} is gone")
    if not callable(getattr(ShapeEnv, "_suppress_guards_tls", None)):
        raise AttributeError("ShapeEnv._suppress_guards_tls is gone")
    if not hasattr(ShapeEnv.__dict__["_maybe_evaluate_static"], "cache_clear"):
        raise AttributeError("ShapeEnv._maybe_evaluate_static lost its cache_clear (callers rely on it)")
    env = ShapeEnv()
    missing = [table for table in _TABLES if not hasattr(env, table)]
    if missing:
        raise AttributeError(f"ShapeEnv no longer has {missing}")
    from torch.utils._sympy.symbol import SymT, symbol_is_type  # noqa: F401

    SymT.UNBACKED_INT, SymT.FLOAT, SymT.UNBACKED_FLOAT


@dataclasses.dataclass(frozen=True)
class Decision:
    """One answer a ShapeEnv gave during a trace: ``expr`` was taken to be ``value``.

    ``via`` says where: ``evaluate_expr``, ``static`` (``_maybe_evaluate_static``) or
    ``runtime_assert``. ``guarded`` is true when the answer added a guard to
    ``ShapeEnv.guards``; ``deferred`` when it added a deferred runtime assert.
    ``hypotheses`` are extra facts the caller passed for this one question (axioms, or
    value ranges of symbols such as Inductor's loop indices), under which the answer holds.
    """

    shape_env: Any
    via: str
    expr: Any
    value: Any
    guarded: bool
    deferred: bool
    hypotheses: tuple[Any, ...] = ()
    ranges: tuple[tuple[Any, Any, Any], ...] = ()  # (symbol, lower, upper), for those hypotheses
    size_oblivious: bool = False
    fallback: bool = False  # evaluate_expr had a fallback_value (guard_or_true/false) and returned it
    suppressed: bool = False  # taken under ShapeEnv.suppress_guards(): torch declared it needs no guard


class DecisionListener(Protocol):
    def decided(self, decision: Decision) -> None: ...


_lock = threading.Lock()
_listeners: tuple[DecisionListener, ...] = ()
_installed: dict[str, Any] = {}
_tls = threading.local()


@contextlib.contextmanager
def observing(listener: DecisionListener) -> Iterator[None]:
    """Within the block, ``listener.decided`` receives every decision of every ShapeEnv."""
    global _listeners
    with _lock:
        if not _listeners:
            _install()
        _listeners = (*_listeners, listener)
    try:
        yield
    finally:
        with _lock:
            index = next(i for i, current in enumerate(_listeners) if current is listener)
            _listeners = _listeners[:index] + _listeners[index + 1 :]
            if not _listeners:
                _uninstall()


@contextlib.contextmanager
def muted() -> Iterator[None]:
    """Decisions taken on this thread inside the block are not reported (pt2kit's own queries)."""
    previous = getattr(_tls, "muted", False)
    _tls.muted = True
    try:
        yield
    finally:
        _tls.muted = previous


def _emit(decision: Decision) -> None:
    for listener in _listeners:
        try:
            listener.decided(decision)
        except Exception:
            log.exception("pt2kit: a shape-decision listener failed")


def _active() -> bool:
    return bool(_listeners) and not getattr(_tls, "muted", False)


def _wrap_evaluate_expr(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def evaluate_expr(
        self: Any,
        orig_expr: Any,
        hint: Any = None,
        fx_node: Any = None,
        size_oblivious: bool = False,
        fallback_value: Any = None,
        **kwargs: Any,
    ) -> Any:
        if not _active():
            return original(self, orig_expr, hint, fx_node, size_oblivious, fallback_value, **kwargs)
        guards, deferred = len(self.guards), self.num_deferred_runtime_asserts
        suppressed = bool(self._suppress_guards_tls())
        result = original(self, orig_expr, hint, fx_node, size_oblivious, fallback_value, **kwargs)
        guarded = len(self.guards) > guards
        added = self.num_deferred_runtime_asserts > deferred
        fallback = fallback_value is not None and not guarded and not added and _same(result, fallback_value)
        _emit(
            Decision(
                self,
                "evaluate_expr",
                orig_expr,
                result,
                guarded,
                added,
                size_oblivious=size_oblivious,
                fallback=fallback,
                suppressed=suppressed,
            )
        )
        return result

    return evaluate_expr


def _wrap_maybe_evaluate_static(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _maybe_evaluate_static(
        self: Any,
        expr: Any,
        *,
        unbacked_only: bool = False,
        compute_hint: bool = False,
        size_oblivious: bool = False,
        axioms: Any = None,
        var_to_range: Any = None,
    ) -> Any:
        result = original(
            self,
            expr,
            unbacked_only=unbacked_only,
            compute_hint=compute_hint,
            size_oblivious=size_oblivious,
            axioms=axioms,
            var_to_range=var_to_range,
        )
        # compute_hint substitutes the example sizes: a hint, not a decision.
        if result is not None and not compute_hint and _active() and (result.is_number or result.is_Boolean):
            ranges = tuple((symbol, vr.lower, vr.upper) for symbol, vr in (var_to_range or ()))
            _emit(Decision(self, "static", expr, result, False, False, tuple(axioms or ()), ranges, size_oblivious))
        return result

    # ShapeEnv calls self._maybe_evaluate_static.cache_clear() itself.
    evaluate = _maybe_evaluate_static
    for attribute in ("cache_clear", "cache_info"):
        if hasattr(original, attribute):
            setattr(evaluate, attribute, getattr(original, attribute))
    return evaluate


def _wrap_runtime_assert(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def guard_or_defer_runtime_assert(self: Any, orig_expr: Any, msg: str, fx_node: Any = None) -> Any:
        if not _active():
            return original(self, orig_expr, msg, fx_node)
        guards, deferred = len(self.guards), self.num_deferred_runtime_asserts
        result = original(self, orig_expr, msg, fx_node)
        import sympy

        _emit(
            Decision(
                self,
                "runtime_assert",
                orig_expr,
                sympy.true,
                len(self.guards) > guards,
                self.num_deferred_runtime_asserts > deferred,
            )
        )
        return result

    for attribute in ("cache_clear", "cache_info"):
        if hasattr(original, attribute):
            setattr(guard_or_defer_runtime_assert, attribute, getattr(original, attribute))
    return guard_or_defer_runtime_assert


def _same(result: Any, fallback: Any) -> bool:
    try:
        return bool(result) == bool(fallback)
    except TypeError:
        return False


_WRAPPERS = {
    "evaluate_expr": _wrap_evaluate_expr,
    "_maybe_evaluate_static": _wrap_maybe_evaluate_static,
    "guard_or_defer_runtime_assert": _wrap_runtime_assert,
}


def _install() -> None:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    for name, wrap in _WRAPPERS.items():
        original = ShapeEnv.__dict__[name]
        wrapper = wrap(original)
        setattr(wrapper, "__pt2kit_original__", original)
        _installed[name] = (original, wrapper)
        setattr(ShapeEnv, name, wrapper)


def _uninstall() -> None:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    for name, (original, wrapper) in _installed.items():
        # If someone wrapped our wrapper since, leave the chain: with no listeners ours passes through.
        if ShapeEnv.__dict__.get(name) is wrapper:
            setattr(ShapeEnv, name, original)
    _installed.clear()


def installed() -> bool:
    """Whether the wrappers are in torch right now (only while someone observes)."""
    return bool(_installed)


# -- readers ------------------------------------------------------------------------------


def symbol_sources(shape_env: Any) -> dict[Any, list[str]]:
    """Each symbol's sources by name (``L['x'].size()[0]``), the first being the one guards use.

    An input size made unbacked (``mark_unbacked``) has no entry in ``var_to_sources``; its
    source is the first tracked input quantity that is exactly that symbol.
    """
    out = {symbol: [source.name for source in sources] for symbol, sources in shape_env.var_to_sources.items()}
    unbacked = {symbol for symbol in getattr(shape_env, "unbacked_inputs", ()) if not out.get(symbol)}
    if unbacked:
        for name, fake in tracked_inputs(shape_env):
            for quantity, value in _tensor_quantities(name, fake):
                expr = node_expr(value)
                if expr in unbacked and not out.get(expr):
                    out[expr] = [quantity]
    return out


def _tensor_quantities(name: str, fake: Any) -> list[tuple[str, Any]]:
    import torch

    if not isinstance(fake, torch.Tensor):
        return []
    out: list[tuple[str, Any]] = [(f"{name}.size()[{i}]", size) for i, size in enumerate(fake.size())]
    try:
        out += [(f"{name}.stride()[{i}]", stride) for i, stride in enumerate(fake.stride())]
        out.append((f"{name}.storage_offset()", fake.storage_offset()))
    except RuntimeError:  # sparse and other layouts have no strides
        pass
    return out


def value_ranges(shape_env: Any) -> dict[Any, tuple[Any, Any]]:
    """Each symbol's known range as (lower, upper); an unbounded end is ``None``."""
    out = {}
    for symbol, vr in shape_env.var_to_range.items():
        out[symbol] = (_finite(vr.lower), _finite(vr.upper))
    return out


def _finite(bound: Any) -> int | None:
    try:
        if bound.is_finite is False or not bound.is_number:
            return None
        return int(bound)
    except (AttributeError, TypeError, ValueError):
        return None


def hints(shape_env: Any) -> dict[Any, int]:
    """The example value of each backed symbol."""
    return {
        symbol: int(value)
        for symbol, value in shape_env.backed_var_to_val.items()
        if getattr(value, "is_integer", False)
    }


def runtime_asserts(shape_env: Any) -> list[Any]:
    """Every deferred runtime assert (checked by the graph at run time), as sympy booleans."""
    return [ra.expr for asserts in shape_env.deferred_runtime_asserts.values() for ra in asserts]


def specialized(shape_env: Any) -> dict[Any, int]:
    """Symbols the trace replaced by a constant (``guard_int``, ``range(n)``, ``Eq(s0, 3)`` guards)."""
    out = {}
    for symbol, target in shape_env.replacements.items():
        if getattr(target, "is_number", False) and getattr(target, "is_integer", False):
            out[symbol] = int(target)
    for symbol, vr in shape_env.var_to_range.items():
        if symbol not in out and vr.is_singleton() and getattr(vr.lower, "is_integer", False):
            out[symbol] = int(vr.lower)
    return out


def tracked_inputs(shape_env: Any) -> list[tuple[str, Any]]:
    """The trace's inputs as (source name, fake value): fake tensors and SymInts/ints."""
    return [(tracked.source.name, tracked.fake) for tracked in (shape_env.tracked_fakes or [])]


def symbol_kind(symbol: Any) -> str:
    """``int`` (backed size or int), ``unbacked`` (data-dependent int), ``float``, or ``other``."""
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    if symbol_is_type(symbol, (SymT.FLOAT, SymT.UNBACKED_FLOAT)):
        return "float"
    if symbol_is_type(symbol, SymT.UNBACKED_INT):
        return "unbacked"
    if symbol_is_type(symbol, SymT.SIZE):
        return "int"
    return "other"


def user_location(shape_env: Any) -> str | None:
    """The user's line the trace is at right now (dynamo's user stack), as torch prints it in guards."""
    try:
        return shape_env._get_sloc().maybe_user_loc or None
    except Exception:  # noqa: BLE001 - a location is a nicety
        return None


def node_expr(value: Any) -> Any:
    """The sympy expression of a SymInt/SymFloat/SymBool, or the plain Python value."""
    node = getattr(value, "node", None)
    return node.expr if node is not None else value
