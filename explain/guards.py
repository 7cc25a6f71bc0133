"""Dynamo guards, read back in the user's words: what a graph assumes, and every way a call broke it.

A compiled frame keeps its guards as a tree in C++ (``GuardManagerWrapper.root``): one
node per value dynamo looked at (``L['x']``, ``G['N']``, ``L['self']._modules['fc']``),
each holding leaf guards (``TENSOR_MATCH``, ``EQUALS_MATCH``, ...), plus "epilogue"
lambda guards at the root for symbolic shapes.

:func:`describe_guards` walks that tree and turns each leaf's ``verbose_code_parts`` (the
same strings ``TORCH_LOGS=guards`` prints) into one readable :class:`GuardLine`. Values are
named as the user spells them (:class:`explain.names.FrameNames`: after a graph break, a
stack value by the expression that computed it, never dynamo's ``___stack0``).

:func:`failing_guards` answers pytorch#147428. ``check_verbose`` -- which
``TORCH_LOGS=recompiles`` and ``torch._dynamo.utils.guard_failures`` use -- stops at the
first failing guard. To list *all* of them we reuse the mechanism torch builds its
"diff guard manager" with: ``RootGuardManager.clone_manager(filter)`` clones the tree
restricted to chosen guard sources. Checking a clone restricted to one subtree tells
whether anything in it fails, and a clone restricted to one node tells whether that node's
own guards fail; descending only into failing subtrees keeps this cheap. The tree and its
clones are read through :mod:`pt2kit.seams.guard_code`, the guard code's text through
:mod:`pt2kit.seams.guard_text`. Every message is still torch's own; where torch's message for a tensor stops at the first mismatching
property, :class:`TensorSpec` completes it with the others (dtype *and* size, say).

Limits: torch checks the root's own "ambient" guards (grad mode, autocast, default device,
torch-function modes) before anything else and every clone keeps them, so when one of
those fails it is reported alone and the per-input guards cannot be checked separately.
Within one node only its first failing leaf is reported (e.g. a type change hides the
value change that follows from it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sized
from typing import Any, cast

import torch

from pt2kit.seams import guard_code, guard_text
from pt2kit.seams.guard_code import GuardNode

from .names import PLAIN, FrameNames

AMBIENT_GUARD_KINDS = frozenset(
    {
        "GLOBAL_STATE",
        "TORCH_FUNCTION_MODE_STACK",
        "DEFAULT_DEVICE",
        "DIMENSION_DYNAMIC_MARKING_GUARD",
        "NO_TENSOR_ALIASING",
    }
)
"""Leaf guards that track process state or bookkeeping rather than the user's values."""

_MISSING = object()

#: How the user spells a guard's source (``self.fc.weight`` for ``L['self']._modules['fc']...``).
readable = guard_text.readable
#: ``local``, ``global`` or ``other``.
source_scope = guard_text.source_scope
#: A guard's code without torch's ``# user code`` comment.
code_of = guard_text.code_of


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """What a ``TENSOR_MATCH`` guard expects of a tensor (``None`` sizes are dynamic dims)."""

    dtype: str
    device: str | None
    requires_grad: bool
    size: tuple[int | None, ...]
    stride: tuple[int | None, ...]

    @classmethod
    def parse(cls, code: str) -> TensorSpec | None:
        """The spec of a ``check_tensor(...)`` guard's code, or None when ``code`` holds none."""
        fields = guard_text.tensor_check(code)
        return cls(**cast(dict[str, Any], fields)) if fields is not None else None

    def describe(self) -> str:
        dims = ", ".join("*" if d is None else str(d) for d in self.size)
        strides = ", ".join("*" if s is None else str(s) for s in self.stride)
        text = f"Tensor {self.dtype}, size=[{dims}], stride=[{strides}]"
        if self.requires_grad:
            text += ", requires_grad"
        if self.device is not None:
            text += f", device={self.device}"
        return text

    def mismatches(self, value: object) -> Iterator[tuple[str, str, int | None, str, str]]:
        """Every property of ``value`` this spec rejects, as ``(kind, what, dim, expected, actual)``."""
        if not isinstance(value, torch.Tensor):
            yield "type", "type", None, "Tensor", type(value).__name__
            return
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype != self.dtype:
            yield "dtype", "dtype", None, self.dtype, dtype
        if self.device is not None and str(value.device.index) != self.device:
            yield "device", "device", None, self.device, str(value.device)
        if value.requires_grad != self.requires_grad:
            yield "requires_grad", "requires_grad", None, str(self.requires_grad), str(value.requires_grad)
        if value.dim() != len(self.size):
            yield "rank", "number of dims", None, str(len(self.size)), str(value.dim())
            return
        for dim, (expected, actual) in enumerate(zip(self.size, value.shape)):
            if expected is not None and expected != actual:
                yield "size", f"size[{dim}]", dim, str(expected), str(actual)
        for dim, (expected, actual) in enumerate(zip(self.stride, value.stride())):
            if expected is not None and expected != actual:
                yield "stride", f"stride[{dim}]", dim, str(expected), str(actual)


@dataclasses.dataclass(frozen=True)
class GuardLine:
    """One guard of a compiled graph, readable, with torch's own text kept in ``raw``."""

    kind: str
    source: str
    text: str
    raw: str

    @property
    def ambient(self) -> bool:
        """True for guards on process state and bookkeeping, which rich output folds away."""
        return self.kind in AMBIENT_GUARD_KINDS or "top_saved_tensors_hooks" in self.raw

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "source": self.source, "text": self.text, "raw": self.raw}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardLine:
        """The line :meth:`to_dict` wrote (all of it: it reads back as an equal line)."""
        return cls(kind=data["kind"], source=data["source"], text=data["text"], raw=data["raw"])


@dataclasses.dataclass(frozen=True)
class SizeNow:
    """One input dimension a shape condition reads, and its size in the call that failed the condition."""

    name: str
    dim: int
    size: int


@dataclasses.dataclass(frozen=True)
class GuardFailure:
    """One guard a call failed: which input, what kind of change, from what to what."""

    name: str
    source: str
    scope: str
    """``local`` (an argument of the frame), ``global``, ``computed`` (computed in the user's function before a
    graph break, received by a resume function) or ``other``."""
    kind: str
    expected: str | None
    actual: str | None
    text: str
    raw: str
    dim: int | None = None
    """For size and stride changes, the tensor dimension that changed."""
    sizes: tuple[SizeNow, ...] = ()
    """For a failed shape condition (``dynamic_shape``), every input dimension it reads, with its size now."""

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardFailure:
        """The failure :meth:`to_dict` wrote (every field: it reads back as an equal failure)."""
        fields = {field.name: data[field.name] for field in dataclasses.fields(cls) if field.name != "sizes"}
        return cls(**fields, sizes=tuple(SizeNow(**size) for size in data.get("sizes") or ()))


def describe_guards(guard_manager: Any, names: FrameNames = PLAIN) -> list[GuardLine]:
    """Every guard of a compiled frame, in torch's tree order, as readable lines (``names``: the frame's)."""
    if guard_code.is_deleted(guard_manager):
        return []
    lines: list[GuardLine] = []
    seen: set[str] = set()  # relational guards (tensor aliasing) hang off several nodes

    def add(kind: str, node: GuardNode | None, raw: str) -> None:
        if raw in seen:
            return
        seen.add(raw)
        source = node.source if node is not None else ""
        lines.append(GuardLine(kind, source, _describe(kind, node, raw, names), raw))

    for node in guard_code.tree(guard_manager).walk():
        for leaf in node.leaves():
            for part in leaf.parts:
                # the root's own guards are on process state, not on a value from the frame
                add(leaf.kind, None if node.is_root else node, part)
    for leaf in guard_code.epilogue(guard_manager):
        for part in leaf.parts:
            add(leaf.kind, None, part)
    return lines


def failing_guards(guard_manager: Any, f_locals: Mapping[str, object], names: FrameNames = PLAIN) -> list[GuardFailure]:
    """Every guard of ``guard_manager`` that the frame locals ``f_locals`` fail (see module doc).

    ``names`` spells the frame's values for the user (:func:`explain.names.frame_names`)."""
    if guard_code.is_deleted(guard_manager):
        reason = guard_code.invalidation_reason(guard_manager)
        return [GuardFailure("", "", "other", "invalidated", None, None, reason, reason)]
    scope = guard_code.eval_scope(guard_manager, f_locals)
    root = guard_code.tree(guard_manager)
    root_source = root.source

    def check(sources: set[str]) -> tuple[bool, tuple[str, ...]]:
        return guard_code.check_restricted(guard_manager, sources, f_locals)

    failures: list[GuardFailure] = []
    passed, parts = check({root_source})
    baseline_parts = None if passed else parts
    if baseline_parts is not None:
        epilogue_parts = {part for leaf in guard_code.epilogue(guard_manager) for part in leaf.parts}
        if not set(baseline_parts) <= epilogue_parts:
            # An ambient root guard failed; every clone keeps it, so nothing below is checkable.
            return [_root_failure(part) for part in baseline_parts]
        failures.extend(_symbolic_failures(baseline_parts, scope, names))

    def failed(result: tuple[bool, tuple[str, ...]]) -> bool:
        passed, parts = result
        return not passed and parts != baseline_parts

    def visit(node: GuardNode, path: set[str]) -> None:
        if not failed(check(path | {n.source for n in node.walk()})):
            return
        own = check(path | {node.source})
        if failed(own):
            failures.extend(_node_failures(node, own[1], scope, names))
            return  # the value itself changed; guards on its attributes would only echo that
        for child in node.children():
            visit(child, path | {node.source})

    for child in root.children():
        visit(child, {root_source})
    return failures


@dataclasses.dataclass(frozen=True)
class _Guarded:
    """The value one guard node looks at, now: how torch and the user name it, and what it is."""

    source: str
    name: str
    scope: str
    value: object
    names: FrameNames

    @classmethod
    def of(cls, node: GuardNode, scope: dict[str, Any], names: FrameNames) -> _Guarded:
        source = node.source
        name, where = names.value(source)
        return cls(source, name, where, _evaluate(source, scope), names)

    @property
    def label(self) -> str:
        return f"global {self.name}" if self.scope == "global" else self.names.label(self.source)

    @property
    def now(self) -> str | None:
        return None if self.value is _MISSING else _short_repr(self.value)

    def failure(
        self, kind: str, expected: str | None, actual: str | None, text: str, raw: str, dim: int | None = None
    ) -> GuardFailure:
        return GuardFailure(self.name, self.source, self.scope, kind, expected, actual, text, raw, dim)


def _node_failures(
    node: GuardNode, parts: tuple[str, ...], scope: dict[str, Any], names: FrameNames
) -> list[GuardFailure]:
    """What failed among one node's own leaf guards, given torch's ``check_verbose`` parts."""
    guarded = _Guarded.of(node, scope, names)
    leaves = node.leaves()
    failed_leaf = next((leaf for leaf in leaves if set(parts) & set(leaf.parts)), None)
    if failed_leaf is None:
        # torch reports a TENSOR_MATCH failure in words ("tensor 'L['x']' dtype mismatch...")
        # rather than with the guard's code, and only its first mismatching property.
        raw = "; ".join(parts)
        tensor_leaves = [leaf for leaf in leaves if leaf.kind == "TENSOR_MATCH"]
        specs = [TensorSpec.parse(part) for leaf in tensor_leaves for part in leaf.parts]
        spec = next((spec for spec in specs if spec is not None), None)
        if spec is None or guarded.value is _MISSING or not guard_text.is_tensor_mismatch(parts[0]):
            return [guarded.failure("other", None, guarded.now, names.spell(raw), raw)]
        return [
            guarded.failure(kind, expected, actual, f"{guarded.label}: {what} {expected} → {actual}", raw, dim)
            for kind, what, dim, expected, actual in spec.mismatches(guarded.value)
        ] or [guarded.failure("tensor", None, guarded.now, names.spell(raw), raw)]
    return [_leaf_failure(failed_leaf.kind, guarded, code_of(parts[0]), node)]


def _leaf_failure(kind: str, guarded: _Guarded, code: str, node: GuardNode) -> GuardFailure:
    """One failed leaf guard of a known kind, with the expected value read off its code."""
    label, now = guarded.label, guarded.now
    if kind == "EQUALS_MATCH":
        expected = code.rpartition(" == ")[2]
        return guarded.failure("value", expected, now, f"{label}: {expected} → {now}", code)
    if kind == "TYPE_MATCH":
        expected = node.guarded_type().__name__
        actual = None if guarded.value is _MISSING else type(guarded.value).__name__
        return guarded.failure("type", expected, actual, f"{label}: type {expected} → {actual}", code)
    if kind == "ID_MATCH":
        return guarded.failure("identity", None, now, f"{label}: a different object than the one compiled for", code)
    if kind == "LENGTH_CHECK":
        expected = code.rpartition(" == ")[2]
        actual = None if guarded.value is _MISSING else str(len(cast(Sized, guarded.value)))
        return guarded.failure("length", expected, actual, f"{label}: length {expected} → {actual}", code)
    if kind in ("NONE_MATCH", "NOT_NONE_MATCH", "TRUE_MATCH", "FALSE_MATCH"):
        constant = code.split(" is ", 1)[1] if " is " in code else None
        spelled = guarded.names.spell(code)
        return guarded.failure("value", constant, now, f"{label}: {spelled} no longer holds (now {now})", code)
    return guarded.failure(kind.lower(), None, now, f"{guarded.names.spell(code)} no longer holds", code)


def _symbolic_failures(parts: tuple[str, ...], scope: dict[str, Any], names: FrameNames) -> list[GuardFailure]:
    """The failing conditions of a symbolic-shape lambda guard, each evaluated as torch does.

    torch's ``get_guard_fail_reason_helper`` evaluates these code parts one by one with
    ``eval``; so do we, but we keep every false one instead of stopping at the first.
    """
    failures = []
    for part in parts:
        code = code_of(part)
        try:
            holds = eval(code, dict(scope["__globals__"]), scope)  # noqa: S307 -- torch's own guard code
        except Exception:  # noqa: BLE001 - a guard that cannot be evaluated here does not hold
            holds = False
        if holds:
            continue
        values = {expr: _evaluate(expr, scope) for expr in guard_text.size_expressions(code)}
        now = ", ".join(f"{names.spell(expr)} = {val}" for expr, val in values.items() if val is not _MISSING)
        sizes = tuple(
            SizeNow(names.value(guard_text.first_local(expr))[0], dim, val)
            for expr, val in values.items()
            if (dim := guard_text.size_dim(expr)) is not None and ".size()" in expr and isinstance(val, int)
        )
        source = guard_text.first_local(code)
        name, where = names.value(source)
        text = f"{names.spell(code)} no longer holds" + (f" ({now})" if now else "")
        failures.append(
            GuardFailure(
                name,
                source,
                where,
                "dynamic_shape",
                names.spell(code),
                now or None,
                text,
                code,
                guard_text.size_dim(code),
                tuple(dict.fromkeys(sizes)),  # a condition may read one size twice
            )
        )
    return failures


def _root_failure(part: str) -> GuardFailure:
    kind = "global_state" if part.startswith("GLOBAL_STATE") else "ambient"
    text = readable(code_of(part)) + " (torch checks this process state first, so other guards were not checked)"
    return GuardFailure("", "", "other", kind, None, None, text, part)


def _describe(kind: str, node: GuardNode | None, raw: str, names: FrameNames) -> str:
    code = code_of(raw)
    name = names.value(node.source)[0] if node is not None else ""
    if kind == "TENSOR_MATCH" and (spec := TensorSpec.parse(code)) is not None:
        return f"{name}: {spec.describe()}"
    if kind == "TYPE_MATCH" and node is not None:
        return f"type({name}) is {node.guarded_type().__name__}"
    if kind == "ID_MATCH" and node is not None:
        return f"{name} is the same {node.guarded_type().__name__} object as when compiled"
    if kind == "GLOBAL_STATE":
        return "torch global state unchanged (grad mode, autocast, default dtype, deterministic algorithms, ...)"
    if kind == "TORCH_FUNCTION_MODE_STACK":
        return "no torch function mode entered or left"
    if kind == "DEFAULT_DEVICE":
        return "default device unchanged"
    return names.spell(code)


def _evaluate(source: str, scope: dict[str, Any]) -> object:
    try:
        return eval(source, dict(scope["__globals__"]), scope)  # noqa: S307 -- torch's guard source
    except Exception:  # noqa: BLE001 - a value the guard source cannot give here
        return _MISSING


def _short_repr(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor {str(value.dtype).removeprefix('torch.')} {list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = [
    "GuardLine",
    "GuardFailure",
    "SizeNow",
    "TensorSpec",
    "describe_guards",
    "failing_guards",
    "readable",
    "source_scope",
    "AMBIENT_GUARD_KINDS",
]
