"""A session: one pt2kit run, with its own directory, a warm worker and visible progress.

Every command that does work (``minify run``, ``minify bisect``, ``minify repro``, the
``TORCHDYNAMO_REPRO_AFTER`` hook) opens a :class:`Session`. It

- creates a fresh run directory (``<out>/run-<time>-<name>``; never an existing one,
  so no file is ever overwritten);
- owns the executor every query goes through (a :class:`~minifier.isolation.worker.Worker` unless
  given another :class:`~minifier.isolation.executor.Executor`), counting queries;
- shows progress on stderr: a live line on a terminal (refreshed from the worker's
  wait loop, since the parent must not run a refresh thread), plain log lines
  otherwise.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import rich.progress
from rich.console import Console

from pt2kit.errors import OutputNotWritable
from pt2kit.signature import Failure
from .executor import Executor, Handle
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


class Progress:
    """A rich spinner line on stderr, or plain log lines when stderr is not a terminal.

    It never starts rich's refresh thread (``auto_refresh=False``): the worker forks,
    and a forked child must not inherit a thread's locks. The worker's wait loop calls
    :meth:`tick` instead.
    """

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self._bar: rich.progress.Progress | None = None
        self._task: rich.progress.TaskID | None = None
        if enabled and console.is_terminal:
            self._bar = rich.progress.Progress(
                rich.progress.SpinnerColumn(),
                rich.progress.TextColumn("{task.description}"),
                rich.progress.TimeElapsedColumn(),
                console=console,
                auto_refresh=False,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("starting")

    def update(self, status: str) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.reset(self._task, description=status)
            self._bar.refresh()

    def tick(self) -> None:
        if self._bar is not None:
            self._bar.refresh()

    def log(self, message: str) -> None:
        """A line that stays (results, decisions)."""
        if self.enabled:
            self.console.print(message, highlight=False)

    def clear(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class Session:
    """One run: a directory, a worker, a query counter and progress output."""

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
        self.started = time.monotonic()
        if run_dir is not None:  # a directory pt2kit made earlier for this run (the autoload hook's)
            run_dir.mkdir(parents=True, exist_ok=True)
            self.run_dir = run_dir.resolve()
        else:
            self.run_dir = new_run_dir(out or default_out_dir(), name)
        self.console = console or Console(stderr=True)
        self.progress = Progress(self.console, enabled=not quiet)
        self.worker: Executor = executor or Worker(log_dir=self.run_dir / "logs", timeout=timeout)
        self.timeout = timeout
        self.queries = 0
        self.program_seconds = 0.0  # the longest run of the user's program so far
        self.timeline: list[tuple[str, float, float]] = []  # (what, seconds, ended at) of each phase and query
        # started, not yet waited for: log -> (command, process, start)
        self._programs: dict[str, tuple[list[str], Any, float]] = {}

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
        """Start a whole program now; the :meth:`run_program` of the same command waits for it.

        The command line starts the user's script this way before its own process
        imports torch (see :func:`pt2kit.script.start_capture`). A program nobody
        waits for is killed by :meth:`close`.
        """
        import subprocess

        from pt2kit.processes import pt2kit_env

        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        with open(log, "ab") as output:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                env=pt2kit_env(),
                start_new_session=True,
            )
        self._programs[str(log)] = (command, process, start)

    def run_program(
        self, command: list[str], label: str, *, log: Path, while_running: Callable[[], None] | None = None
    ) -> Failure | None:
        """Run a whole program (the user's script under capture) as a fresh process; how it ended.

        A fresh interpreter, in the user's own environment, every time: a second run
        starts from the same state as the first (a warm worker would not), so a failure
        is judged flaky only when the program itself is. None: it exited normally.
        A program :meth:`start_program` started already is waited for, not started again.
        ``while_running()`` is called every fraction of a second until it ends (the
        bisection starts queries on graphs the program has saved so far).
        """
        import subprocess

        from pt2kit.signature import signature_of_crash, signature_of_exit
        from .worker import kill_program

        self.progress.update(label)
        if self._programs.get(str(log), ([],))[0] != command:
            self._kill_programs()  # (one started with other options is not this run's program)
            self.start_program(command, log=log)
        _, process, start = self._programs.pop(str(log))
        try:
            preload_compile_stack()  # while the program runs, not after it
            while process.poll() is None:
                try:
                    process.wait(timeout=0.25 if while_running is None else 0.05)
                except subprocess.TimeoutExpired:
                    if while_running is not None:
                        while_running()
                    self.progress.tick()
        except BaseException:
            kill_program(process)
            raise
        self.mark(label, time.monotonic() - start)
        self.program_seconds = max(self.program_seconds, time.monotonic() - start)
        self._fit_jobs()
        tail = log.read_bytes()[-4000:].decode(errors="replace")
        if process.returncode < 0:
            return signature_of_crash(-process.returncode, tail)
        if process.returncode not in (0,):
            return signature_of_exit(process.returncode, tail)
        return None

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
        self.mark(running.label, result.seconds, ago=result.ended_ago)
        return result

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

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
        """Put a finished step on the timeline: how long it took, and when (since the run began) it ended
        (``ago`` seconds before now, for a query collected after the fact).

        The end times show the critical path: steps that ran side by side overlap.
        """
        self.timeline.append((step, round(seconds, 2), round(self.seconds - ago, 2)))

    def full_timeline(self) -> list[tuple[str, float, float | None]]:
        """The timeline, warm-ups first (they run in the background; their end is not recorded)."""
        return [*((what, round(s, 2), None) for what, s in self.worker.warm_seconds.items()), *self.timeline]

    def close(self) -> None:
        self.progress.clear()
        self._kill_programs()  # started, and then nobody waited (an error, a resumed run)
        self.worker.close()

    def _kill_programs(self) -> None:
        from .worker import kill_program

        for _, process, _ in self._programs.values():
            kill_program(process)
        self._programs.clear()


#: What reading back a captured graph imports in pt2kit's own process (a repro names Inductor's
#: config): about 1.5 s, paid while the program runs. Not Inductor's compiler (``compile_fx``, 0.7 s
#: of CPU more): pt2kit's own process never compiles, its queries' children do.
PRELOADED = ("torch._dynamo", "torch._inductor.config", "torch._functorch.aot_autograd")


def preload_compile_stack() -> None:
    """Import :data:`PRELOADED` now; one that fails to import is simply left for later."""
    import importlib

    for module in PRELOADED:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the import that needs it will say what is wrong
            pass


def print_json(data: Any) -> None:
    """The ``--json`` twin of every report: JSON on stdout and nothing else."""
    import json

    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
