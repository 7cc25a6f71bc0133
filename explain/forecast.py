"""Which input sizes will still recompile a function: validation's forecast, over every tensor argument.

``validation.recompile_forecast`` enumerates the size classes of a function called with one
tensor per given rank, positionally, and asks Z3 which classes no installed cache entry
accepts. Given fewer ranks than the function has tensor arguments, every call it traces
raises (a missing argument), no class compiles, and the answer would read ``complete`` with
nothing in it. :func:`size_forecast` makes sure the forecast covers every tensor argument:

- it reads the function's tensor arguments and their ranks off the cache entries dynamo
  installed on its code (the ``TENSOR_MATCH`` guards on its arguments), so ``ranks`` may be
  left out, or give only the first ones (the rest are the cached ranks);
- where it cannot vary every argument (an argument that is not a tensor comes first, a rank
  is unknown, or the cached graphs disagree on it) or where no class of sizes runs at all,
  the answer is ``incomplete`` with the reason, never ``complete`` with nothing in it.

The answer is validation's (``status``, ``entries``, ``classes``, ``will_recompile``) plus
``inputs`` (each tensor argument and the rank forecast for it) and, when incomplete, ``reason``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from pt2kit.seams import guard_code, guard_text
from pt2kit.seams.convert_frame import original_callable

from .guards import TensorSpec, describe_guards


def size_forecast(fn: Callable[..., Any], ranks: Sequence[int] | None, box: Any, **options: Any) -> dict[str, Any]:
    """The forecast of ``validation.recompile_forecast`` for every tensor argument of ``fn`` (see the module doc)."""
    from validation import forecast_recompiles, sizes

    target = original_callable(fn)
    parameters, required = _positional_parameters(target)
    cached = cached_tensor_ranks(target)
    inputs, why_not = _inputs(parameters, required, cached, list(ranks) if ranks is not None else None)
    if why_not is not None:
        return _incomplete(why_not, entries=len(_entries(target)), inputs=inputs)
    report = sizes(target, list(inputs.values()), box, names=list(inputs), **options)
    compiling = [cls for cls in report.classes if cls.outcome == "ok"]
    if not compiling:
        outcomes = sorted({f"{cls.outcome}: {cls.message}" if cls.message else cls.outcome for cls in report.classes})
        call = f"{getattr(target, '__qualname__', type(target).__qualname__)}({', '.join(inputs)})"
        return _incomplete(
            f"no size in the box runs {call} without an error ({'; '.join(outcomes) or 'no class found'}), "
            "so nothing compiles there to forecast",
            entries=len(_entries(target)),
            inputs=inputs,
        )
    forecast = forecast_recompiles(report, target)
    forecast["inputs"] = inputs
    if report.status != "complete":
        forecast["reason"] = report.reason or "the enumeration of size classes stopped early"
    return forecast


def cached_tensor_ranks(target: Any) -> dict[str, set[int]]:
    """For each argument of ``target`` that a cache entry guards as a tensor, the ranks it was compiled for.

    An argument guarded, but never as a tensor, maps to an empty set.
    """
    ranks: dict[str, set[int]] = {}
    for entry in _entries(target):
        for line in describe_guards(entry.guard_manager):
            if guard_text.source_scope(line.source) != "local" or guard_text.first_local(line.source) != line.source:
                continue  # not an argument itself (an attribute of one, a size...)
            name = guard_text.readable(line.source)
            found = ranks.setdefault(name, set())
            spec = TensorSpec.parse(guard_text.code_of(line.raw)) if line.kind == "TENSOR_MATCH" else None
            if spec is not None:
                found.add(len(spec.size))
    return ranks


def _inputs(
    parameters: list[str], required: list[str], cached: dict[str, set[int]], ranks: list[int] | None
) -> tuple[dict[str, int], str | None]:
    """The tensor arguments to vary and their ranks, or why every tensor argument cannot be varied.

    ``parameters`` are the positional parameters, ``required`` those of them without a default.
    """
    tensors = [name for name in parameters if cached.get(name)]
    count = max(len(tensors) and parameters.index(tensors[-1]) + 1, len(ranks or ()))
    inputs: dict[str, int] = {}
    for index, name in enumerate(parameters[:count] + [f"arg{i}" for i in range(len(parameters), count)]):
        seen = cached.get(name, set())
        if ranks is not None and index < len(ranks):
            inputs[name] = int(ranks[index])
        elif len(seen) == 1:
            inputs[name] = next(iter(seen))
        elif name in cached and not seen:
            return inputs, (
                f"`{name}` is not a tensor in the cached graphs, and the forecast calls the function with tensors "
                f"alone: it varies the sizes of tensor arguments that come first"
            )
        elif seen:
            return inputs, f"the cached graphs hold `{name}` with ranks {sorted(seen)}: give its rank in `ranks`"
        else:
            return inputs, f"the rank of `{name}` is unknown (no cached graph guards it): give it in `ranks`"
    if not inputs:
        why = "no cached graph of the function says which arguments are tensors: give one rank per tensor argument"
        return inputs, why
    left = [name for name in required[len(inputs) :]]
    if left:
        kind = "not a tensor in the cached graphs" if all(name in cached for name in left) else "not given a rank"
        return inputs, (
            f"the function also takes {', '.join(f'`{name}`' for name in left)} ({kind}), and the forecast calls it "
            f"with one tensor per rank alone"
        )
    return inputs, None


def _incomplete(reason: str, *, entries: int, inputs: dict[str, int]) -> dict[str, Any]:
    return {
        "status": "incomplete",
        "entries": entries,
        "classes": 0,
        "will_recompile": [],
        "inputs": inputs,
        "reason": reason,
    }


def _entries(target: Any) -> list[guard_code.CacheEntry]:
    code = getattr(getattr(target, "forward", target), "__code__", None)
    return guard_code.cache_entries(code) if code is not None else []


def _positional_parameters(target: Any) -> tuple[list[str], list[str]]:
    """The positional parameters of ``target``, and those of them without a default."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return [], []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in signature.parameters.values() if p.kind in kinds]
    return [p.name for p in positional], [p.name for p in positional if p.default is inspect.Parameter.empty]


__all__ = ["cached_tensor_ranks", "size_forecast"]
