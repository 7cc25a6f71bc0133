"""``--confirm``: run the counterexample for real, eager against the cached compiled entry.

A counterexample says: at these sizes the installed guards pass, yet the trace assumed
something false there. :func:`confirm` makes that concrete. From the frame's own inputs
it builds new ones at the counterexample's sizes (fresh random values, same dtype, device
and ``requires_grad``), then

1. asks the entry's guard manager whether it accepts them -- if not, the counterexample
   is not real (some guard pt2kit could not read rejects it) and the finding is refuted;
2. calls the frame's original code (eager) and the entry's transformed code (which calls
   the compiled graph) on copies of the same inputs, outside any compile context;
3. compares: one raises and the other not, different exception types, different output
   structure, shapes or values -> confirmed.

Inputs are rebuilt only for frame locals named directly (``L['x']``); a counterexample
about a nested input (``L['self'].weight``) is reported as not confirmable. The frame's
globals and closure are shared with the program: the function runs twice more, so side
effects on them happen twice more.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import types
from typing import Any

import torch

from pt2kit.seams import guard_code
from pt2kit.seams.convert_frame import FrameEntry

_PROPERTY = re.compile(
    r"^L\[(?P<key>'[^']*'|\"[^\"]*\")\](?:\.(?P<prop>size|stride)\(\)\[(?P<dim>\d+)\]|\.(?P<offset>storage_offset)\(\))?$"
)


@dataclasses.dataclass(frozen=True)
class Confirmation:
    confirmed: bool | None
    detail: str
    refuted: bool = False  # the installed guards reject the counterexample: it is not real


def confirm(
    frame: FrameEntry, guard_manager: Any, code: types.CodeType | None, counterexample: dict[str, int], *, seed: int = 0
) -> Confirmation:
    """Run eager and the compiled entry at ``counterexample``; see the module docstring."""
    if code is None:
        return Confirmation(None, "no transformed code to run")
    try:
        inputs = rebuild_inputs(frame.f_locals, counterexample, seed=seed)
    except ValueError as why:
        return Confirmation(None, str(why))
    try:
        accepted = guard_code.passes(guard_manager, inputs)
    except Exception as error:  # noqa: BLE001 - a guard that raises rejects
        return Confirmation(
            False, f"the installed guards reject the counterexample (they raise {type(error).__name__})", refuted=True
        )
    if not accepted:
        return Confirmation(
            False,
            "the installed guards reject the counterexample: a guard pt2kit could not read excludes it",
            refuted=True,
        )
    eager = _run(frame.code, frame, _copy(inputs))
    compiled = _run(code, frame, _copy(inputs))
    return _compare(eager, compiled)


def rebuild_inputs(f_locals: dict[str, Any], counterexample: dict[str, int], *, seed: int = 0) -> dict[str, Any]:
    """The frame's locals with the counterexample's sizes (and ints) put in."""
    wanted: dict[str, dict[str, Any]] = {}
    for name, value in counterexample.items():
        match = _PROPERTY.match(name)
        if match is None:
            raise ValueError(f"cannot rebuild the input {name} (only direct frame locals are rebuilt)")
        key = ast.literal_eval(match["key"])
        entry = wanted.setdefault(key, {"size": {}, "stride": {}, "offset": None, "value": None})
        if match["prop"]:
            entry[match["prop"]][int(match["dim"])] = value
        elif match["offset"]:
            entry["offset"] = value
        else:
            entry["value"] = value
    generator = torch.Generator().manual_seed(seed)
    out = dict(f_locals)
    for key, entry in wanted.items():
        if key not in f_locals:
            raise ValueError(f"the frame has no local {key!r}")
        original = f_locals[key]
        if isinstance(original, torch.Tensor):
            out[key] = _tensor_like(original, entry, generator)
        elif isinstance(original, int) and not isinstance(original, bool) and entry["value"] is not None:
            out[key] = entry["value"]
        else:
            raise ValueError(f"cannot rebuild the input {key!r} of type {type(original).__name__}")
    return out


def _tensor_like(original: torch.Tensor, entry: dict[str, Any], generator: torch.Generator) -> torch.Tensor:
    sizes = [entry["size"].get(i, size) for i, size in enumerate(original.shape)]
    if entry["offset"]:
        raise ValueError("cannot rebuild an input with a nonzero storage offset")
    with torch.no_grad():
        if original.dtype.is_floating_point or original.dtype.is_complex:
            tensor = torch.randn(sizes, generator=generator, dtype=original.dtype)
        elif original.dtype == torch.bool:
            tensor = torch.randint(0, 2, sizes, generator=generator).bool()
        else:
            tensor = torch.randint(-3, 4, sizes, generator=generator).to(original.dtype)
        tensor = tensor.to(original.device)
        strides = [entry["stride"].get(i) for i in range(len(sizes))]
        if (
            any(s is not None for s in strides)
            and tuple(s if s is not None else t for s, t in zip(strides, tensor.stride())) != tensor.stride()
        ):
            full = tuple(s if s is not None else t for s, t in zip(strides, tensor.stride()))
            tensor = torch.empty_strided(sizes, full, dtype=tensor.dtype, device=tensor.device).copy_(tensor)
    return tensor.requires_grad_(True) if original.requires_grad else tensor


def _copy(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (value.detach().clone().requires_grad_(value.requires_grad) if isinstance(value, torch.Tensor) else value)
        for name, value in inputs.items()
    }


@dataclasses.dataclass
class _Outcome:
    value: Any = None
    error: BaseException | None = None


def _run(code: types.CodeType, frame: FrameEntry, inputs: dict[str, Any]) -> _Outcome:
    function = types.FunctionType(code, frame.f_globals, code.co_name, None, frame.closure)
    args, kwargs = _arguments(code, inputs)
    try:
        return _Outcome(value=function(*args, **kwargs))
    except Exception as error:  # noqa: BLE001 - an exception is an outcome here
        return _Outcome(error=error)


def _arguments(code: types.CodeType, inputs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    names = code.co_varnames
    positional = [inputs[name] for name in names[: code.co_argcount]]
    index = code.co_argcount
    kwargs = {name: inputs[name] for name in names[index : index + code.co_kwonlyargcount]}
    index += code.co_kwonlyargcount
    if code.co_flags & 0x04:  # CO_VARARGS
        positional += list(inputs.get(names[index], ()))
        index += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        kwargs.update(inputs.get(names[index], {}))
    return positional, kwargs


def _compare(eager: _Outcome, compiled: _Outcome) -> Confirmation:
    if eager.error is not None and compiled.error is not None:
        if type(eager.error) is type(compiled.error):
            return Confirmation(False, f"eager and the compiled entry both raise {type(eager.error).__name__}")
        return Confirmation(
            True,
            f"eager raises {type(eager.error).__name__}, the compiled entry raises {type(compiled.error).__name__}",
        )
    if eager.error is not None:
        return Confirmation(
            True,
            f"eager raises {type(eager.error).__name__}: {_line(eager.error)}; the compiled entry returns a result",
        )
    if compiled.error is not None:
        return Confirmation(
            True,
            f"eager returns a result; the compiled entry raises {type(compiled.error).__name__}: {_line(compiled.error)}",
        )
    difference = _difference(eager.value, compiled.value)
    if difference is None:
        return Confirmation(False, "eager and the compiled entry agree at these sizes")
    return Confirmation(True, f"eager and the compiled entry disagree: {difference}")


def _difference(a: Any, b: Any, where: str = "output") -> str | None:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{where} is {type(a).__name__} vs {type(b).__name__}"
        if a.shape != b.shape:
            return f"{where} has shape {tuple(a.shape)} eager, {tuple(b.shape)} compiled"
        if a.dtype != b.dtype:
            return f"{where} has dtype {a.dtype} eager, {b.dtype} compiled"
        if not torch.allclose(a.detach().cpu(), b.detach().cpu(), rtol=1e-4, atol=1e-5, equal_nan=True):
            diff = (a.detach().double() - b.detach().double()).abs().max().item() if a.numel() else 0.0
            return f"{where} values differ (max abs difference {diff:.3g})"
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{where} has {len(a)} elements eager, {len(b)} compiled"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{where} has keys {sorted(map(str, a))} eager, {sorted(map(str, b))} compiled"
        for key in a:
            found = _difference(a[key], b[key], f"{where}[{key!r}]")
            if found:
                return found
        return None
    try:
        equal = bool(a == b)
    except Exception:  # noqa: BLE001
        equal = a is b
    return None if equal else f"{where} is {a!r} eager, {b!r} compiled"


def _line(error: BaseException) -> str:
    return str(error).splitlines()[0][:200] if str(error) else ""
