"""What to do about recompiles: remedies read off the guards a function's recompiles failed.

A remedy is offered only where the failures make one clear, per input that changed:

- a size that varies: ``torch._dynamo.mark_dynamic`` on that dimension, or ``dynamic=True``;
- a size that reached 0 or 1 after going dynamic: ``torch._dynamo.decorators.mark_unbacked``;
- a Python scalar (or a global) whose value changes: pass it as a tensor (or an argument);
- a dtype that switches, or an object that is new on every call;

and, when a recompile limit refused a compile, how to raise it.

Each change is told once, however many guards or cached graphs it failed (a call checked
against two cached graphs fails the same size guard of each), and inputs that changed alike
share one remedy that names them all, with the dimensions. A remedy speaks the user's code:
the values a resume function receives (scope ``computed``: computed before a graph break,
named by the user's variable or the expression that computed it, :mod:`explain.names`) are
not something the caller passes, so their remedies point at the graph break and the inputs
they follow instead of asking to mark or wrap them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .guards import GuardFailure
from .names import COMPUTED, GLOBAL

#: Distinct changes quoted per dimension or input before the rest are elided.
QUOTED = 3


def suggest_remedies(
    failures: Sequence[GuardFailure],
    limit_type: str | None = None,
    resumed_at: int | None = None,
    break_line: str | None = None,
) -> list[str]:
    """Remedies for the recompiles of one function, only where its failed guards make one clear.

    ``failures`` are all the guards its recompiles failed, in order; ``limit_type`` the
    recompile limit that refused a compile of it (``recompile_limit``...), if one did. For a
    resume function, ``resumed_at`` is the line of the graph break it resumes after and
    ``break_line`` that line's source, when known.
    """
    where = f"the graph break at line {resumed_at}" if resumed_at is not None else "a graph break"
    if break_line:
        where += f" (`{break_line}`)"
    remedies = _size_remedies([f for f in failures if f.kind == "size"], where)
    remedies += _small_size_remedies([f for f in failures if f.kind == "dynamic_shape"])
    for name, changes in _by_name(failures, "value").items():
        change = changes[0]
        if not _is_number(change.expected):
            continue
        seen = _quoted(f"{f.expected} → {f.actual}" for f in changes)
        if change.scope == COMPUTED:
            remedies.append(
                f"{_code(name)} is a Python number computed before {where}, and the graph after the break is "
                f"compiled for its value ({seen}), so a new value compiles again. Keep it a tensor (without `.item()`, "
                f"`float()` or `int()`) so the graph does not break there, or set "
                f"`torch._dynamo.config.capture_scalar_outputs = True` to keep `.item()` in the graph."
            )
        elif change.scope == GLOBAL:
            remedies.append(
                f"Global `{name}` changed ({seen}); dynamo bakes globals into the graph as constants. Pass it to the "
                f"function as an argument (a tensor if it changes often)."
            )
        elif "." in name and _config_has("allow_unspec_int_on_nn_module"):  # an attribute: maybe a module's
            remedies.append(
                f"`{name}` is a Python number that changes between calls ({seen}); dynamo specializes on its value. "
                f"An int attribute of an `nn.Module` stays static even with `dynamic=True` (pytorch#128319): set "
                f"`torch._dynamo.config.allow_unspec_int_on_nn_module = True`, or keep it in a tensor."
            )
        else:
            remedies.append(
                f"`{name}` is a Python scalar that changes between calls ({seen}); dynamo specializes on its value. "
                f"Pass it as a tensor (`torch.tensor({name})`) instead, or compile with `dynamic=True` so numbers "
                f"stay symbolic."
            )
    for name, changes in _by_name(failures, "dtype").items():
        kinds = _quoted(f"{f.expected} → {f.actual}" for f in changes)
        if changes[0].scope == COMPUTED:
            remedies.append(
                f"{_code(name)}, computed before {where}, switches dtype ({kinds}): each dtype needs its own graph. "
                f"It follows the dtypes of your inputs: cast those to one dtype if you do not need both."
            )
        else:
            remedies.append(
                f"`{name}` switches dtype ({kinds}): each dtype needs its own graph. Cast it to one dtype before the "
                f"call if you do not need both."
            )
    for name, changes in _by_name(failures, "identity").items():
        if changes[0].scope != COMPUTED:
            remedies.append(
                f"`{name}` is a different object from call to call (e.g. a new module or function each time): create "
                f"it once and reuse it."
            )
    if limit_type is not None:
        per_compile = " (or `torch.compile(..., recompile_limit=N)`)" if _compile_takes("recompile_limit") else ""
        remedies.append(
            f"Fix the changing inputs above, or raise the limit: `torch._dynamo.config.{limit_type} = N`{per_compile}."
        )
    return remedies


def _config_has(option: str) -> bool:
    """Does this torch's dynamo config have ``option``?"""
    from pt2kit.seams import config

    return hasattr(config.module("torch._dynamo.config"), option)


def _compile_takes(option: str) -> bool:
    """Does this torch's ``torch.compile`` take ``option`` (``recompile_limit``: torch 2.13 on)?"""
    import inspect

    import torch

    return option in inspect.signature(torch.compile).parameters


def _size_remedies(failures: list[GuardFailure], where: str) -> list[str]:
    """One remedy per set of inputs whose sizes changed alike: which dims, from what to what, each change once."""
    changes: dict[str, dict[int, list[str]]] = {}
    computed: dict[str, bool] = {}
    for failure in failures:
        if failure.dim is None:
            continue
        seen = changes.setdefault(failure.name, {}).setdefault(failure.dim, [])
        change = f"{failure.expected} → {failure.actual}"
        if change not in seen:
            seen.append(change)
        computed[failure.name] = failure.scope == COMPUTED
    alike: dict[tuple[bool, tuple[tuple[int, tuple[str, ...]], ...]], list[str]] = {}  # (computed, dims): names
    for name, by_dim in changes.items():
        key = (computed[name], tuple((dim, tuple(seen)) for dim, seen in sorted(by_dim.items())))
        alike.setdefault(key, []).append(name)
    remedies = []
    for (is_computed, dims), names in alike.items():
        who, change = _names(names), "changes" if len(names) == 1 else "change"
        if len(dims) == 1:
            what = f"in dim {dims[0][0]} ({_quoted(dims[0][1])})"
        else:
            what = f"in dims {_and([str(dim) for dim, _ in dims])} ({'; '.join(f'dim {d}: {_quoted(c)}' for d, c in dims)})"
        if is_computed:
            remedies.append(
                f"{who}, computed before {where}, {change} size {what}: the graph after the break is compiled for "
                f"the sizes your inputs give {'it' if len(names) == 1 else 'them'}. Make those input dimensions "
                f"dynamic (`torch._dynamo.mark_dynamic(input, dim)` before the first compiled call) or compile with "
                f"`torch.compile(..., dynamic=True)`; removing the graph break removes this recompile too."
            )
        else:
            marks = "; ".join(f"torch._dynamo.mark_dynamic({name}, {dim})" for name in names for dim, _ in dims)
            remedies.append(
                f"{who} {change} size {what}: call `{marks}` before the first compiled call, or compile with "
                f"`torch.compile(..., dynamic=True)`, so one graph serves every size."
            )
    return remedies


def _small_size_remedies(failures: list[GuardFailure]) -> list[str]:
    """Dynamic dimensions that reached 0 or 1 (each input and dim once), which dynamic shapes compile apart."""
    small = list(dict.fromkeys((s.name, s.dim, s.size) for f in failures for s in f.sizes if s.size in (0, 1)))
    scope = {f.name: f.scope for f in failures}
    markable = list(dict.fromkeys((name, dim) for name, dim, _ in small if scope.get(name) != COMPUTED))
    if not small:
        return []
    reached = _and([f"{_code(name)} (dim {dim}: {size})" for name, dim, size in small])
    sizes = " or ".join(sorted({str(size) for _, _, size in small}))
    text = f"{reached} reached a size of {sizes}, which dynamic shapes compile separately"
    if not markable:
        return [text + ": these sizes follow your inputs; if they must share the graph, mark the inputs' dims with "
                "`torch._dynamo.decorators.mark_unbacked`."]  # fmt: skip
    marks = "; ".join(f"torch._dynamo.decorators.mark_unbacked({name}, {dim})" for name, dim in markable)
    return [f"{text}: if those sizes must share the graph, use `{marks}`."]


def _by_name(failures: Sequence[GuardFailure], kind: str) -> dict[str, list[GuardFailure]]:
    """The failures of one kind, grouped by the input that changed, in order of appearance."""
    grouped: dict[str, list[GuardFailure]] = {}
    for failure in failures:
        if failure.kind == kind:
            grouped.setdefault(failure.name, []).append(failure)
    return grouped


def _quoted(changes: Iterable[str]) -> str:
    """Distinct changes, in order, the first few of them."""
    distinct = list(dict.fromkeys(changes))
    return ", ".join(distinct[:QUOTED]) + (", ..." if len(distinct) > QUOTED else "")


def _code(name: str) -> str:
    """A name as code; a description of a value (``the value computed on line 9``) stays prose."""
    return name if name.startswith(("the value ", "a value ")) else f"`{name}`"


def _names(names: list[str]) -> str:
    return _and([_code(name) for name in names])


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _is_number(text: str | None) -> bool:
    if text is None:
        return False
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


__all__ = ["suggest_remedies"]
