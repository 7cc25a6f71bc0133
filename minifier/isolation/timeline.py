"""Where a run's time went: each step's seconds, and when it ended (seconds since the run began).

The end times show the critical path: steps that ran side by side overlap. The session
marks each query and each phase; ``report.json``'s ``timeline`` is these steps, warm-ups
(which run in the background and record no end) first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimelineStep:
    """A step of the run's ``timeline``: its seconds, and when it ended (seconds since the run began).

    A warm-up runs in the background: its end is not recorded (``ended`` None, no key).
    """

    step: str
    seconds: float
    ended: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "seconds": self.seconds}
        return out if self.ended is None else {**out, "ended": self.ended}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimelineStep:
        return cls(data["step"], data.get("seconds", 0.0), data.get("ended"))


class Timeline:
    """The steps of one run, in the order they ended."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.steps: list[TimelineStep] = []

    def __iter__(self) -> Iterator[TimelineStep]:
        return iter(self.steps)

    def __repr__(self) -> str:
        return f"Timeline({self.steps!r})"

    @property
    def seconds(self) -> float:
        """Seconds since the run began."""
        return time.monotonic() - self.started

    def mark(self, step: str, seconds: float, *, ago: float = 0.0) -> None:
        """Put a finished step on the timeline: how long it took, and when it ended (``ago`` seconds before now,
        for a query collected after the fact)."""
        self.steps.append(TimelineStep(step, round(seconds, 2), round(self.seconds - ago, 2)))

    def with_warm_ups(self, warm_seconds: dict[str, float]) -> list[TimelineStep]:
        """The steps, the warm-ups first (they run in the background; their end is not recorded)."""
        return [*(TimelineStep(what, round(s, 2)) for what, s in warm_seconds.items()), *self.steps]
