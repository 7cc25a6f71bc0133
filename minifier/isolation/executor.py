"""Where queries run: the interface a :class:`~minifier.isolation.session.Session` drives.

A *query* is a picklable zero-argument callable (``functools.partial`` of a
module-level function over a :class:`~minifier.unit.case.GraphCase`) whose result, or the
way it died, answers one question: "does this candidate still fail the same way?".
The session never runs one itself; it hands it to an executor and reads back a
:class:`~minifier.isolation.worker.QueryResult` (a value, or the failure signature of a crash,
exit or timeout).

Today's executor is :class:`~minifier.isolation.worker.Worker`: a zygote process on this
machine that forks one child per query, ``slots`` at a time (one per core). A query
that takes seconds is well served by it. When one compile takes minutes (a 5,000-node
graph through Inductor, or a 64-rank job), the same queries can go to a cluster; the
plan, in ``docs/architecture.md`` ("Executors"), is an executor that

1. ships the pickled query (graph text, tensors, carried definitions: everything a
   :mod:`~minifier.repro.files` repro holds, nothing machine-local) to remote workers
   that run ``python -P -m minifier.isolation.zygote`` in the user's environment;
2. fans the reducer's independent candidates (``Session.query_all`` with ``enough``)
   out to as many workers as there are candidates, and kills the losers when the
   first answer settles the question;
3. reports each query's seconds so the session's timeline stays true.

Nothing above the executor changes for that: the reducer only ever asks
``run_all(queries, enough=...)``. This module fixes the contract.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, TypeVar, runtime_checkable

from .worker import QueryResult

T = TypeVar("T")

__all__ = ["Executor", "Handle"]


@runtime_checkable
class Handle(Protocol):
    """One started query."""

    label: str
    done: bool

    def kill(self) -> None:
        """Stop it (a no-op once done); its result is then a SIGKILL crash."""

    def result(self) -> QueryResult[Any]:
        """Its value or its failure; only once ``done``."""


@runtime_checkable
class Executor(Protocol):
    """Runs isolated queries: a failure in one (crash, hang, abort) never reaches the caller."""

    slots: int
    """Queries it runs side by side unless told otherwise (:mod:`minifier.isolation.jobs`)."""

    notes: list[str]
    """What degraded along the way (a restarted worker, a warm-up that failed), for the report."""

    warm_seconds: dict[str, float]
    """Seconds spent warming up, by what was warmed, for the report's timeline."""

    def warm_up(self, level: str = "inductor", *, preload: Sequence[str] = (), wait: bool = False) -> None:
        """Prepare to run queries at ``level`` (imports, compilers, and the ``preload`` modules
        their functions live in), in the background unless ``wait``."""

    def start(self, fn: Callable[[], Any], *, timeout: float | None = None, label: str = "query") -> Handle:
        """Start one query and return at once."""

    def wait(self, queries: Sequence[Any], on_wait: Callable[[], None] | None = None, *, any_: bool = False) -> None:
        """Block until all (or, with ``any_``, one) of ``queries`` are done, calling ``on_wait`` now and then."""

    def poll(self, timeout: float = 0.0) -> None:
        """Take in what started queries reported within ``timeout`` seconds (their ``done``), and stop
        those past their deadline; for a caller with work of its own (waiting for the program)."""

    def run_all(
        self,
        queries: Sequence[tuple[Callable[[], Any], str]],
        *,
        timeout: float | None = None,
        slots: int | None = None,
        enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
        on_wait: Callable[[], None] | None = None,
        alongside: Sequence[Handle] = (),
    ) -> list[QueryResult[Any] | None]:
        """Run independent queries side by side; results in order, None for those ``enough`` made unnecessary.

        ``alongside``: queries started earlier (with :meth:`start`), each holding a slot until it ends."""

    def close(self) -> None:
        """Stop every query and every process this executor started."""
