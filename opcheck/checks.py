"""The checks run on one recorded call of a custom op.

Each check is a function ``(op, args, kwargs) -> None`` that works on its own
copies of the arguments. It returns when the op is fine, raises
:class:`CheckFailed` with a sentence saying what is wrong, or
:class:`NotApplicable` when the call cannot exercise it (no input requires grad).
The names are torch's own ``test_utils`` names, so they line up with
``torch.library.opcheck`` and with the keys of torch's failures-dict files.

What comes from torch, and where we go further
-----------------------------------------------
(torch's pieces are reached through :mod:`pt2kit.seams.optests`, ``ops`` and ``fake_tensor``.)

* ``test_schema``: torch's ``SchemaCheckMode`` finds outputs that alias or *are*
  inputs without the schema saying so. Its mutation test compares with
  ``torch.allclose``, which misses a kernel that changes an input by an ulp (an
  in-place scale and unscale, say). We add a **bit-identical** before/after
  comparison of every argument the schema does not mark mutable.
* ``test_autograd_registration``: torch's ``autograd_registration_check`` catches
  autograd wired to a backend key. An op with *no* autograd formula passes it when
  its kernel detaches: backprop then goes through torch's autograd fallback, which
  only *warns* and returns wrong (None) gradients. We run a backward pass and turn
  that warning, and the "no autograd formula" error of ``custom_op``, into failures.
* ``test_faketensor``: same comparison as torch's ``CrossRefFakeMode`` (shape,
  dtype, device, significant strides, storage offset, aliasing) but written
  out so each mismatch names which side said what, e.g. "fake kernel says shape
  (5,), real kernel gives (4,)", and all mismatches are listed, not the first.
  Torch already compares strides here; a missing fake kernel gets a plain message.
* ``test_aot_dispatch_static`` / ``_dynamic``: torch's ``aot_autograd_check``
  (outputs and gradients under AOTAutograd vs eager), both by default where
  ``torch.library.opcheck`` runs only the dynamic one. Failures are reported by
  their root cause and the user frame that raised it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import torch
from pt2kit.seams import pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from pt2kit.seams import dynamo_exc, dynamo_utils, fake_tensor, ops, optests
from opcheck.recording import Op, snapshot_tensor

Status = Literal["pass", "fail", "n/a"]
Check = Callable[[Op, tuple[Any, ...], dict[str, Any]], None]


class CheckFailed(AssertionError):
    """The op got something wrong; the message says what, in one or two sentences."""


class NotApplicable(Exception):
    """This call cannot exercise the check (e.g. no argument requires grad)."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check on one call: ``pass``, ``fail`` (with what was wrong) or ``n/a`` (with why)."""

    check: str
    status: Status
    message: str = ""


# -- test_schema ---------------------------------------------------------------------


def check_schema(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Undeclared mutation (bit-identical) and undeclared aliasing of inputs by outputs."""
    args, kwargs = _copies(args, kwargs, keep_requires_grad=False)
    before = {name: _tensors_in(value, clone=True) for name, value, _ in ops.schema_arguments(op, args, kwargs)}
    schema_error: RuntimeError | None = None
    try:
        with optests.schema_check_mode():
            op(*args, **kwargs)
    except RuntimeError as error:  # SchemaCheckMode reports aliasing problems this way
        schema_error = error
    problems = []
    for name, value, declared_mutable in ops.schema_arguments(op, args, kwargs):
        if declared_mutable:
            continue
        for old, new in zip(before[name], _tensors_in(value, clone=False), strict=True):
            change = _describe_change(old, new)
            if change:
                problems.append(f"argument '{name}' is not declared mutable in the schema, but {change}")
    if problems:
        raise CheckFailed(f"{'; '.join(problems)} (schema: {ops.schema(op)})")
    if schema_error is not None:
        raise CheckFailed(str(schema_error).strip())


def _describe_change(before: torch.Tensor, after: torch.Tensor) -> str | None:
    """How ``after`` differs from ``before``, bit for bit; None when identical."""
    if before.shape != after.shape:
        return f"the op resized it from {tuple(before.shape)} to {tuple(after.shape)}"
    if before.layout != torch.strided or before.is_quantized:
        return None if torch.equal(before, after) else "the op changed its values"
    if before.stride() != after.stride():
        return f"the op restrided it from {before.stride()} to {after.stride()}"
    old, new = _bytes_per_element(before), _bytes_per_element(after)
    changed = (old != new).any(dim=1)
    count = int(changed.sum())
    if count == 0:
        return None
    text = f"the op changed {count} of {before.numel()} elements (bit-for-bit comparison)"
    if before.is_floating_point():
        delta = (after.double() - before.double()).abs().nan_to_num(nan=float("inf")).max()
        text += f", by up to {float(delta):.3g}"
        if torch.allclose(before, after, equal_nan=True):
            text += "; too small for torch.library.opcheck's allclose-based test_schema to notice"
    return text


def _bytes_per_element(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).reshape(flat.numel(), tensor.element_size())


# -- test_autograd_registration ----------------------------------------------------------

_FALLBACK_WARNING = "an autograd kernel was not registered to the Autograd key"
_CUSTOM_OP_NO_FORMULA = "no autograd formula was registered"


def check_autograd_registration(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """torch's registration check, then a real backward pass that must not hit the fallback."""
    if not _any_requires_grad((args, kwargs)):
        raise NotApplicable("no argument requires grad")
    try:
        optests.autograd_registration_check(op, *_copies(args, kwargs))
    except AssertionError as error:
        raise CheckFailed(str(error)) from error
    _backprop_without_fallback(op, *_copies(args, kwargs))


def _backprop_without_fallback(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
    with optests.autograd_fallback_warns(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = [
            t for t in pytree.tree_leaves(op(*args, **kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad
        ]
        if not outputs:
            return  # nothing differentiable came out: nothing to get wrong
        try:
            grads = torch.autograd.grad(
                outputs, inputs, grad_outputs=[torch.ones_like(t) for t in outputs], allow_unused=True
            )
        except RuntimeError as error:
            if _CUSTOM_OP_NO_FORMULA in str(error):
                raise CheckFailed(
                    f"{op.name()} was called with inputs that require grad, but it has no autograd formula, "
                    f"so backward raises: {_first_line(error)}"
                ) from error
            raise CheckFailed(f"backward through {op.name()} raised {_describe_exception(error)}") from error
    if any(_FALLBACK_WARNING in str(w.message) for w in caught):
        missing = sum(g is None for g in grads)
        raise CheckFailed(
            f"{op.name()} was called with inputs that require grad, but it has no autograd formula: backward "
            f"goes through torch's autograd fallback, which only warns ('{op.name()}: {_FALLBACK_WARNING}(s)') "
            f"and gives silently wrong gradients ({missing} of {len(grads)} input gradients came back None). "
            f"torch.library.opcheck passes this op. Register a formula with torch.library.register_autograd."
        )


# -- test_faketensor ------------------------------------------------------------------------


def check_fake_tensor(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The fake (meta) kernel must describe the real kernel's outputs exactly."""
    real_args, real_kwargs = _copies(args, kwargs, keep_requires_grad=False)
    real_out = op(*real_args, **real_kwargs)
    # The mode's ShapeEnv lets fake kernels allocate data-dependent sizes (ctx.new_dynamic_size()).
    mode = fake_tensor.static_mode()
    fake_args, fake_kwargs = pytree.tree_map_only(
        torch.Tensor,
        lambda t: fake_tensor.static_fake(mode, t),
        _copies(args, kwargs, keep_requires_grad=False),
    )
    try:
        with mode:
            fake_out = op(*fake_args, **fake_kwargs)
    except Exception as error:
        if fake_tensor.is_unsupported_operator(error) or not ops.has_fake_kernel(op):
            raise CheckFailed(_no_fake_kernel(op)) from error
        raise CheckFailed(f"the fake kernel raised {_describe_exception(error)}") from error
    mismatches = _compare_outputs(real_out, fake_out)
    mismatches += _compare_aliasing(real_out, (real_args, real_kwargs), fake_out, (fake_args, fake_kwargs))
    if mismatches:
        raise CheckFailed("; ".join(mismatches))


def _no_fake_kernel(op: Op) -> str:
    return (
        f"{op.name()} has no fake (meta) kernel, so torch.compile cannot trace it: register one with "
        f"torch.library.register_fake (or Library.impl(..., 'Meta'))"
    )


def _compare_outputs(real: Any, fake: Any) -> list[str]:
    real_flat, fake_flat = pytree.tree_leaves(real), pytree.tree_leaves(fake)
    if len(real_flat) != len(fake_flat):
        return [f"fake kernel returns {len(fake_flat)} outputs, real kernel gives {len(real_flat)}"]
    mismatches = []
    for index, (r, f) in enumerate(zip(real_flat, fake_flat, strict=True)):
        where = f"output {index}: " if len(real_flat) > 1 else ""
        if isinstance(r, torch.Tensor) != isinstance(f, torch.Tensor):
            mismatches.append(f"{where}fake kernel returns {type(f).__name__}, real kernel gives {type(r).__name__}")
            continue
        if isinstance(r, torch.Tensor):
            mismatches += [where + m for m in _compare_tensor(r, f)]
    return mismatches


def _compare_tensor(real: torch.Tensor, fake: torch.Tensor) -> list[str]:
    mismatches = []

    def differ(what: str, fake_value: object, real_value: object) -> None:
        mismatches.append(f"fake kernel says {what} {fake_value}, real kernel gives {real_value}")

    same_shape = len(real.shape) == len(fake.shape) and all(
        _is_unbacked(f) or f == r for r, f in zip(real.shape, fake.shape, strict=True)
    )
    if not same_shape:
        differ("shape", _fmt_sizes(fake.shape), _fmt_sizes(real.shape))
    if real.dtype != fake.dtype:
        differ("dtype", fake.dtype, real.dtype)
    if real.device != fake.device:
        differ("device", fake.device, real.device)
    if same_shape and real.layout == torch.strided:
        # Strides of size-0/1 dims carry no meaning; torch compares only the others.
        same_strides, _ = optests.check_significant_strides_of(real, fake)
        if not same_strides:
            differ("strides", _fmt_sizes(fake.stride()), _fmt_sizes(real.stride()))
        if not _is_unbacked(fake.storage_offset()) and real.storage_offset() != fake.storage_offset():
            differ("storage offset", fake.storage_offset(), real.storage_offset())
    return mismatches


def _compare_aliasing(real_out: Any, real_in: Any, fake_out: Any, fake_in: Any) -> list[str]:
    facts = {
        "an output aliases an input": optests.outputs_alias_inputs,
        "an output is an input": optests.outputs_are_inputs,
    }
    mismatches = []
    for fact, holds in facts.items():
        real_says = holds(real_out, real_in)
        if real_says != holds(fake_out, fake_in):
            holder, other = ("real", "fake") if real_says else ("fake", "real")
            mismatches.append(f"{fact} for the {holder} kernel, but not for the {other} kernel")
    if optests.outputs_alias_each_other(real_out) != optests.outputs_alias_each_other(fake_out):
        mismatches.append("the real and fake kernels disagree on whether outputs alias each other")
    return mismatches


def _is_unbacked(size: object) -> bool:
    return isinstance(size, torch.SymInt) and bool(free_unbacked_symbols(size))


def _fmt_sizes(sizes: Sequence[object]) -> str:
    return str(tuple(s if isinstance(s, int) else str(s) for s in sizes))


# -- test_aot_dispatch_static / test_aot_dispatch_dynamic ----------------------------------------


def check_aot_dispatch_static(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Outputs and gradients under AOTAutograd with static shapes match eager."""
    _aot_dispatch(op, args, kwargs, dynamic=False)


def check_aot_dispatch_dynamic(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Outputs and gradients under AOTAutograd with symbolic (dynamic) shapes match eager."""
    _aot_dispatch(op, args, kwargs, dynamic=True)


def _aot_dispatch(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic: bool) -> None:
    try:
        optests.aot_autograd_check(op, *_copies(args, kwargs), dynamic=dynamic)
    except Exception as error:
        raise CheckFailed(_describe_exception(error)) from error


# -- running them ---------------------------------------------------------------------------------

CHECKS: dict[str, Check] = {
    "test_schema": check_schema,
    "test_autograd_registration": check_autograd_registration,
    "test_faketensor": check_fake_tensor,
    "test_aot_dispatch_static": check_aot_dispatch_static,
    "test_aot_dispatch_dynamic": check_aot_dispatch_dynamic,
}


def validate_checks(checks: Sequence[str]) -> tuple[str, ...]:
    """``checks`` as a tuple; a ValueError naming the valid choices if any is unknown."""
    unknown = [check for check in checks if check not in CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; choose from {list(CHECKS)}")
    return tuple(checks)


def run_checks(
    op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], checks: Sequence[str] = tuple(CHECKS)
) -> list[CheckResult]:
    """Run ``checks`` (in torch's order) on one call; never raises for a check's verdict."""
    results = []
    with _quiet_torch():
        for name in (c for c in CHECKS if c in checks):
            try:
                CHECKS[name](op, args, kwargs)
                results.append(CheckResult(name, "pass"))
            except NotApplicable as reason:
                results.append(CheckResult(name, "n/a", str(reason)))
            except CheckFailed as failure:
                results.append(CheckResult(name, "fail", str(failure)))
            except Exception as error:  # noqa: BLE001 - the op itself, or a check's setup, blew up
                results.append(CheckResult(name, "fail", f"raised {_describe_exception(error)}"))
    return _note_dynamic_only(results)


def warm_up() -> None:
    """Pay the first-use costs (lazy imports, a first AOT trace) once, on ``aten::sin``.

    The first check in a process takes seconds that later ones do not. Benchmarks
    call this to time the steady state; in-process pytester runs need it so that
    torch's lazily imported modules are loaded before pytester snapshots
    ``sys.modules`` (a module it drops and re-imports would register its ops twice).
    """
    run_checks(torch.ops.aten.sin.default, (torch.randn(3, requires_grad=True),), {})


def _note_dynamic_only(results: list[CheckResult]) -> list[CheckResult]:
    by_name = {r.check: r for r in results}
    static, dynamic = by_name.get("test_aot_dispatch_static"), by_name.get("test_aot_dispatch_dynamic")
    if static and dynamic and static.status == "pass" and dynamic.status == "fail":
        note = " (passes with static shapes: it breaks only when sizes are symbolic SymInts)"
        results[results.index(dynamic)] = dataclasses.replace(dynamic, message=dynamic.message + note)
    return results


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """Checks provoke errors on purpose: keep torch's own logging and warnings out of the test output."""
    with fake_tensor.quiet(), warnings.catch_warnings(), torch.enable_grad():
        warnings.simplefilter("ignore")
        yield


# -- helpers ------------------------------------------------------------------------------------------


def _copies(
    args: tuple[Any, ...], kwargs: dict[str, Any], keep_requires_grad: bool = True
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Fresh copies (same strides) so a check can never disturb the recorded call or another check."""
    copy = functools.partial(snapshot_tensor, grad_active=keep_requires_grad)
    return pytree.tree_map_only(torch.Tensor, copy, (args, kwargs))


def _tensors_in(value: Any, clone: bool) -> list[torch.Tensor]:
    tensors = [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
    return [dynamo_utils.clone_input(t).detach() for t in tensors] if clone else tensors


def _any_requires_grad(tree: Any) -> bool:
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(tree))


_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_DIR = os.path.dirname(__file__)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _describe_exception(error: BaseException) -> str:
    """The root cause of an exception chain, its first line, and the user code that raised it."""
    chain = [error]
    while (nxt := dynamo_exc.underneath(chain[-1])) is not None and nxt not in chain:
        chain.append(nxt)
    root = chain[-1]
    # An AssertionError is a check's own verdict ("Outputs ... are different"): no type prefix.
    text = _first_line(root) if type(root) is AssertionError else f"{type(root).__name__}: {_first_line(root)}"
    if root is not error and _first_line(error) not in text:
        text = f"{_first_line(error)} Cause: {text}"
    user_frames = [
        frame
        for frame in traceback.extract_tb(root.__traceback__)
        if not frame.filename.startswith((_TORCH_DIR, _OWN_DIR)) and "/_pytest/" not in frame.filename
    ]
    if user_frames:
        frame = user_frames[-1]
        text += f" (raised at {os.path.basename(frame.filename)}:{frame.lineno}, in {frame.name})"
    return text
