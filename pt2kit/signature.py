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
- ``message``: its first line, normalized by :func:`normalize_message`. An error
  whose first line is a generic wrapper's (``C++ compile error``) keeps the compiler's
  own first diagnostic after it (:func:`compiler_diagnostic`): two C++ bugs are two
  failures, and a reduction never slips from one to the other.

Two GPU failures are named by what they are, not by where they surfaced:

- a device error that poisons the process (CUDA's sticky errors: an illegal memory
  access, a device-side assert) is a ``crash`` of exception ``DeviceError`` with the
  error's own words (:func:`sticky_device_error`). Kernels run asynchronously, so it
  surfaces at whatever call next waits on the device, in the compile (autotuning runs
  kernels) or after it; and every later call of the process fails. Each query runs in
  a fresh child, which a query ends by waiting on the device;
- an error of Triton's compiler is a ``compile_error`` also where a kernel compiled
  lazily, on its first launch (:func:`_raised_while_compiling`).

Wrong answers are judged in :mod:`minifier.unit.accuracy`, against an fp64 eager
reference; their signature is made there too (``signature_of_accuracy``).
"""

from __future__ import annotations

import functools
import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from .seams import dynamo_exc
from .words import Word


class Kind(Word):
    """What kind of failure: the first word of a :class:`Signature`."""

    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    ACCURACY = "accuracy"
    CRASH = "crash"
    TIMEOUT = "timeout"


KINDS = tuple(Kind)


#: Attribute our compile-phase wrappers set on exceptions raised while compiling.
COMPILE_PHASE_ATTR = "_pt2kit_compile_phase"


@dataclass(frozen=True)
class Signature:
    """What must match for two failures to be the same failure."""

    kind: str
    exception: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {error_shown(self.exception, self.message)}"

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    def same_kind(self, other: Signature) -> bool:
        """The same kind of failure and exception, the message aside: a rebuilt graph's
        node names (``add`` where the program's was ``add_1``) may differ from the program's."""
        return (self.kind, self.exception) == (other.kind, other.exception)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Signature:
        return cls(kind=data["kind"], exception=data["exception"], message=data["message"])


@dataclass(frozen=True)
class Failure:
    """A signature plus what a person needs to read it (never compared)."""

    signature: Signature
    details: str = ""
    #: The error torch raised around the signature's own (``InternalTorchDynamoError`` around a
    #: ``ValueError``), when it wrapped one: who failed, where the signature says what failed.
    wrapped_in: str = field(default="", compare=False)

    @property
    def as_said(self) -> str:
        """The signature with torch's message as torch said it (:func:`message_as_said`), where the details hold it."""
        said = message_as_said(self.signature.message, self.details)
        return f"{self.signature.kind}: {error_shown(self.signature.exception, self.signature.message, said)}"


def message_as_said(message: str, details: str) -> str | None:
    """A signature's ``message`` as torch said it: the first line of ``details``, neither cut nor normalized
    (``aten.mm.out`` where the signature has ``'<op>'``); None where the details are not that message (a wrong
    answer's)."""
    said = details.strip().split("\n", 1)[0].strip()
    head = message.partition(DIAGNOSTIC_SEPARATOR)[0][:60]
    return said if said and normalize_message(said).startswith(head) else None


# --------------------------------------------------------------------------- #
# Normalizing messages
# --------------------------------------------------------------------------- #

_NORMALIZERS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # a tensor subclass whose __torch_dispatch__ refuses: the op named is whichever reached it first, and that
    # differs by stage (aot_eager's runtime wrapper meets aten.t, Inductor's extern kernel aten.mm.out: pytorch#193932)
    (re.compile(r"(Multiple dispatch failed for )'[^']*'"), r"\1'<op>'"),
    # object addresses and ids
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    # the autograd node a tensor came out of (a rebuilt input is a clone where the program's was a view)
    (re.compile(r",? which is output \d+ of [\w:<>]+,?"), ""),
    (re.compile(r"\b(id|pid|tid)[=: ]\s*\d+"), r"\1=?"),
    # a tensor's version counter, which counts every in-place write the program made to it before (autograd's
    # "is at version 4; expected version 3 instead": the graph alone, on fresh inputs, says 1 and 0)
    (re.compile(r"\b(at version )\d+(; expected version )\d+"), r"\1#\2#"),
    # dynamo's compile id, frame/recompile ("Guard fail reason: 0/1: tensor 'x' ..."): a replay, or a run alone,
    # compiles the frame a first time where the program had compiled it before
    (re.compile(r"(?<![\w./])\d+/\d+(?:_\d+)?(?=:\s|\])"), "#/#"),
    # absolute paths: generated sources, cache and temp directories
    (re.compile(r"(?<![\w.])/(?:[\w.\-]+/)+[\w.\-]*"), "<path>"),
    # long hashes (cache keys, kernel names like cxk2tiw6ldlulrtg...)
    (re.compile(r"\b[a-z0-9]{20,}\b"), "<hash>"),
    # a graph input by dynamo's name for its source (L_y_, G_w_) or the program's (y, ___stack0): AOTAutograd's
    # errors name inputs by whichever the graph it compiles holds
    (re.compile(r"\b[LG]_(\w+?)_\b"), r"\1"),
    (re.compile(r"\b___(?=\w)"), ""),
    # generated names with numeric suffixes: arg0_1, add_3, primals_12, getitem_5
    (re.compile(r"\b([A-Za-z][A-Za-z_]*?)\d*((?:_\d+)+)\b"), lambda m: m.group(1) + re.sub(r"\d+", "#", m.group(2))),
    # generated names with bare numeric suffixes: buf12, tmp3, kernel7, s0, u1 (sympy)
    (re.compile(r"\b(buf|tmp|arg|kernel|cpp_fused_\w+?|ks|s|u|x|y|z|q|var|node)(\d+)\b"), r"\1#"),
]


#: A compiler's diagnostic line (gcc and clang): ``file:line:col: error: what``.
_DIAGNOSTIC = re.compile(r"^\S*?:\d+:(?:\d+:)?\s*(?:fatal )?error: (.+)$", re.MULTILINE)
#: Names the code generator numbers (``tmp_acc0_vec``, ``in_ptr3``, ``buf12``): masked
#: inside identifiers too, where the word-bounded normalizers do not reach.
_GENERATED_IN_IDENTIFIER = re.compile(r"(tmp|acc|buf|ptr|ks|idx|var|kernel)\d+")
#: Between a message's first line and the compiler diagnostic it carries (gcc's own word
#: after a bar, which no plain message holds, so a message with a bar of its own is not split).
DIAGNOSTIC_SEPARATOR = " | error: "


def compiler_diagnostic(text: str) -> str | None:
    """The first ``error:`` line a compiler printed in ``text``, without its place and with generated names masked.

    gcc quotes with typographic quotes in a UTF-8 locale and with ASCII ones in the C
    locale; both read as ``'``, so a repro run elsewhere shows the same diagnostic.
    """
    found = _DIAGNOSTIC.search(str(text))
    if found is None:
        return None
    line = found.group(1).translate(str.maketrans("‘’“”", "''\"\""))
    return _GENERATED_IN_IDENTIFIER.sub(r"\1#", normalize_message(line))


#: How much of a message's first line is its identity (longer ones are cut there).
MESSAGE_LIMIT = 300


def normalize_message(message: str) -> str:
    """First line of ``message``, with addresses, ids, temp paths and generated numbering masked, cut at :data:`MESSAGE_LIMIT`."""
    lines = [line.strip() for line in str(message).strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    for pattern, replacement in _NORMALIZERS:
        first = pattern.sub(replacement, first)
    return first[:MESSAGE_LIMIT]


def error_shown(exception: str | None, message: str | None, said: str | None = None) -> str:
    """``Type: message`` as a person reads it (:func:`shown`; ``said``: the message as torch said it, uncut). An
    exception raised with no message has its type's name for one (what two such failures compare by): the name
    is said once, not twice."""
    if message == exception:
        return f"{exception}: (raised with no message)"
    return f"{exception}: {shown(message) if said is None else said}"


def shown(message: str | None) -> str:
    """A normalized message as a person reads it: one cut at :data:`MESSAGE_LIMIT` ends in "…".

    (Only where it is shown: the signature, ``report.json`` and the comparisons keep the
    cut message as it is. One of exactly that length reads as cut too.)
    """
    head, separator, diagnostic = (message or "").partition(DIAGNOSTIC_SEPARATOR)  # (the diagnostic is not part of the cut)
    return f"{head}…{separator}{diagnostic}" if len(head) >= MESSAGE_LIMIT else f"{head}{separator}{diagnostic}"


# --------------------------------------------------------------------------- #
# Classifying exceptions
# --------------------------------------------------------------------------- #


def innermost_exception(exc: BaseException) -> BaseException:
    """Peel torch's wrapper exceptions off ``exc`` to find the error that happened (:func:`~pt2kit.seams.dynamo_exc.innermost`)."""
    return dynamo_exc.innermost(exc)


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (``inner_exception``) or was raised from, outermost first."""
    return dynamo_exc.chain(exc)


def _raised_while_compiling(exc: BaseException) -> bool:
    """Was ``exc`` raised by dynamo's tracing, by a backend's compile step, or by Triton's compiler?"""
    dynamo_exception = dynamo_exc.dynamo_exception_type()
    return any(
        getattr(e, COMPILE_PHASE_ATTR, False)
        or isinstance(e, dynamo_exception)
        or dynamo_exc.raised_while_tracing(e)
        or type(e).__module__.startswith(TRITON_COMPILER_MODULES)
        for e in exception_chain(exc)
    )


#: Where Triton's compiler raises (``triton.compiler.errors.CompilationError`` and its kin).
TRITON_COMPILER_MODULES = ("triton.compiler", "triton.language")

#: A device error after which the process's GPU context is unusable (CUDA's sticky errors; HIP's alike).
_STICKY_DEVICE_ERROR = re.compile(
    r"\b(?:CUDA|HIP) error: (?:an illegal memory access was encountered|device-side assert triggered"
    r"|unspecified launch failure|misaligned address|an illegal instruction was encountered"
    r"|an illegal address was encountered)",
    re.IGNORECASE,
)
#: The exception name of a sticky device error's signature: torch raises it as a ``RuntimeError`` or
#: an ``AcceleratorError`` depending on the release and on the call it surfaced at.
DEVICE_ERROR = "DeviceError"


def sticky_device_error(text: str) -> str | None:
    """The first sticky device error ``text`` names (``CUDA error: an illegal memory access was encountered``), if any."""
    found = _STICKY_DEVICE_ERROR.search(str(text))
    return found.group(0) if found else None


def said(exc: BaseException) -> str:
    """``Type: first line`` of what ``exc`` says (200 characters at most), as pt2kit quotes an error in one line."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def signature_of_exception(exc: BaseException) -> Failure:
    """The failure an exception represents: a compile error if it came out of a compile step.

    A sticky device error anywhere in the chain is a ``crash`` (``DeviceError``), wherever it surfaced.
    """
    for e in exception_chain(exc):
        if (sticky := sticky_device_error(str(e))) is not None:
            return Failure(Signature(Kind.CRASH, DEVICE_ERROR, sticky), details=str(e)[:4000])
    inner = innermost_exception(exc)
    kind = Kind.COMPILE_ERROR if _raised_while_compiling(exc) else Kind.RUNTIME_ERROR
    text = str(inner) or type(inner).__name__
    message = normalize_message(text)
    if (diagnostic := compiler_diagnostic(text)) is not None:
        message = f"{message}{DIAGNOSTIC_SEPARATOR}{diagnostic}"
    wrapped_in = type(exc).__name__ if inner is not exc else ""
    return Failure(Signature(kind, type(inner).__name__, message), details=text[:4000], wrapped_in=wrapped_in)


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
    return Failure(Signature(Kind.CRASH, name, f"process killed by {name}"), details=stderr_tail[-4000:])


#: What glibc prints as it aborts on a heap it finds corrupted (``corrupted size vs. prev_size``,
#: ``double free or corruption``, ``free(): invalid pointer``, ``malloc(): corrupted top size``).
_HEAP_CHECK = re.compile(r"corrupted size|double free|corruption \(|\b(?:malloc|free|realloc|munmap_chunk|malloc_consolidate)\(\): ")


def memory_corrupted(failure: Failure | None) -> bool:
    """Did a process die of memory a kernel wrote past its buffer (glibc's heap check aborted it)?

    Where such a crash shows depends on the allocator's state, not on the code alone: two runs
    that both crash say little about the next (pytorch#196681 crashed in 1 run of 3 alone).
    """
    return failure is not None and failure.signature.kind == Kind.CRASH and bool(_HEAP_CHECK.search(failure.details or ""))


def signature_of_exit(code: int, stderr_tail: str = "") -> Failure:
    """A process that called ``exit()``/``os._exit()`` from native or user code mid-query."""
    return Failure(Signature(Kind.CRASH, "SystemExit", f"process exited with status {code}"), details=stderr_tail[-4000:])


def signature_of_timeout(seconds: float) -> Failure:
    return Failure(
        Signature(Kind.TIMEOUT, "Timeout", "no result within the time limit"), details=f"killed after {seconds:g} s"
    )


def shows_failure(returncode: int | None, stderr: str, target: Signature) -> bool:
    """Does a process that ran a repro (its exit status and stderr) show the ``target`` failure?

    A crash is its signal (a sticky device error, its words on a line); a timeout, no exit; anything else a line of the repro's
    output naming the exception with the same normalized message (a traceback's last
    line, ``torch._inductor.exc.InductorError: CppCompileError: C++ compile error``,
    an accuracy repro's ``AccuracyError: ...`` verdict, or the ``RuntimeError("...")``
    dynamo quotes an error of a fake tensor's in). A message that carries a compiler
    diagnostic is shown when that diagnostic is printed too, on a line of its own.
    """
    if target.kind == Kind.TIMEOUT:
        return returncode is None
    if target.kind == Kind.CRASH:
        if returncode is None or returncode == 0:
            return False
        if target.exception == DEVICE_ERROR:  # the error's own words, from whichever call it surfaced at
            return sticky_device_error(stderr) == target.message
        shown = signature_of_crash(-returncode) if returncode < 0 else signature_of_exit(returncode)
        return shown.signature.exception == target.exception
    if not returncode:
        return False
    head, _, diagnostic = target.message.partition(DIAGNOSTIC_SEPARATOR)
    if diagnostic and compiler_diagnostic(stderr) != diagnostic:
        return False
    target = Signature(target.kind, target.exception, head) if diagnostic else target
    # ``RuntimeError: message``, or the repr dynamo wraps an inner error in (``got RuntimeError("message")``)
    markers = (f"{target.exception}: ", f'{target.exception}("', f"{target.exception}('")
    bare = target.message == target.exception  # raised without a message: its signature's message is its name
    for line in stderr.splitlines():
        for marker in markers:
            if marker in line and normalize_message(line.split(marker, 1)[1]).startswith(target.message):
                return True
        # ``AssertionError`` alone, or ``InductorError: AssertionError: `` (a wrapper prints the empty message's colon)
        # (not a traceback's source line, ``raise AssertionError``)
        last = line.strip().rstrip(":").rstrip()
        if bare and (last == target.exception or last.endswith((f".{target.exception}", f": {target.exception}"))):
            return True
    return False
