"""Isolated queries: every question runs in a child forked from pt2kit's own warm process.

:class:`Worker` is the controller's side of :mod:`minifier.isolation.zygote`. It starts the
zygote (a fresh ``python -P -m minifier.isolation.zygote`` with its thread pools pinned), sends
it pickled query functions, and collects what the children report. The process
that uses a ``Worker`` (the ``minify`` command, a test session, a user's training
job through the Python API) may run any number of threads and any user code: it
never forks. Only the zygote does, and it never runs user code.

A query is a picklable callable (a module-level function, or a ``functools.partial``
of one); it should catch the failures it is asked about and return them as data. The
outcomes of a query that did not return normally:

- killed by a signal → a ``crash`` signature naming the signal;
- exited early (``sys.exit``/``os._exit`` inside the query) → ``crash`` too;
- past its deadline → its process group is killed → ``timeout``;
- raised → :class:`QueryError` (a pt2kit bug, with the child's traceback).

Ctrl-C kills the running children's process groups and re-raises
``KeyboardInterrupt``, so callers can checkpoint.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pt2kit.signature import Failure, signature_of_crash, signature_of_exit, signature_of_timeout
from .jobs import default_jobs
from pt2kit.processes import kill_group, pt2kit_env

from .zygote import WorkerDied, ZygoteProcess

T = TypeVar("T")


def yielding(fn: Callable[[], T]) -> T:
    """(In a query's child) ``fn()`` at the lowest CPU priority, its compiler's processes too: work done
    beside a run the user waits for (a repro verified elsewhere) takes only the cycles that run leaves.
    (A forked child's only: in the caller's own process it would lower the caller for good.)"""
    os.nice(19)
    return fn()


@dataclass
class QueryResult(Generic[T]):
    """What came back from one isolated query."""

    value: T | None
    failure: Failure | None  # set when the child crashed, timed out or exited early
    seconds: float
    log: Path | None = None
    ended: float | None = None  # time.perf_counter() when the child ended (None: it still ran)

    @property
    def ended_ago(self) -> float:
        """Seconds since the child ended (0 if it had not): where a result collected late goes on a timeline."""
        return time.perf_counter() - self.ended if self.ended is not None else 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None


class QueryError(RuntimeError):
    """A query function raised inside the child: a pt2kit bug, reported with the child's traceback."""


def program_threads() -> int:
    """The thread count the user's program runs with: what queries get back in their child."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    import torch

    threads = torch.get_num_threads()
    # torch's default, unless someone (a test session) already pinned this process to 1
    return threads if threads > 1 else os.cpu_count() or 1


class Worker:
    """Runs picklable functions in forked children of pt2kit's zygote, one child per call."""

    def __init__(
        self,
        log_dir: Path | None = None,
        timeout: float | None = None,
        slots: int | None = None,
        threads: int | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.timeout = timeout
        self.queries = 0
        self.slots = slots or default_jobs()  # queries side by side (minifier.isolation.jobs)
        self.child_threads = threads  # the program's thread count, unless given
        self.warm_seconds: dict[str, float] = {}
        self.notes: list[str] = []
        self._results = Path(tempfile.mkdtemp(prefix="pt2kit-results-"))
        self._zygotes: list[ZygoteProcess] = []
        self._learned: set[str] = set()
        self._next_qid = 0
        self._warming: set[str] = set()
        atexit.register(self.close)

    # -- the zygote ------------------------------------------------------------ #

    def _zygote(self) -> ZygoteProcess:
        live = [z for z in self._zygotes if not z.closed and not z.retired]
        if live:
            return live[-1]
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        zygote = ZygoteProcess(self.log_dir / "zygote.log" if self.log_dir else None, self._results)
        self._zygotes.append(zygote)
        return zygote

    def warm_up(self, level: str = "inductor", *, preload: Sequence[str] = (), wait: bool = False) -> None:
        """Ask the zygote to warm up to ``level`` (``eager`` or ``inductor``) before the next fork.

        ``preload``: pt2kit modules whose functions the coming queries pickle by name, imported
        in the zygote once (else each child imports them as it unpickles: some thirty modules
        for the reducer's, 0.1 s a query where Python writes no bytecode cache).
        Returns at once (unless ``wait``): queries sent later wait in the zygote until it
        is warm. :attr:`warm_seconds` fills in when the zygote reports.
        """
        self._learned.update(preload)  # sent ahead of the next query
        if level not in self._warming:
            self._warming.add(level)
            self._zygote().send(("warm", level))
        while wait and len(self.warm_seconds) < len(self._warming) and any(not z.closed for z in self._zygotes):
            self._pump(0.25)

    def close(self) -> None:
        """Stop every child and the zygote; remove the result scratch directory."""
        for zygote in self._zygotes:
            for running in list(zygote.running.values()):
                running.kill()
            zygote.close()
        shutil.rmtree(self._results, ignore_errors=True)

    # -- starting and waiting ------------------------------------------------------ #

    def start(
        self, fn: Callable[[], T], *, timeout: float | None = None, label: str = "query", threads: int | None = None
    ) -> Running[T]:
        """Start a child that runs ``fn()``; collect its result with :meth:`wait`.

        ``fn`` must be picklable. ``threads``: the child's torch threads (default: what
        the program had).
        """
        payload = pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
        timeout = self.timeout if timeout is None else timeout
        self.queries += 1
        self._next_qid += 1
        qid = self._next_qid
        log = self._log_path(label)
        result = self._results / f"{qid}.pkl"
        zygote = self._zygote()
        if self._learned:
            zygote.send(("import", sorted(self._learned)))
            self._learned.clear()
        self.child_threads = self.child_threads or program_threads()  # asked late: it may import torch (see cli.py)
        running: Running[T] = Running(
            self, zygote, qid, label, log, result, timeout, payload, threads or self.child_threads
        )
        zygote.running[qid] = running
        zygote.send(running.message())
        return running

    def wait(
        self, queries: Sequence[Running[Any]], on_wait: Callable[[], None] | None = None, *, any_: bool = False
    ) -> None:
        """Wait until all (or, with ``any_``, one) of ``queries`` are done. Ctrl-C kills them all."""
        try:
            while True:
                pending = [q for q in queries if not q.done]
                if not pending or (any_ and len(pending) < len(queries)):
                    return
                self._kill_late(pending)
                now = time.monotonic()
                deadlines = [q.deadline - now for q in pending if q.deadline is not None and not q.done]
                if not self._pump(max(0.0, min([0.25, *deadlines]))) and on_wait is not None:
                    on_wait()
        except BaseException:
            for q in queries:
                q.kill()
            raise

    def poll(self, timeout: float = 0.0) -> None:
        """Handle what the zygotes report within ``timeout`` seconds; kill started queries past their deadline."""
        self._kill_late([q for z in self._zygotes for q in z.running.values()])
        if not self._pump(timeout) and all(z.closed for z in self._zygotes):
            time.sleep(timeout)  # nothing to listen to: still take the time the caller meant to wait

    @staticmethod
    def _kill_late(queries: Sequence[Running[Any]]) -> None:
        now = time.monotonic()
        for q in [q for q in queries if q.deadline is not None and now >= q.deadline and not q.done]:
            q.timed_out = True
            q.kill()

    def _pump(self, timeout: float) -> bool:
        """Handle the zygotes' messages that arrive within ``timeout``; True if any did."""
        live = {z.out_fd: z for z in self._zygotes if not z.closed}
        if not live:
            return False
        ready, _, _ = select.select(list(live), [], [], timeout)
        for fd in ready:
            zygote = live[fd]
            for message in zygote.reader.read():
                self._on_message(zygote, message)
            if zygote.reader.closed:
                self._on_zygote_death(zygote)
        return bool(ready)

    def _on_message(self, zygote: ZygoteProcess, message: Any) -> None:
        tag = message[0]
        if tag == "ready":
            zygote.ready = True
        elif tag == "started":
            running = zygote.running.get(message[1])
            if running is not None:
                running.pid = message[2]
                running.started = time.perf_counter()
                if running.deadline is None and running.timeout is not None:
                    running.deadline = time.monotonic() + running.timeout
                if running.killed:  # killed before the zygote forked it
                    kill_group(running.pid)
        elif tag == "exited":
            running = zygote.running.pop(message[1], None)
            if running is not None:
                running.status = message[2]
                running.done = True
                running.ended = time.perf_counter()
        elif tag == "refused":
            # Something left a thread in the zygote: retire it, resend to a fresh (cold) one.
            running = zygote.running.pop(message[1], None)
            zygote.retired = True
            self.notes.append(f"pt2kit restarted its worker process: {message[2]}")
            if running is not None:
                fresh = self._zygote()
                running.zygote = fresh
                fresh.running[running.qid] = running
                fresh.send(running.message())
        elif tag == "warmed":
            seconds, threads, error, names = message[1:]
            self.warm_seconds[f"warm-up{'' if not self.warm_seconds else len(self.warm_seconds)}"] = seconds
            if error:
                self.notes.append(f"warm-up failed ({error}); queries start cold")
            if threads > 1:
                zygote.retired = True  # running children finish; new queries go to a fresh zygote
                self._warming.clear()
                self.notes.append(
                    f"warm-up left {threads - 1} threads beside the main one in pt2kit's worker process ({names}); continuing with a cold one"
                )

    def _on_zygote_death(self, zygote: ZygoteProcess) -> None:
        zygote.close()
        for running in list(zygote.running.values()):
            running.done = True
            running.died = True
            running.ended = time.perf_counter()
        zygote.running.clear()

    def run_all(
        self,
        queries: Sequence[tuple[Callable[[], Any], str]],
        *,
        timeout: float | None = None,
        slots: int | None = None,
        enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
        on_wait: Callable[[], None] | None = None,
        alongside: Sequence[Any] = (),  # (this worker's Running queries: Executor's Handles)
    ) -> list[QueryResult[Any] | None]:
        """Run independent queries, ``slots`` children at a time (default: the cores); results in order.

        ``enough(results)`` is asked whenever a query finishes (``results`` holds None
        for queries not finished yet); once it says yes, running queries are killed,
        the rest never start, and their results stay None. ``alongside``: queries
        started earlier, which hold a slot until they end (they are not waited for).
        """
        slots = min(slots or self.slots, len(queries) + sum(not q.done for q in alongside)) or 1
        running: list[Running[Any]] = []
        results: list[QueryResult[Any] | None] = [None] * len(queries)

        def collect() -> bool:
            for i, q in enumerate(running):
                if q.done and results[i] is None:
                    results[i] = q.result()
            return enough is not None and enough(results)

        try:
            for fn, label in queries:
                while sum(not q.done for q in [*running, *alongside]) >= slots:
                    self.wait([q for q in [*running, *alongside] if not q.done], on_wait, any_=True)
                    if collect():
                        return self._stop(running, results)
                # Every child keeps the program's thread count, even when two share the
                # cores: a kernel's failure can depend on it (a C++ exception thrown in
                # an OpenMP region aborts; on one thread it surfaces as a RuntimeError).
                running.append(self.start(fn, timeout=timeout, label=label))
            while not all(q.done for q in running):
                self.wait([q for q in running if not q.done], on_wait, any_=True)
                if collect():
                    return self._stop(running, results)
            collect()
        except BaseException:
            for q in running:
                q.kill()
            raise
        return results

    def run(
        self,
        fn: Callable[[], T],
        *,
        timeout: float | None = None,
        label: str = "query",
        on_wait: Callable[[], None] | None = None,
    ) -> QueryResult[T]:
        """Run ``fn()`` in a child and return its result (see :meth:`run_all`)."""
        result = self.run_all([(fn, label)], timeout=timeout, slots=1, on_wait=on_wait)[0]
        assert result is not None
        return result

    @staticmethod
    def _stop(running: list[Running[Any]], results: list[QueryResult[Any] | None]) -> list[QueryResult[Any] | None]:
        for q in running:
            q.kill()  # no-op for the finished ones
        return results

    def learn(self, modules: list[str]) -> None:
        """Library modules a child imported: the zygote imports them before the next fork.

        Inductor and sympy import much of themselves on first use, so every child
        paid for the same imports again (a tenth of a second and more per query).
        """
        self._learned.update(modules)

    def _log_path(self, label: str) -> Path | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60]
        return self.log_dir / f"{self.queries:04d}-{safe}.log"


class Running(Generic[T]):
    """A query while it runs: its zygote, its child's pid once forked, its deadline."""

    def __init__(
        self,
        worker: Worker,
        zygote: ZygoteProcess,
        qid: int,
        label: str,
        log: Path | None,
        result_path: Path,
        timeout: float | None,
        payload: bytes,
        threads: int,
    ) -> None:
        self.worker, self.zygote, self.qid, self.label, self.log = worker, zygote, qid, label, log
        self.result_path, self.timeout, self.payload, self.threads = result_path, timeout, payload, threads
        self.begun = self.started = self.ended = time.perf_counter()
        self.deadline: float | None = None  # set once the child exists (a query may wait for warm-up)
        self.pid: int | None = None
        self.status: int | None = None
        self.timed_out = False
        self.killed = False
        self.died = False
        self.done = False
        self.answer: QueryResult[T] | QueryError | None = None  # once done: what result() gives, every time
        self.cwd = os.getcwd()
        self.sys_path = list(sys.path)  # the child unpickles what this process could import
        self.env = pt2kit_env()  # and runs in this process's environment, not the zygote's pinned one

    def message(self) -> tuple[Any, ...]:
        """The zygote's ``run`` message for this query."""
        return (
            "run",
            self.qid,
            self.payload,
            None if self.log is None else str(self.log),
            str(self.result_path),
            self.threads,
            self.cwd,
            self.sys_path,
            self.env,
        )

    def kill(self) -> None:
        if self.done:
            return
        self.killed = True
        if self.pid is not None:
            kill_group(self.pid)
        else:  # not forked yet: the zygote will report it; forget it now
            self.zygote.running.pop(self.qid, None)
            self.done = True
            self.ended = time.perf_counter()
        if self.pid is not None:
            # wait for the zygote to reap it, so its slot is really free
            deadline = time.monotonic() + 5
            while not self.done and time.monotonic() < deadline and not self.zygote.closed:
                self.worker._pump(0.05)
            self.done = True

    def result(self) -> QueryResult[T]:
        """Its answer; once done, the same one however often asked (its result file is read once)."""
        if self.answer is None:
            try:
                result = self._result()
            except QueryError as e:
                if self.done:
                    self.answer = e
                raise
            result.ended = self.ended if self.done else None
            if not self.done:
                return result
            _note_answer(self.log, result)
            self.answer = result
        if isinstance(self.answer, QueryError):
            raise self.answer
        return self.answer

    def _result(self) -> QueryResult[T]:
        seconds = (self.ended if self.done else time.perf_counter()) - self.started
        if self.timed_out:
            return QueryResult(None, signature_of_timeout(self.timeout or 0.0), seconds, self.log)
        if self.died:
            raise WorkerDied(
                f"{self.label}: pt2kit's worker process died; see {self.log.parent / 'zygote.log' if self.log else 'its log'}"
            )
        status = self.status
        if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and self.result_path.exists():
            tag, value, imported = pickle.loads(self.result_path.read_bytes())
            self.result_path.unlink(missing_ok=True)
            self.worker.learn(imported)
            if tag == "raised":
                raise QueryError(f"{self.label} raised inside its worker:\n{value}")
            return QueryResult(value, None, seconds, self.log)
        tail = _tail(self.log)
        if status is None:  # killed before it started
            return QueryResult(None, signature_of_crash(signal.SIGKILL, tail), seconds, self.log)
        if os.WIFSIGNALED(status):
            return QueryResult(None, signature_of_crash(os.WTERMSIG(status), tail), seconds, self.log)
        return QueryResult(None, signature_of_exit(os.WEXITSTATUS(status), tail), seconds, self.log)


def kill_program(process: Any) -> None:
    """Kill a program pt2kit started in a session of its own, with its process group, and reap it."""
    kill_group(process.pid)
    process.wait()


def _note_answer(log: Path | None, result: QueryResult[Any]) -> None:
    """End a query's log with its answer: what a reader of ``logs/`` looks for (the child may print nothing)."""
    if log is None or not log.exists():
        return
    failure = result.failure if result.failure is not None else getattr(result.value, "failure", None)
    answer = "no answer" if result.value is None and failure is None else "failed: " if failure is not None else "ran"
    if failure is not None:
        answer += str(getattr(failure, "signature", failure))
    elif hasattr(result.value, "failure"):
        answer = "passed"
    try:
        with open(log, "a") as handle:
            handle.write(f"\n[pt2kit] {answer} ({result.seconds:.1f} s)\n")
    except OSError:
        pass  # (a log is for reading; never a reason to lose the answer)


def _tail(log: Path | None, limit: int = 4000) -> str:
    if log is None or not log.exists():
        return ""
    with open(log, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - limit))
        return handle.read().decode(errors="replace")
