"""An executor that runs each query in this very process: the decisions without the isolation.

:class:`~minifier.isolation.worker.Worker` forks a child per query so that a crash, a
hang or an abort in compiled code never reaches pt2kit. What pt2kit *decides* from the
answers (which stage fails first, which graph is the culprit, what a pass keeps) needs
only the answers. On queries that fail by raising, as the planted backends of
``tests/support/user_modules/planted.py`` do, :class:`InProcessExecutor` gives the same answers without a
zygote, a warm-up or a fork: the way torch tests ``fx_minifier``, in the test's process.

What it gives up, by design: a query that crashes takes this process down, a hang is
never timed out, and a query that changes other global state (a module attribute, a
registered op) leaves it changed for the next. It serves tests and pt2kit's own
debugging, never a user's run.

What it keeps of a child's clean slate, since the answers depend on it:

- each query starts from dynamo's reset state, as a child forked from the zygote does
  (else what dynamo remembers of earlier queries' frames, such as the sizes that made it
  compile an automatically dynamic graph, would change the next answer);
- each query runs in a copy of this process's context, so the compiler config a case
  sets (``assume_static_by_default`` for a dynamic graph) ends with it: torch keeps each
  config value a program sets in a ``contextvars.ContextVar``;
- grad mode and the default dtype are put back after each query: a dynamo graph sets
  grad mode with nodes of its own (``_set_grad_enabled``), and a candidate the reducer
  cut between two of them would leave it off.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .worker import QueryError, QueryResult


@dataclass(eq=False)  # (a handle is itself, as the worker's are: sets of handles hold it by identity)
class Answered:
    """A query that ran to its end as it was started (:meth:`InProcessExecutor.start`)."""

    label: str
    answer: QueryResult[Any]
    done: bool = True

    def kill(self) -> None:
        """Nothing left to stop."""

    def result(self) -> QueryResult[Any]:
        return self.answer


class InProcessExecutor:
    """Runs each query at once, here, in the order asked (see the module docstring for what that gives up)."""

    def __init__(self) -> None:
        self.slots = 1  # (one query at a time, whatever the caller asks)
        self.notes: list[str] = []
        self.warm_seconds: dict[str, float] = {}
        self.labels: list[str] = []  # every query asked, in order

    def warm_up(self, level: str = "inductor", *, preload: Sequence[str] = (), wait: bool = False) -> None:
        """Import the modules the queries live in; the compilers warm up with the first query."""
        for name in preload:
            importlib.import_module(name)

    def start(self, fn: Callable[[], Any], *, timeout: float | None = None, label: str = "query") -> Answered:
        """Run ``fn()`` now; a query that raises is a pt2kit bug (:class:`QueryError`), as in a worker's child."""
        import torch

        from pt2kit.seams import config

        self.labels.append(label)
        torch.compiler.reset()
        started = time.perf_counter()
        grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
        # (a repro's apply_config() sets the program's context: CompileContext)
        precision, deterministic = torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled()
        threads = torch.get_num_threads()
        try:
            value = config.run_isolated(fn)
        except Exception:  # noqa: BLE001 - a child reports the same as QueryError
            raise QueryError(f"{label} raised in process:\n{traceback.format_exc()}") from None
        finally:
            torch.set_grad_enabled(grad)
            torch.set_default_dtype(dtype)
            torch.set_float32_matmul_precision(precision)
            torch.use_deterministic_algorithms(deterministic)
            torch.set_num_threads(threads)
        return Answered(label, QueryResult(value, None, time.perf_counter() - started))

    def wait(self, queries: Sequence[Any], on_wait: Callable[[], None] | None = None, *, any_: bool = False) -> None:
        """Every started query is done already."""

    def poll(self, timeout: float = 0.0) -> None:
        """Every started query is done already."""

    def run_all(
        self,
        queries: Sequence[tuple[Callable[[], Any], str]],
        *,
        timeout: float | None = None,
        slots: int | None = None,
        enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
        on_wait: Callable[[], None] | None = None,
        alongside: Sequence[Any] = (),
    ) -> list[QueryResult[Any] | None]:
        """The queries one after another; once ``enough(results)`` says yes, the rest stay None (never run)."""
        results: list[QueryResult[Any] | None] = [None] * len(queries)
        for i, (fn, label) in enumerate(queries):
            results[i] = self.start(fn, timeout=timeout, label=label).result()
            if enough is not None and enough(results):
                break
        return results

    def close(self) -> None:
        """Nothing runs once a query has returned."""
