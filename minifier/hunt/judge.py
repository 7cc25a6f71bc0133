"""Judging one hunted program: eager against the default ``torch.compile``, in an isolated child.

:func:`judge` runs in a child of pt2kit's warm process (one query a program, so a
crash or a hang costs that query, never the hunt). It imports the program's script and
runs ``f`` three ways, each on fresh inputs from ``make_inputs``:

1. eagerly, twice: a program eager refuses is invalid, one whose two eager runs differ
   is nondeterministic; neither is judged further;
2. eagerly in float64 (floating inputs promoted, float64 the default dtype): the
   reference, where it runs;
3. under ``torch.compile(f)``, dynamo reset first. A ``ConstraintViolationError`` is
   the program's own (``mark_dynamic`` on a size ``f`` specializes): invalid too.

What is compared: every output, every input as it is after the run (a program that
writes into its input is judged on it), and with ``BACKWARD`` every input's gradient,
by pt2kit's accuracy rule (:func:`~minifier.unit.accuracy.accuracy_divergence`):
floats against the fp64 reference, forgiving eager's own error; integers and bools
exactly. An exception under ``torch.compile`` is judged by its signature.
"""

from __future__ import annotations

import enum
import importlib.util
import itertools
from dataclasses import dataclass
from typing import Any

from ..unit.accuracy import accuracy_divergence, run_float64, signature_of_accuracy
from pt2kit.signature import Signature, signature_of_exception

_modules = itertools.count()


class Outcome(str, enum.Enum):
    PASSED = "passed"
    INVALID = "invalid"  # eager refuses the program
    NONDETERMINISTIC = "nondeterministic"  # two eager runs differ
    FAILED = "failed"  # compiled and eager disagree, or the compiled run raised


@dataclass(frozen=True)
class Verdict:
    """What one judging of a program found."""

    outcome: Outcome
    failure: Signature | None = None
    detail: str = ""


@dataclass(frozen=True)
class Judging:
    """How a program is judged: the accuracy rule's tolerance, whether integer inputs are made small,
    ``patience``: the judge's time limit as a multiple of the hunt's (the child that judges is killed past it),
    whether Inductor keeps the low-precision roundings eager does, and whether subnormal inputs are flushed."""

    tolerance: float = 1e-4
    small_ints: bool = False
    patience: float = 1.0
    #: compile with ``emulate_precision_casts``: keep each fp16/bf16 rounding that Inductor elides by design
    emulate_casts: bool = False
    #: floating inputs' subnormal values made zeros of their sign (what a vector math library may read them as)
    flush_subnormals: bool = False


def load(path: str) -> Any:
    """The program's module, imported under a name of its own (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(f"pt2kit_hunted_{next(_modules)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(module: Any, judging: Judging, float64: bool = False) -> list[Any]:
    import torch

    inputs = module.make_inputs()
    out = []
    for x in inputs:
        if judging.small_ints and not (x.is_floating_point() or x.dtype == torch.bool):
            x = x.clamp(-2, 2)
        if judging.flush_subnormals and x.is_floating_point():
            flushed = torch.where(x.detach().abs() < torch.finfo(x.dtype).tiny, x.detach() * 0, x.detach())
            x = flushed.requires_grad_(x.requires_grad)
        if float64 and x.is_floating_point():
            x = x.detach().to(torch.float64).requires_grad_(x.requires_grad)
        out.append(x)
    return out


def results(module: Any, fn: Any, judging: Judging, float64: bool = False) -> list[Any]:
    """Outputs, inputs after the run and (with ``BACKWARD``) gradients of one run of ``fn``: what is compared."""
    import torch

    inputs = _inputs(module, judging, float64)
    outputs = list(run_float64(fn, *inputs) if float64 else fn(*inputs))
    grads: list[Any] = []
    leaves = [x for x in inputs if x.requires_grad]
    if module.BACKWARD and leaves:
        loss = sum(o.double().sum() for o in outputs if o.requires_grad)
        if torch.is_tensor(loss):
            grads = [torch.zeros(()) if g is None else g for g in torch.autograd.grad(loss, leaves, allow_unused=True)]
    return [t.detach() for t in outputs + inputs + grads]


def _same(first: list[Any], second: list[Any]) -> bool:
    import torch

    return len(first) == len(second) and all(
        a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num()) if a.is_floating_point()
        else torch.equal(a, b)
        for a, b in zip(first, second)
    )


def judge(path: str, judging: Judging = Judging()) -> Verdict:
    """Judge the program at ``path`` (runs in a child: it compiles, and may crash)."""
    import torch

    module = load(path)
    try:
        eager = results(module, module.f, judging)
        if not _same(eager, results(module, module.f, judging)):
            return Verdict(Outcome.NONDETERMINISTIC)
    except Exception as e:  # noqa: BLE001 - eager refusing the program is the verdict
        return Verdict(Outcome.INVALID, detail=f"{type(e).__name__}: {e}"[:300])
    try:
        fp64: list[Any] | None = results(module, module.f, judging, float64=True)
    except Exception:  # noqa: BLE001 - no reference: eager alone is the reference
        fp64 = None
    torch.compiler.reset()  # every program compiles from nothing
    if judging.emulate_casts:
        torch._inductor.config.emulate_precision_casts = True  # (this child judges one program, then exits)
    try:
        compiled = results(module, torch.compile(module.f, dynamic=module.DYNAMIC or None), judging)
    except Exception as e:  # noqa: BLE001 - a compiled run that raises is a finding
        failure = signature_of_exception(e)
        if failure.signature.exception == "ConstraintViolationError":  # mark_dynamic asked for what f cannot give
            return Verdict(Outcome.INVALID, detail=failure.signature.message)
        return Verdict(Outcome.FAILED, failure.signature, failure.details[:2000])
    problem = accuracy_divergence(eager, compiled, fp64, tol=judging.tolerance)
    if problem is None:
        return Verdict(Outcome.PASSED)
    return Verdict(Outcome.FAILED, signature_of_accuracy(problem).signature, problem)
