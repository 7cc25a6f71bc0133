"""A session: one pt2kit run, with its own directory, a warm worker and visible progress.

Every command that does work (``minify run``, ``minify bisect``, ``minify repro``, the
``TORCHDYNAMO_REPRO_AFTER`` hook) opens a :class:`Session`. It

- creates a fresh run directory (``<out>/run-<time>-<name>``; never an existing one,
  so no file is ever overwritten);
- owns the executor every query goes through (a :class:`~minifier.isolation.worker.Worker` unless
  given another :class:`~minifier.isolation.executor.Executor`), counting queries;
- shows progress on stderr (:mod:`~minifier.isolation.progress`): a live line on a terminal
  (refreshed from the worker's wait loop, since the parent must not run a refresh
  thread), plain log lines otherwise;
- keeps the run's :mod:`~minifier.isolation.timeline`, and its runs of the user's whole
  program (:mod:`~minifier.isolation.programs`).
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from rich.console import Console

from pt2kit.errors import OutputNotWritable
from pt2kit.signature import Failure
from .executor import Executor, Handle
from .programs import Programs
from .progress import Progress
from .timeline import Timeline, TimelineStep
from .worker import QueryResult, Worker

T = TypeVar("T")

DEFAULT_OUT = "torch_compile_debug"


def default_out_dir() -> Path:
    """Where run directories go: ``$TORCHDYNAMO_REPRO_DIR``, else ``./torch_compile_debug``."""
    return Path(os.environ.get("TORCHDYNAMO_REPRO_DIR") or DEFAULT_OUT)


def new_run_dir(out: Path, name: str) -> Path:
    """Create and return a directory for one run under ``out``; never reuses one.

    :class:`OutputNotWritable` when ``out`` cannot hold one (read-only, a file, no permission).
    """
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]
    try:
        out.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = out / (f"run-{stamp}-{safe}" + (f"-{n}" if n else ""))
            try:
                path.mkdir()
                return path.resolve()
            except FileExistsError:
                continue
    except OSError as e:
        raise OutputNotWritable(out, e.strerror or type(e).__name__) from None
    raise OutputNotWritable(out, "a thousand run directories of this second already exist")


class Closable(Protocol):
    def close(self) -> None: ...


class Session:
    """One run: its directory, the executor its queries go through, its progress line, its timeline and the
    runs of the user's program (:class:`~minifier.isolation.programs.Programs`), with the query counter."""

    def __init__(
        self,
        name: str,
        *,
        out: Path | None = None,
        timeout: float | None = 300.0,
        quiet: bool = False,
        console: Console | None = None,
        run_dir: Path | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.timeline = Timeline()
        if run_dir is not None:  # a directory pt2kit made earlier for this run (the autoload hook's)
            run_dir.mkdir(parents=True, exist_ok=True)
            self.run_dir = run_dir.resolve()
        else:
            self.run_dir = new_run_dir(out or default_out_dir(), name)
        self.console = console or Console(stderr=True)
        self.progress = Progress(self.console, enabled=not quiet)
        self.worker: Executor = executor or Worker(log_dir=self.run_dir / "logs", timeout=timeout)
        self.programs = Programs(self.progress, self.timeline)
        self.timeout = timeout
        self.queries = 0
        self.waited: weakref.WeakSet[Handle] = weakref.WeakSet()  # on the timeline: waited again, not put there twice
        #: What to ask while the written repro runs elsewhere, given the repro's case, its
        #: check and ``done()`` (its run ended): below the stage's first questions, asked
        #: ahead on a core the run leaves free (:class:`minifier.bisect.probes.AskAhead`).
        self.while_verifying: Callable[[Any, Any, Callable[[], bool]], None] | None = None
        #: Below the stage leaves the program's run with the workaround to the background
        #: (``minify run`` without ``--wait``: :mod:`minifier.bisect.program_check`).
        self.program_later = False
        #: A fresh interpreter that imported torch already, waiting to run the written repro
        #: elsewhere (:class:`minifier.stages.elsewhere.ReadyInterpreter`); closed with the session.
        self.ready: Closable | None = None
        #: What the run has found so far (the program's failure, each graph's stages), for the
        #: ``report.json`` of a run that ends without a repro: an exit 5 keeps what was learned.
        self.found: Callable[[], dict[str, Any]] = dict

    def keeps_found(self, error: Any) -> None:
        """``error`` (a UserFacingError) reports what the run found so far, where it says nothing of its own."""
        for key, value in self.found().items():
            error.report.setdefault(key, value)

    def warm_up(self, inductor: bool = True, preload: Sequence[str] = ()) -> None:
        """Have pt2kit's worker process warm up (in the background) before its next query.

        ``preload``: the modules the coming queries' functions live in (see :meth:`Executor.warm_up`).
        """
        self.worker.warm_up("inductor" if inductor else "eager", preload=preload)

    def query(
        self, fn: Callable[[], T], label: str, *, timeout: float | None = None, count: bool = True
    ) -> QueryResult[T]:
        """Run ``fn`` in an isolated child with the session's timeout, showing ``label``."""
        result = self.query_all([(fn, label)], timeout=timeout, count=count, slots=1)[0]
        assert result is not None
        return result

    def query_all(
        self,
        queries: Sequence[tuple[Callable[[], Any], str]],
        *,
        timeout: float | None = None,
        count: bool = True,
        slots: int | None = None,
        enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
        alongside: Sequence[Handle] = (),
    ) -> list[QueryResult[Any] | None]:
        """Run independent queries side by side (a child each, one per core at a time).

        With ``enough``, stop as soon as the results so far answer the question; the
        queries that did not get to finish come back as None (see :meth:`Worker.run_all`).
        ``alongside``: queries started earlier (:meth:`start`), each holding a core until it ends.
        """
        labels = " ‖ ".join(label for _, label in queries)
        self.progress.update(f"{labels}  (from query {self.queries + 1})" if count else labels)
        timeout = self.timeout if timeout is None else timeout
        results = self.worker.run_all(
            queries, timeout=timeout, slots=slots, enough=enough, on_wait=self.progress.tick, alongside=alongside
        )
        if count:
            self.queries += sum(r is not None for r in results)
        for (_, label), result in zip(queries, results):
            if result is not None:  # (each where it ended: the batch ends with its slowest)
                self.mark(label, result.seconds, ago=result.ended_ago)
        return results

    def start_program(self, command: list[str], *, log: Path) -> None:
        """Start the user's program now (:meth:`Programs.start`); :meth:`run_program` waits for it."""
        self.programs.start(command, log=log)

    def run_program(
        self, command: list[str], label: str, *, log: Path, while_running: Callable[[], None] | None = None
    ) -> Failure | None:
        """Run the user's program as a fresh process and say how it ended (:meth:`Programs.run`); then fewer
        jobs, when children the size of the program would not fit in the free memory."""
        ended = self.programs.run(command, label, log=log, while_running=while_running)
        self._fit_jobs()
        return ended

    @property
    def program_seconds(self) -> float:
        """The longest run of the user's program so far."""
        return self.programs.longest

    @property
    def jobs(self) -> int:
        """Queries side by side (``--jobs``: :mod:`minifier.isolation.jobs`); the reducer asks as many ahead."""
        return self.worker.slots

    def _fit_jobs(self) -> None:
        """Fewer jobs when children the size of the program just run would not fit in the free memory."""
        from .jobs import available_memory, fitting, largest_child

        peak, free = largest_child(), available_memory()
        fit = fitting(self.jobs, peak, free)
        if fit < self.jobs and free is not None:
            self.worker.notes.append(
                f"{self.jobs} jobs lowered to {fit}: the program took {peak / 2**30:.1f} GiB, "
                f"and {free / 2**30:.1f} GiB are free"
            )
            self.worker.slots = fit

    def start(self, fn: Callable[[], Any], label: str, *, timeout: float | None = None) -> Handle:
        """Start one query and return at once (do other work, then :meth:`wait`)."""
        self.queries += 1
        self.progress.update(f"{label}  (query {self.queries})")
        return self.worker.start(fn, timeout=self.timeout if timeout is None else timeout, label=label)

    def wait(self, running: Handle) -> QueryResult[Any]:
        self.worker.wait([running], on_wait=self.progress.tick)
        result = running.result()
        if running not in self.waited:
            self.waited.add(running)
            self.mark(running.label, result.seconds, ago=result.ended_ago)
        return result

    def stop(self, running: Sequence[Handle]) -> None:
        """Kill these queries and return once their processes are gone: a dying child still writes
        where it ran, so what it wrote to can be removed only then."""
        for handle in running:
            handle.kill()
        self.worker.wait(list(running))

    @property
    def seconds(self) -> float:
        return self.timeline.seconds

    def log(self, message: str) -> None:
        self.progress.log(message)

    @property
    def notes(self) -> list[str]:
        """What degraded along the way (a worker restarted, a warm-up that failed)."""
        return self.worker.notes

    def timed(self, step: str, fn: Callable[[], T]) -> T:
        """``fn()``, shown as the current step and put on the timeline (work in a subprocess of its own, not a query)."""
        self.progress.update(step)
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.mark(step, time.perf_counter() - start)

    def mark(self, step: str, seconds: float, *, ago: float = 0.0) -> None:
        """Put a finished step on the timeline (:meth:`Timeline.mark`)."""
        self.timeline.mark(step, seconds, ago=ago)

    def full_timeline(self) -> list[TimelineStep]:
        """The timeline, warm-ups first (they run in the background; their end is not recorded)."""
        return self.timeline.with_warm_ups(self.worker.warm_seconds)

    def close(self) -> None:
        self.progress.clear()
        self.programs.kill_all()  # started, and then nobody waited (an error, a resumed run)
        if self.ready is not None:
            self.ready.close()
            self.ready = None
        self.worker.close()


def print_json(data: Any) -> None:
    """The ``--json`` twin of every report: JSON on stdout and nothing else."""
    import json

    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
