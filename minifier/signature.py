"""Deciding whether two failures are the same failure.

A minifier is only as exact as its notion of "still failing": too loose and it
happily minifies one bug into another (torch's after-dynamo minifier accepts any
error whose difflib ratio is above 0.5), too strict and it cannot shrink anything
because messages mention node names and temp paths that change as the graph
shrinks. pt2kit's answer (docs/minify.md) is a :class:`Signature`:

- ``kind``: ``compile_error | runtime_error | accuracy | crash | timeout``;
- ``exception``: the type name of the innermost meaningful exception (torch's
  wrappers such as ``BackendCompilerFailed``/``InductorError`` are peeled off, so a
  failure keeps its signature whether it surfaces through ``torch.compile``, through
  ``compile_fx_inner`` or in a standalone repro);
- ``message``: its first line, normalized by :func:`normalize_message`.

Wrong answers are judged by :func:`accuracy_divergence`, which compares compiled
outputs with an fp64 eager reference and forgives whatever error eager itself makes
in the working precision. That function uses only ``torch``, because the repro
writer copies its source into every accuracy ``repro.py``.
"""

from __future__ import annotations

import functools
import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from .seams import dynamo_exc

KINDS = ("compile_error", "runtime_error", "accuracy", "crash", "timeout")

#: The message of every accuracy signature; details (which output, how far) vary as
#: the graph shrinks and live in :attr:`Failure.details`.
ACCURACY_MESSAGE = "compiled output diverges from the fp64 reference"

#: Attribute our compile-phase wrappers set on exceptions raised while compiling.
COMPILE_PHASE_ATTR = "_pt2kit_compile_phase"


@dataclass(frozen=True)
class Signature:
    """What must match for two failures to be the same failure."""

    kind: str
    exception: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.exception}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Signature:
        return cls(kind=data["kind"], exception=data["exception"], message=data["message"])


@dataclass(frozen=True)
class Failure:
    """A signature plus what a person needs to read it (never compared)."""

    signature: Signature
    details: str = ""


# --------------------------------------------------------------------------- #
# Normalizing messages
# --------------------------------------------------------------------------- #

_NORMALIZERS: list[tuple[re.Pattern[str], str]] = [
    # object addresses and ids
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\b(id|pid|tid)[=: ]\s*\d+"), r"\1=?"),
    # absolute paths: generated sources, cache and temp directories
    (re.compile(r"(?<![\w.])/(?:[\w.\-]+/)+[\w.\-]*"), "<path>"),
    # long hashes (cache keys, kernel names like cxk2tiw6ldlulrtg...)
    (re.compile(r"\b[a-z0-9]{20,}\b"), "<hash>"),
    # generated names with numeric suffixes: arg0_1, add_3, primals_12, getitem_5
    (re.compile(r"\b([A-Za-z][A-Za-z_]*?)\d*((?:_\d+)+)\b"), lambda m: m.group(1) + re.sub(r"\d+", "#", m.group(2))),  # type: ignore[list-item]
    # generated names with bare numeric suffixes: buf12, tmp3, kernel7, s0, u1 (sympy)
    (re.compile(r"\b(buf|tmp|arg|kernel|cpp_fused_\w+?|ks|s|u|x|y|z|q|var|node)(\d+)\b"), r"\1#"),
]


def normalize_message(message: str) -> str:
    """First line of ``message``, with addresses, ids, temp paths and generated numbering masked."""
    lines = [line.strip() for line in str(message).strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    for pattern, replacement in _NORMALIZERS:
        first = pattern.sub(replacement, first)  # type: ignore[arg-type]
    return first[:300]


# --------------------------------------------------------------------------- #
# Classifying exceptions
# --------------------------------------------------------------------------- #


def innermost_exception(exc: BaseException) -> BaseException:
    """Peel torch's wrapper exceptions off ``exc`` to find the error that happened.

    ``BackendCompilerFailed`` and ``InductorError`` carry ``inner_exception``; dynamo's
    own errors (``TorchRuntimeError``, ``Unsupported`` from a failing fake-tensor call,
    ``InternalTorchDynamoError``) are raised while handling the real error, so it is
    their ``__cause__`` or ``__context__``. An error with nothing underneath is the
    real error.
    """
    dynamo_exception = _dynamo_exception_type()
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = dynamo_exc.inner_exception(exc)
        if inner is not None:
            exc = inner
            continue
        underneath = exc.__cause__ or exc.__context__
        if isinstance(exc, dynamo_exception) and underneath is not None:
            exc = underneath
            continue
        break
    return exc


def _dynamo_exception_type() -> type[BaseException]:
    return dynamo_exc.dynamo_exception()


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (``inner_exception``) or was raised from, outermost first."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield node
        node = dynamo_exc.inner_exception(node) or node.__cause__ or node.__context__


def _raised_while_compiling(exc: BaseException) -> bool:
    """Was ``exc`` raised by dynamo's tracing or by a backend's compile step?"""
    dynamo_exception = _dynamo_exception_type()
    return any(getattr(e, COMPILE_PHASE_ATTR, False) or isinstance(e, dynamo_exception) for e in exception_chain(exc))


def signature_of_exception(exc: BaseException) -> Failure:
    """The failure an exception represents: a compile error if it came out of a compile step."""
    inner = innermost_exception(exc)
    kind = "compile_error" if _raised_while_compiling(exc) else "runtime_error"
    text = str(inner) or type(inner).__name__
    return Failure(Signature(kind, type(inner).__name__, normalize_message(text)), details=text[:4000])


def mark_compile_phase(exc: BaseException) -> None:
    """Tag an exception as raised while compiling (used by pt2kit's compiler wrappers)."""
    try:
        setattr(exc, COMPILE_PHASE_ATTR, True)
    except (AttributeError, TypeError):  # exceptions with __slots__
        pass


def tagging_compile_errors(compiler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a compiler so that whatever it raises is marked as a compile error.

    AOTAutograd compiles backward graphs lazily, during ``loss.backward()``; without
    this mark such a failure would look like a runtime error.
    """

    @functools.wraps(compiler)
    def compile_marking_errors(*args: Any, **kwargs: Any) -> Any:
        try:
            return compiler(*args, **kwargs)
        except BaseException as e:
            mark_compile_phase(e)
            raise

    return compile_marking_errors


def signature_of_crash(signum: int, stderr_tail: str = "") -> Failure:
    """A process killed by a signal (segfault, ``abort()``...): the signal is the signature."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return Failure(Signature("crash", name, f"process killed by {name}"), details=stderr_tail[-4000:])


def signature_of_exit(code: int, stderr_tail: str = "") -> Failure:
    """A process that called ``exit()``/``os._exit()`` from native or user code mid-query."""
    return Failure(Signature("crash", "SystemExit", f"process exited with status {code}"), details=stderr_tail[-4000:])


def signature_of_timeout(seconds: float) -> Failure:
    return Failure(Signature("timeout", "Timeout", "no result within the time limit"), details=f"killed after {seconds:g} s")


def accuracy_category(problem: str) -> str:
    """What kind of wrong answer :func:`accuracy_divergence` found: part of an accuracy failure's identity.

    A NaN bug is not a rounding bug, and a shape bug is neither; the minifier keeps
    the kind of divergence the program had (as well as keeping it reaching the
    program's outputs, see :func:`minifier.stages.run_case`).
    """
    if "non-finite" in problem:
        return "non-finite values"
    if " != eager " in problem and ("(" in problem.split(" != eager ")[1]):
        return "shape or dtype"
    if "outputs, eager gives" in problem or "got " in problem:
        return "output structure"
    if "values differ" in problem:
        return "exact values"
    if "RMSE" in problem:
        return "values"
    return "non-tensor values"


def signature_of_accuracy(problem: str) -> Failure:
    return Failure(Signature("accuracy", "AccuracyError", f"{ACCURACY_MESSAGE} ({accuracy_category(problem)})"), details=problem)


#: Methods that cast to a low-precision float, and what the fp64 reference calls instead.
_FLOAT_CASTS = {"half": "double", "float": "double", "bfloat16": "double"}


def float64_graph(gm: Any) -> Any:
    """A copy of ``gm`` computing in float64: parameters, buffers *and* the dtypes written in the graph.

    torch's ``same(fp64_ref=...)`` rule needs a reference computed in real fp64; casting
    only the inputs leaves ``torch.tensor(655, dtype=torch.half)`` or ``x.to(torch.half)``
    in low precision, and the reference then disagrees with a compiler that keeps
    more precision (pytorch's ``test_rmse_improves_over_atol``). Like torch's
    ``cast_dtype_args_to_fp64``, every floating dtype argument becomes float64; unlike
    it, positional dtypes and ``.half()``-style methods are promoted too.
    """
    import copy

    import torch

    gm = copy.deepcopy(gm).to(torch.float64)

    def promote(value: Any) -> Any:
        if isinstance(value, torch.dtype) and value.is_floating_point and value != torch.float64:
            return torch.float64
        if isinstance(value, (list, tuple)):
            return type(value)(promote(v) for v in value)
        return value

    def visit(module: Any) -> None:
        for node in module.graph.nodes:
            if node.op in ("call_function", "call_method"):
                node.args = promote(node.args)
                node.kwargs = {k: promote(v) for k, v in node.kwargs.items()}
            if node.op == "call_method" and node.target in _FLOAT_CASTS:
                node.target = _FLOAT_CASTS[node.target]
        module.recompile()
        for child in module.children():
            if isinstance(child, torch.fx.GraphModule):
                visit(child)

    visit(gm)
    return gm


def to_float64(values: list[Any]) -> list[Any]:
    """Floating tensors as float64 (``requires_grad`` kept); everything else as it is."""
    import torch

    return [
        v.detach().to(torch.float64).requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for v in values
    ]


def reference_outputs(gm: Any, inputs: list[Any], *, rng: Any = None, set_rng: Callable[[Any], None] | None = None) -> tuple[list[Any], list[Any]]:
    """The eager outputs of ``gm`` on ``inputs`` in working precision and in float64: the one fp64 driver.

    Runs on clones (graphs mutate inputs in place), without autograd. With ``rng`` and
    ``set_rng``, both runs start from that random state.
    """
    import torch

    from .case import clone_tensor

    def clones() -> list[Any]:
        return [clone_tensor(v.detach(), False) if isinstance(v, torch.Tensor) else v for v in inputs]

    def as_list(out: Any) -> list[Any]:
        return list(out) if isinstance(out, (list, tuple)) else [out]

    with torch.no_grad():
        if set_rng is not None:
            set_rng(rng)
        expected = as_list(gm(*clones()))
        if set_rng is not None:
            set_rng(rng)
        fp64 = as_list(float64_graph(gm)(*to_float64(clones())))
    return expected, fp64


def judge_compiled_run(gm: Any, inputs: list[Any], outputs: Any, *, rng: Any, strict: bool = False) -> Failure | None:
    """Was one compiled run of ``gm`` on ``inputs`` right? The isolated queries' accuracy rule, for a run that already happened.

    ``outputs`` is what the compiled code returned, from the random state ``rng``; eager
    runs of ``gm`` from that same state, in working precision and in float64, are the
    reference (:func:`accuracy_divergence`). ``--accuracy`` under capture judges the
    program's own compile of each aot graph this way at its first run, so the
    bisection need not compile it again. The caller's random state is left untouched.
    """
    import torch

    with torch.random.fork_rng():
        expected, fp64 = reference_outputs(gm, inputs, rng=rng, set_rng=torch.random.set_rng_state)
    actual = [o.detach() if isinstance(o, torch.Tensor) else o for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]
    problem = accuracy_divergence(expected, actual, fp64, strict=strict)
    return signature_of_accuracy(problem) if problem else None


# --------------------------------------------------------------------------- #
# Accuracy
# --------------------------------------------------------------------------- #


def accuracy_divergence(eager, compiled, fp64, tol=1e-4, strict=False):
    """Compare ``compiled`` outputs with an fp64 eager reference, forgiving eager's own error.

    ``eager``, ``compiled`` and ``fp64`` are lists of the same outputs (tensors or
    plain values) computed by eager in working precision, by the compiled program,
    and by eager in float64. A floating output passes when it is allclose to eager,
    or when its RMSE against fp64 is at most ``multiplier`` times eager's own RMSE
    against fp64 (plus ``tol / 10``): compiled code may round differently, but not
    worse than eager does. NaN or inf where eager and fp64 are finite always fails.
    Integer and bool outputs must match exactly. With ``strict``, every output must
    equal eager's bit for bit (``--strict-accuracy``). Returns None when everything
    passes, else one line naming the first output that does not.

    This is torch's ``same(..., fp64_ref=...)`` rule without its fixed-tolerance
    shortcuts. It imports only torch and carries no annotations: the repro writer
    copies its source into repro.py.
    """
    import torch

    for i, (ref, res, hi) in enumerate(zip(eager, compiled, fp64)):
        if not isinstance(ref, torch.Tensor):
            if ref != res and not (isinstance(ref, float) and ref != ref and res != res):
                return f"output {i}: {res!r} != eager {ref!r}"
            continue
        if not isinstance(res, torch.Tensor):
            return f"output {i}: got {type(res).__name__}, eager gives a tensor"
        if res.shape != ref.shape or res.dtype != ref.dtype:
            return f"output {i}: {res.dtype}{tuple(res.shape)} != eager {ref.dtype}{tuple(ref.shape)}"
        ref, res = ref.detach(), res.detach()
        if strict or not (ref.is_floating_point() or ref.is_complex()):
            same = torch.equal(ref, res) or (ref.is_floating_point() and torch.allclose(ref, res, atol=0.0, rtol=0.0, equal_nan=True))
            if not same:
                bad = int((ref != res).sum())
                return f"output {i}: {bad} of {ref.numel()} values differ from eager"
            continue
        if torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=True):
            continue
        hi = hi.detach().to(torch.float64)
        res64, ref64 = res.to(torch.float64), ref.to(torch.float64)
        bad_res = ~torch.isfinite(res64) & torch.isfinite(hi) & torch.isfinite(ref64)
        if bool(bad_res.any()):
            return f"output {i}: {int(bad_res.sum())} non-finite values where eager and fp64 are finite"
        finite = torch.isfinite(hi) & torch.isfinite(ref64)
        ref_err = float(torch.sqrt(torch.mean(torch.square(hi - ref64)[finite]))) if bool(finite.any()) else 0.0
        res_err = float(torch.sqrt(torch.mean(torch.square(hi - res64)[finite]))) if bool(finite.any()) else 0.0
        multiplier = 3.0 if (res.dtype in (torch.float16, torch.bfloat16) or ref.numel() < 1000) else 2.0
        if res_err > multiplier * ref_err + tol / 10.0:
            max_abs = float((res64 - hi).abs()[finite].max()) if bool(finite.any()) else float("nan")
            return (
                f"output {i}: RMSE vs fp64 {res_err:.3g}, eager's own {ref_err:.3g} "
                f"(allowed {multiplier:g}x + {tol / 10:g}); max abs error {max_abs:.3g}"
            )
    if not (len(eager) == len(compiled) == len(fp64)):
        return f"{len(compiled)} outputs, eager gives {len(eager)}"
    return None
