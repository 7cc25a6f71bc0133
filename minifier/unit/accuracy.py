"""Wrong answers: a compiled run judged against eager and an fp64 eager reference.

:func:`accuracy_divergence` is the rule: torch's ``same(..., fp64_ref=...)`` without its fixed tolerances,
forgiving whatever error eager itself makes in the working precision. An accuracy failure's
:class:`~pt2kit.signature.Signature` names the *kind* of divergence (:func:`accuracy_category`): a NaN bug
is not a rounding bug, nor an output that lost eager's inference flag, nor outputs that alias one another
otherwise (:mod:`minifier.unit.aliasing`).

Compared: every output, and every input the graph writes into, after the run (:class:`References`: a graph
whose only effect is ``x[idx] += 1`` is judged on ``x``), against eager in the working precision and in float64,
the default dtype then (:func:`run_float64`: tensors the graph creates follow its promoted inputs). A float64
run that cannot run is the reference's limit, never the graph's failure: eager alone is then the reference.

The functions a repro needs (the rule, the category, the version counters and :func:`run_float64`)
use only ``torch`` and carry no annotations: the repro writer copies their source into every
accuracy ``repro.py``, whose ``accuracy_runs`` is what pt2kit's own queries call
(:func:`minifier.stages.run.run_case`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, cast

from pt2kit.seams import dispatch, module_hooks
from pt2kit.signature import Failure, Kind, Signature, normalize_message
from .aliasing import aliasing_divergence
from .float64 import float64_graph, fp64_blocker, to_float64

#: How wrong answers are judged: ``False`` not at all (crashes only), ``True`` against eager
#: and an fp64 reference within tolerance, ``"strict"`` bit for bit against eager, ``"draws"`` (:data:`EAGER_DRAWS`)
#: as ``True`` with a graph's random draws judged as they come.
Accuracy = Union[bool, Literal["strict", "draws"]]

#: The program compares what its compiled graphs draw with eager's own draws: a graph that draws random numbers is
#: judged on those very numbers, compiled without Inductor's ``fallback_random`` (which ``True`` and ``"strict"``
#: set, so that a graph's draws compare at all). Found by :func:`minifier.bisect.plainly.draws_of_inductor`.
EAGER_DRAWS: Literal["draws"] = "draws"

#: The message of every accuracy signature; details (which output, how far) vary as
#: the graph shrinks and live in :attr:`Failure.details`.
ACCURACY_MESSAGE = "compiled output diverges from the fp64 reference"


def accuracy_category(problem: str) -> str:
    """What kind of wrong answer :func:`accuracy_divergence` found: part of an accuracy failure's identity.

    A NaN bug is not a rounding bug, and a shape bug is neither (a dtype bug keeps its pair
    of dtypes: bfloat16 where eager gives float32 is not its converse); the minifier keeps
    the kind of divergence the program had (as well as keeping it reaching the
    program's outputs, see :func:`minifier.stages.run.run_case`).
    """
    if "alias differently" in problem:
        return "aliasing"
    if "returns where eager raises " in problem:  # (it runs what eager refuses, and which refusal is part of it)
        return "eager raises " + problem.split("returns where eager raises ", 1)[1]
    if "a non-finite one" in problem:  # (eager's NaN or inf swallowed: another bug than one that makes them)
        return "non-finite values lost"
    if "non-finite" in problem:
        return "non-finite values"
    if "is_inference()" in problem:
        return "tensor flags"
    if " != eager " in problem and ("(" in problem.split(" != eager ")[1]):
        mine, eager = (side.rsplit("(", 1)[0].split()[-1] for side in problem.split(" != eager ", 1))
        return "shape or dtype" if mine == eager else f"shape or dtype: {mine} where eager gives {eager}"
    if "outputs, eager gives" in problem or "got " in problem:
        return "output structure"
    if "values differ" in problem:
        return "exact values"
    if "RMSE" in problem or "off eager beyond" in problem:  # (the second: no fp64 reference could run)
        return "values"
    return "non-tensor values"


#: What a graph that draws its random numbers otherwise than eager still gives as eager does.
RANDOM_ALIKE = ("shape or dtype", "output structure", "tensor flags")


def despite_draws(problem: str | None, draws_otherwise: bool) -> str | None:
    """``problem``, unless the graph draws its random numbers otherwise than eager (``draws_otherwise``) and
    ``problem`` is of its values: then it is the draws', not a bug's (only :data:`RANDOM_ALIKE` still counts)."""
    if problem and draws_otherwise and not accuracy_category(problem).startswith(RANDOM_ALIKE):
        return None
    return problem


def compared_despite_draws(
    problem: str | None, gm: Any, expected: Any, actual: list[Any], fp64: Any, *, strict: bool = False,
    labels: list[str] | None = None,
) -> str | None:
    """``problem`` of a run of ``gm`` that drew its random numbers otherwise than eager, against ``expected`` (and
    ``fp64``): the divergence of the outputs no draw reaches (:func:`~minifier.unit.float64.drawn_outputs`), compared
    again alone, else only what draws cannot change (:func:`despite_draws`). ``labels``: each value's, by position."""
    from .float64 import drawn_outputs, graph_outputs

    if not problem:
        return problem
    drawn = drawn_outputs(gm)
    count = min(len(graph_outputs(gm)), len(expected), len(actual))
    free = [] if drawn is None else [i for i in range(count) if i not in drawn]
    again = accuracy_divergence(
        [expected[i] for i in free], [actual[i] for i in free], None if fp64 is None else [fp64[i] for i in free],
        strict=strict, labels=[labels[i] if labels else f"output {i}" for i in free],
    ) if free else None  # fmt: skip
    return again or despite_draws(problem, True)


def refused_by_eager(failure: Signature | None) -> bool:
    """Is ``failure`` a compiled run that returns where eager raises (:func:`accuracy_category`'s ``eager raises``)?"""
    return failure is not None and failure.kind == Kind.ACCURACY and f"{ACCURACY_MESSAGE} (eager raises " in failure.message


def accuracy_message(category: str) -> str:
    """An accuracy failure's message, by :func:`accuracy_category` (copied into repros: the same words there).

    Exact values are judged against eager, bit for bit (integers always, floats under
    ``--strict-accuracy``): their message names eager, never the fp64 reference it did not read."""
    if category == "exact values":
        return "compiled output differs from eager's (exact values)"
    return f"{ACCURACY_MESSAGE} ({category})"


def signature_of_accuracy(problem: str) -> Failure:
    category = accuracy_category(problem)
    category = normalize_message(category) if category.startswith("eager raises") else category
    return Failure(Signature("accuracy", "AccuracyError", accuracy_message(category)), details=problem)


def tensor_versions(values):
    """Each tensor's version counter, which every in-place write bumps through any view of it
    (None for an inference tensor, which keeps none, and a non-tensor). Copied into repros: torch only."""
    import torch

    counts = []
    for v in values:
        try:
            counts.append(v._version if isinstance(v, torch.Tensor) else None)
        except RuntimeError:
            counts.append(None)
    return counts


def written_inputs(before, after):
    """The positions of the inputs a run wrote into, from their version counters before and after it (copied into repros)."""
    return [i for i, (b, a) in enumerate(zip(before, after)) if b is not None and b != a]


@dataclass
class References:
    """The reference side of an accuracy check, from eager runs of a graph.

    ``expected`` (working precision) and ``fp64`` are the graph's outputs followed by the
    values, after the run, of the inputs it writes into (``written``, their positions):
    a graph whose only effect is ``x.add_(y)`` is judged on ``x``. ``fp64`` is None when
    the float64 run cannot run at all (``fp64_error`` says why); eager alone is then the
    reference (:func:`accuracy_divergence`), and the graph is not to blame.
    """

    expected: list[Any]
    fp64: list[Any] | None
    written: list[int]
    fp64_error: str | None = None

    def outputs_of(self, outputs: Any, inputs: list[Any]) -> list[Any]:
        """A run's outputs, followed by its inputs at the positions the reference run wrote into."""
        return _as_list(outputs) + [inputs[i] for i in self.written]


def _detached(values: list[Any]) -> list[Any]:
    import torch

    return [v.detach() if isinstance(v, torch.Tensor) else v for v in values]


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def run_float64(fn, *args):
    """``fn(*args)`` with float64 as the default dtype: what the graph creates follows its promoted inputs.

    (``torch.zeros(n)`` in a graph would otherwise stay float32 beside float64 inputs,
    and an op that refuses mixed dtypes, such as ``index_add_``, would fail in the
    reference only.) Copied into accuracy repros: torch only, no annotations.
    """
    import torch

    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return fn(*args)
    finally:
        torch.set_default_dtype(default)


def reference_outputs(
    gm: Any,
    inputs: list[Any],
    *,
    rng: Any = None,
    set_rng: Callable[[Any], object] | None = None,
    grad_enabled: bool = False,
) -> References:
    """The eager outputs of ``gm`` on ``inputs`` in working precision and in float64: the one fp64 driver.

    Runs on clones (graphs mutate inputs in place, and tensors they hold as attributes), detached, without autograd unless
    ``grad_enabled``: a dynamo graph the program called with grad on (a ``torch.func``
    transform's graph takes its gradients itself, and under ``no_grad`` gets None). With
    ``rng`` and ``set_rng``, both runs start from that random state. A float64 run that
    raises leaves ``fp64`` None (see :class:`References`). A run that raises midway
    leaves no functorch level entered.
    """
    import torch

    from .copies import clone_values, with_own_attributes

    def clones() -> list[Any]:
        return _detached(clone_values(inputs))

    gm = with_own_attributes(gm)  # (it may write a tensor it reads as an attribute: an optimizer's parameter)

    # (in the user's process, the program's global module hooks must not fire on pt2kit's GraphModule)
    with torch.set_grad_enabled(grad_enabled), module_hooks.suspended(), dispatch.functorch_levels_kept():
        if set_rng is not None:
            set_rng(rng)
        values = clones()
        before = tensor_versions(values)
        outputs = gm(*values)
        written = written_inputs(before, tensor_versions(values))
        references = References([], None, written)
        references.expected = _detached(references.outputs_of(outputs, values))
        if set_rng is not None:
            set_rng(rng)
        references.fp64_error = fp64_blocker(gm)
        try:
            if references.fp64_error is None:
                values = to_float64(clones())
                references.fp64 = _detached(references.outputs_of(run_float64(float64_graph(gm), *values), values))
        except Exception as e:  # noqa: BLE001 - a reference that cannot run is ours to own, not the graph's
            references.fp64_error = f"{type(e).__name__}: {normalize_message(str(e))}"
    return references


def gradients(fn: Callable[..., Any], inputs: list[Any], *, retain_graph: bool = False) -> list[Any] | None:
    """The gradients a repro's ``forward_backward`` takes: of every output that needs grad, summed, for each input that needs grad.

    The forward runs in the caller's autocast state, the backward outside any, as a
    program's ``loss.backward()`` after its ``with torch.autocast(...)`` block does
    (autocast is thread state, and eager's backward runs in it). None when there is
    nothing to differentiate (no output or no input needs grad).
    """
    import contextlib

    import torch

    with module_hooks.suspended():  # (as in reference_outputs)
        outputs = _as_list(fn(*inputs))
    loss = [o.sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    leaves = [i for i in inputs if isinstance(i, torch.Tensor) and i.requires_grad]
    if not loss or not leaves:
        return None
    with contextlib.ExitStack() as outside:
        for device in ("cpu", "cuda", "xpu", "mps"):
            try:
                if torch.is_autocast_enabled(device):
                    outside.enter_context(torch.autocast(device, enabled=False))
            except RuntimeError:  # a device type this build does not know
                continue
        grads = torch.autograd.grad(cast("torch.Tensor", sum(loss)), leaves, retain_graph=retain_graph, allow_unused=True)
    return [g.detach() if g is not None else None for g in grads]


def gradient_references(
    gm: Any, inputs: list[Any], *, rng: Any, set_rng: Callable[[Any], None]
) -> tuple[list[Any], list[Any] | None, list[str]] | None:
    """What a compiled graph's gradients (:func:`gradients` of it on clones of ``inputs``) are judged against.

    Eager's and float64's gradients of ``gm``, each on fresh clones of ``inputs`` from
    the random state ``rng``, and their labels, for :func:`accuracy_divergence`; None:
    ``gm`` has no gradients to compare. A wrong gradient never reaches the forward's
    outputs: an aot graph traced under the wrong context (an autocast region its
    backward ignores, pytorch#179804) is only seen here, since that aot graph run
    eagerly agrees with itself.
    """
    import torch

    from .copies import clone_values

    def run(fn: Callable[..., Any], values: list[Any]) -> list[Any] | None:
        set_rng(rng)
        return gradients(fn, values)

    expected = run(gm, clone_values(inputs))
    if expected is None:
        return None
    fp64 = None
    if fp64_blocker(gm) is None:
        try:
            fp64 = run_float64(lambda *values: run(float64_graph(gm), list(values)), *to_float64(clone_values(inputs)))
        except Exception:  # noqa: BLE001 - the reference's own limit: eager alone is the reference
            fp64 = None
    leaves = [k for k, v in enumerate(inputs) if isinstance(v, torch.Tensor) and v.requires_grad]
    return expected, fp64, [f"gradient of input {k}" for k in leaves]


def judge_compiled_run(
    gm: Any,
    inputs: list[Any],
    outputs: Any,
    *,
    rng: Any,
    strict: bool = False,
    after: list[Any] | None = None,
    draws_otherwise: bool = False,
) -> Failure | None:
    """Was one compiled run of ``gm`` on ``inputs`` right? The isolated queries' accuracy rule, for a run that already happened.

    ``outputs`` is what the compiled code returned, from the random state ``rng``, and
    ``after`` the inputs it ran on, as they are after the run (None: not kept); eager
    runs of ``gm`` from that same state, in working precision and in float64, are the
    reference (:func:`accuracy_divergence`). ``--accuracy`` under capture judges the
    program's own compile of each aot graph this way at its first run, so the
    bisection need not compile it again. The caller's random state is left untouched. ``draws_otherwise``: the
    compiled code drew its random numbers otherwise than eager, and its values are not judged (:func:`despite_draws`).
    """
    import torch

    with torch.random.fork_rng():
        references = reference_outputs(gm, inputs, rng=rng, set_rng=torch.random.set_rng_state)
    actual = _as_list(outputs)
    if references.written:
        if after is None:
            return None  # the graph writes into its inputs, and how the compiled run left them is not known
        actual = references.outputs_of(outputs, after)
    actual = _detached(actual)
    problem = accuracy_divergence(
        references.expected, actual, references.fp64, strict=strict, labels=output_labels(references, len(actual))
    )
    if draws_otherwise:
        problem = compared_despite_draws(problem, gm, references.expected, actual, references.fp64, strict=strict)
    return signature_of_accuracy(problem) if problem else None


def output_labels(references: References, count: int, names: list[str] | None = None) -> list[str]:
    """How a divergence names each compared value: ``output 2``, or ``input x (written in place)``."""
    plain = count - len(references.written)
    return [f"output {i}" for i in range(plain)] + [
        f"input {names[i] if names else i} (written in place)" for i in references.written
    ]


def accuracy_divergence(eager, compiled, fp64, tol=1e-4, strict=False, labels=None, aliasing=False):
    """Compare ``compiled`` outputs with an fp64 eager reference, forgiving eager's own error.

    ``eager``, ``compiled`` and ``fp64`` are lists of the same outputs (tensors or plain
    values) computed by eager in working precision, by the compiled program, and by eager
    in float64. A floating output passes when it is allclose to eager, or when its RMSE
    against fp64 is at most ``multiplier`` times eager's own (plus ``tol / 10``): compiled
    code may round differently, but not worse than eager does. NaN or inf where eager and
    fp64 are finite always fails, and so does losing a NaN or inf they agree on. Integer
    and bool outputs must match exactly; with ``strict`` every output must equal eager's
    bit for bit (``--strict-accuracy``), and be an inference tensor where eager's is. None when everything passes, else one line
    naming the first output that does not. Eager is the reference instead, within 1e-3
    (1e-2 in half precision), where ``fp64`` is None (:func:`~minifier.unit.float64.fp64_blocker`) or an fp64
    output does not match eager's shape. ``labels`` name the values (default ``output <i>``).
    An output whose fp64 values all lie below ``tol`` in magnitude, and which eager computes
    within 1e-3 of the largest of them, is judged in units of that largest value (a std of
    values near 1e-30 that underflows to 0 is a 100% error, not one of 1e-30). With
    ``aliasing``, values that all pass must also alias one another as eager's do. ``eager`` is the
    error eager raised (one line) where it refused what the compiled run returned: that fails too.

    This is torch's ``same(..., fp64_ref=...)`` rule without its fixed-tolerance
    shortcuts. It imports only torch and carries no annotations: the repro writer
    copies its source into repro.py.
    """
    import torch

    if isinstance(eager, str):  # (what eager raised: accuracy_runs)
        return f"the compiled run returns where eager raises {eager}"
    if fp64 is None:
        fp64 = [None] * len(eager)
    for i, (ref, res, hi) in enumerate(zip(eager, compiled, fp64)):
        name = labels[i] if labels is not None and i < len(labels) else f"output {i}"
        if not isinstance(ref, torch.Tensor):
            if ref != res and not (isinstance(ref, float) and ref != ref and res != res):
                return f"{name}: {res!r} != eager {ref!r}"
            continue
        if not isinstance(res, torch.Tensor):
            return f"{name}: got {type(res).__name__}, eager gives a tensor"
        if res.shape != ref.shape or res.dtype != ref.dtype:
            return f"{name}: {res.dtype}{tuple(res.shape)} != eager {ref.dtype}{tuple(ref.shape)}"
        if res.is_inference() != ref.is_inference():
            return f"{name}: is_inference() is {res.is_inference()}, eager's {ref.is_inference()}"
        ref, res = ref.detach(), res.detach()
        if strict or not (ref.is_floating_point() or ref.is_complex()):
            same = torch.equal(ref, res) or (
                ref.is_floating_point() and torch.allclose(ref, res, atol=0.0, rtol=0.0, equal_nan=True)
            )
            if not same:
                bad = int((ref != res).sum())
                return f"{name}: {bad} of {ref.numel()} values differ from eager"
            continue
        if hi is not None and (not isinstance(hi, torch.Tensor) or hi.shape != ref.shape):
            hi = None  # the float64 run took another path (a dtype the graph reinterprets): no reference here
        scale = 1.0  # an output wholly below ``tol`` that eager computes well is judged at its own scale
        if hi is not None and ref.is_floating_point():
            hi64, eager64 = hi.detach().to(torch.float64), ref.to(torch.float64)
            known = torch.isfinite(hi64) & torch.isfinite(eager64)
            top = float(hi64[known].abs().max()) if bool(known.any()) else 0.0
            if 0.0 < top < tol and float((hi64 - eager64)[known].abs().max()) <= 1e-3 * top:
                scale = top
        near = (ref, res) if scale == 1.0 else (ref.to(torch.float64) / scale, res.to(torch.float64) / scale)
        if torch.allclose(*near, atol=tol, rtol=tol, equal_nan=True):
            continue
        if ref.is_complex():
            ref, res = torch.view_as_real(ref), torch.view_as_real(res)
            hi = None if hi is None else torch.view_as_real(hi.detach().to(torch.complex128))
        res64, ref64 = res.to(torch.float64) / scale, ref.to(torch.float64) / scale
        if hi is not None:
            hi = hi.detach().to(torch.float64) / scale
        if hi is None:  # eager is the reference, within a stated tolerance
            loose = 1e-2 if res.dtype in (torch.float16, torch.bfloat16) else 1e-3
            bad_res = ~torch.isfinite(res64) & torch.isfinite(ref64)
            if bool(bad_res.any()):
                return f"{name}: {int(bad_res.sum())} non-finite values where eager is finite (no fp64 reference)"
            lost = ~torch.isfinite(ref64) & ~((res64 == ref64) | (res64.isnan() & ref64.isnan()))
            if bool(lost.any()):  # eager's NaN or inf swallowed, as below, eager its own reference
                return f"{name}: {int(lost.sum())} values differ where eager gives a non-finite one (no fp64 reference)"
            if not torch.allclose(ref64, res64, atol=loose, rtol=loose, equal_nan=True):
                max_abs = float((res64 - ref64).abs().nan_to_num(0.0).max())
                return f"{name}: values off eager beyond {loose:g} (no fp64 reference); max abs error {max_abs:.3g}"
            continue
        bad_res = ~torch.isfinite(res64) & torch.isfinite(hi) & torch.isfinite(ref64)
        if bool(bad_res.any()):
            return f"{name}: {int(bad_res.sum())} non-finite values where eager and fp64 are finite"
        lost = ~torch.isfinite(hi) & ((hi == ref64) | (hi.isnan() & ref64.isnan())) & ~((res64 == hi) | (res64.isnan() & hi.isnan()))
        if bool(lost.any()):  # a NaN or an inf that eager and fp64 agree on, swallowed (softshrink's NaN -> 0)
            return f"{name}: {int(lost.sum())} values differ where eager and fp64 agree on a non-finite one"
        finite = torch.isfinite(hi) & torch.isfinite(ref64)
        ref_err = float(torch.sqrt(torch.mean(torch.square(hi - ref64)[finite]))) if bool(finite.any()) else 0.0
        res_err = float(torch.sqrt(torch.mean(torch.square(hi - res64)[finite]))) if bool(finite.any()) else 0.0
        multiplier = 3.0 if (res.dtype in (torch.float16, torch.bfloat16) or ref.numel() < 1000) else 2.0
        if res_err > multiplier * ref_err + tol / 10.0:
            max_abs = float((res64 - hi).abs()[finite].max()) if bool(finite.any()) else float("nan")
            return (
                f"{name}: RMSE vs fp64 {res_err:.3g}, eager's own {ref_err:.3g} "
                f"(allowed {multiplier:g}x + {tol / 10:g}); max abs error {max_abs:.3g}"
                + (f" (in units of the output's largest fp64 value, {scale:.3g})" if scale != 1.0 else "")
            )
    if not (len(eager) == len(compiled) == len(fp64)):
        return f"{len(compiled)} outputs, eager gives {len(eager)}"
    return aliasing_divergence(eager, compiled, labels) if aliasing else None

