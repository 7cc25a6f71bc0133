"""Triage: what a disagreement must survive before the hunt calls it torch's bug.

A program whose compiled run disagrees with eager is a *suspect*. Each rule below
drops the suspects it names; the rules are tried in this order, and a suspect that
survives them all is a finding (:class:`Suspect`), with the one-line reason why it is
torch's bug, not the program's (:func:`why`).

- **invalid** (structural): eager refuses the program, or its ``mark_dynamic`` marks a
  size ``f`` specializes (``ConstraintViolationError``); not judged at all;
- **nondeterministic**: two eager runs differ; not judged at all (the vocabulary has no
  random ops, so this is rare: an op with unspecified ties);
- **slow, not hung**: a hang that, judged again with four times the time limit, passes
  (a cold compile on a loaded machine);
- **flaky**: judged again, in a fresh child, it passes;
- **tolerance noise**: a wrong answer of kind ``values`` that passes with the accuracy
  rule's tolerance widened tenfold;
- **overflow eager shares**: a wrong integer answer that goes away when the integer
  inputs are made small (-2..2): it needs values that overflow, and eager's own
  integer overflow is not a reference (wrapping is not promised in a fused kernel);
- **rounding Inductor elides**: a wrong answer (a float's, or an exact one computed from
  floats: ``bucketize`` of a bf16 value) that goes away with Inductor's
  ``emulate_precision_casts``: eager rounds each fp16/bf16 intermediate, and Inductor,
  by design, keeps a fused intermediate in fp32 (closer to the fp64 reference, but
  ``inf + -inf`` in eager can be a finite sum compiled);
- **subnormals vector math flushes**: a wrong answer (a float's, or an exact one computed
  from floats) that goes away when the inputs' subnormal values (``-1e-40``) are zeros of their sign: Inductor's vectorized
  math (Sleef) may read a subnormal as zero, as ``-ffast-math`` code does, and no
  promise covers them; a later op that turns on the sign (``sqrt``, ``log``) makes a
  rounding of ``1e-40`` a NaN.

Not rules, because the vocabulary leaves them out (:mod:`~minifier.hunt.vocabulary`):
random ops, uninitialized memory, indices of ties and NaNs. A crash or a hang of the
compiled run is a suspect like any other failure, and judged again in a fresh child.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from pt2kit.signature import Kind, Signature
from .judge import Judging, Outcome, Verdict


class Rule(str, enum.Enum):
    """Why a suspect was dropped."""

    INVALID = "invalid"
    NONDETERMINISTIC = "nondeterministic"
    SLOW = "slow, not hung"
    FLAKY = "flaky"
    TOLERANCE = "tolerance noise"
    OVERFLOW = "overflow eager shares"
    PRECISION_CASTS = "rounding Inductor elides"
    SUBNORMALS = "subnormals vector math flushes"


@dataclass(frozen=True)
class Suspect:
    """A disagreement that survived triage: torch's bug, by the rules."""

    failure: Signature
    detail: str
    why: str


def why(failure: Signature) -> str:
    """One line: why a failure that survived triage is torch's bug, not the program's."""
    if failure.kind == Kind.ACCURACY:
        return (
            "eager runs the program and agrees with itself; the compiled result is further from the float64 reference "
            f"than eager's own rounding allows ({failure.message.rsplit('(', 1)[-1].rstrip(')')}), judged twice and with "
            "a tenfold tolerance"
        )
    if failure.kind in (Kind.CRASH, Kind.TIMEOUT):
        return f"eager runs the program; the compiled run dies ({failure.message}), twice in fresh processes"
    return f"eager runs the program; torch.compile raises {failure.exception} ({failure.kind}), twice in fresh processes"


def triage(first: Verdict, ask: Callable[[Judging], Verdict]) -> Suspect | Rule | None:
    """The suspect ``first`` is, after the rules; a :class:`Rule` when one drops it; None when it passed.

    ``ask(judging)`` judges the same program again in a fresh child.
    """
    if first.outcome is Outcome.PASSED:
        return None
    if first.outcome is Outcome.INVALID:
        return Rule.INVALID
    if first.outcome is Outcome.NONDETERMINISTIC:
        return Rule.NONDETERMINISTIC
    assert first.failure is not None
    # A hang is judged again with four times the time: on a loaded machine a cold compile can outlast the limit.
    again = ask(Judging(patience=4.0) if first.failure.kind == Kind.TIMEOUT else Judging())
    if first.failure.kind == Kind.TIMEOUT and again.outcome is Outcome.PASSED:
        return Rule.SLOW
    if again.failure != first.failure:
        return Rule.FLAKY
    if first.failure.kind == Kind.ACCURACY:
        if first.failure.message.endswith("(values)") and ask(Judging(tolerance=1e-3)).outcome is Outcome.PASSED:
            return Rule.TOLERANCE
        if first.failure.message.endswith("(exact values)") and ask(Judging(small_ints=True)).outcome is Outcome.PASSED:
            return Rule.OVERFLOW
        # (an exact answer too, computed from floats: bucketize of a value Inductor does not round to bf16 first;
        # elu(-1e-40).any(), True eagerly, False where expm1 reads the subnormal as 0)
        if ask(Judging(emulate_casts=True)).outcome is Outcome.PASSED:
            return Rule.PRECISION_CASTS
        if ask(Judging(flush_subnormals=True)).outcome is Outcome.PASSED:
            return Rule.SUBNORMALS
    return Suspect(first.failure, first.detail, why(first.failure))
