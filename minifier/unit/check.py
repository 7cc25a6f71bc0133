"""The question a run asks of every graph: does it, through one stage, fail with one failure?

One frozen :class:`Check` travels from the bisection's verdict to the reducer's last
query and into the repro, which records it: the stage (``inductor``, ``aot_eager``, a
user's backend), the failure's :class:`~pt2kit.signature.Signature`, the run's accuracy
mode, and how many times each question is asked (a flaky failure's ``tries``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pt2kit.signature import Kind, Signature
from pt2kit.words import Word

if TYPE_CHECKING:
    from .accuracy import Accuracy


class Stage(Word):
    """The stages every graph goes through, in order; the last is Inductor or the user's own backend, so a
    stage in a record is any backend name, and these are the names pt2kit knows."""

    EAGER = "eager"
    AOT_EAGER = "aot_eager"
    AOT_EAGER_DECOMP_PARTITION = "aot_eager_decomp_partition"
    INDUCTOR = "inductor"


def stage_below(stage: str) -> str | None:
    """The stage before ``stage`` in the bisection's order (a user's backend: the last aot stage); eager has none."""
    order = [str(s) for s in Stage]
    if stage == Stage.EAGER:
        return None
    return order[order.index(stage) - 1] if stage in order else Stage.AOT_EAGER_DECOMP_PARTITION


@dataclass(frozen=True)
class Check:
    """Does a graph fail ``stage`` with ``failure``? Asked ``tries`` times, failing when any run does.

    ``accuracy``: the run's mode (``False``; ``True``, outputs judged against eager and an
    fp64 reference; ``"strict"``, bit for bit). :meth:`judging` is the reducer's question,
    which judges outputs only when the failure is a wrong answer.
    """

    stage: str
    failure: Signature
    accuracy: Accuracy = False
    tries: int = 1

    @property
    def strict(self) -> bool:
        return self.accuracy == "strict"

    def judging(self) -> Check:
        """This check with outputs judged only when the failure is a wrong answer (a crash is a crash either way)."""
        return dataclasses.replace(self, accuracy=self.accuracy if self.failure.kind == Kind.ACCURACY else False)

    def asked(self, tries: int) -> Check:
        """This check, each question asked ``tries`` times."""
        return dataclasses.replace(self, tries=tries)
