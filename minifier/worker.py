"""Isolated queries on a warm process: one ``fork()`` per question.

Every question pt2kit asks ("does this graph still fail under Inductor?") may
segfault, ``abort()``, or spin forever inside compiled code, so it cannot run in
pt2kit's own process. torch's minifier isolates by starting a fresh interpreter per
query and pays about 6 s of ``import torch`` each time. pt2kit imports torch (and
Inductor, and warms its compile path) once in the parent, then forks a child per
query: the child starts warm, runs one function, sends its picklable result back
through a pipe, and exits. The parent only waits, with a deadline.

What the parent must never do is leave threads or OpenMP pools behind, because a
forked child inherits their locks but not the threads. So the parent runs with
``torch.set_num_threads(1)`` and Inductor's compile pool off (``compile_threads=1``),
and asserts that it is single-threaded before each fork. Children get the
machine's thread count back.

Outcomes of a query that did not return normally:

- killed by a signal → a ``crash`` signature naming the signal;
- exited early (``sys.exit``/``os._exit`` inside the query) → ``crash`` too;
- past its deadline → the whole process group is killed → ``timeout``.

Ctrl-C in the parent kills the running child's process group and re-raises
``KeyboardInterrupt`` so callers can checkpoint.
"""

from __future__ import annotations

import faulthandler
import io
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from .signature import Failure, signature_of_crash, signature_of_exit, signature_of_timeout

T = TypeVar("T")

#: Set to "0" in processes pt2kit starts, so its TORCHDYNAMO_REPRO_AFTER hook stays quiet in them.
AUTOLOAD_ENV = "PT2KIT_AUTOLOAD"


@dataclass
class QueryResult(Generic[T]):
    """What came back from one isolated query."""

    value: T | None
    failure: Failure | None  # set when the child crashed, timed out or exited early
    seconds: float
    log: Path | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class QueryError(RuntimeError):
    """A query function raised inside the child: a pt2kit bug, reported with the child's traceback."""


_CHILD_THREADS: int | None = None
_WARMED = 0  # 1: eager and aot stages warmed in this process, 2: Inductor too
#: Modules a child imported that the parent imports too, so later children start warm.
LEARNABLE_IMPORTS = ("torch._inductor.", "torch._functorch.", "torch._dynamo.", "torch.fx.", "sympy.")


def prepare_parent() -> int:
    """Make this process safe to fork from; returns the thread count children should use.

    Must run before torch computes anything in this process. Idempotent.
    """
    global _CHILD_THREADS
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    import torch._inductor.config as inductor_config

    if _CHILD_THREADS is None:
        # torch's default, unless someone (a test session) already pinned this process to 1
        threads = torch.get_num_threads()
        _CHILD_THREADS = threads if threads > 1 else int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    torch.set_num_threads(1)
    inductor_config.compile_threads = 1
    import torch._dynamo.config as dynamo_config

    # torch's minifier would dump a repro per failing query (in any thread: see autoload)
    dynamo_config._config["repro_after"].default = None
    dynamo_config.repro_after = None
    return _CHILD_THREADS


class ForkUnsafe(RuntimeError):
    """This process runs other threads, so a forked child could deadlock on their locks."""


def native_thread_count() -> int:
    """Threads of this process, OpenMP/MKL pools included (Python only sees its own)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: Python's view is the best we have
        return threading.active_count()


def check_fork_safe() -> None:
    """Refuse to fork from a multi-threaded process instead of deadlocking the child.

    A child forked from a process whose OpenMP pool has started hangs in its first
    parallel region. :func:`prepare_parent` keeps pt2kit's own processes
    single-threaded; a process that already computed with several threads (a
    user's training script, a test session) must hand the work to a fresh one.
    """
    threads = native_thread_count()
    if threads > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        raise ForkUnsafe(
            f"pt2kit cannot fork workers from a process running {threads} threads"
            + (f" ({names})" if names else " (an OpenMP/MKL pool from earlier torch computation)")
            + "; run it in a fresh process (the minify command does)"
        )


class Worker:
    """Runs functions in forked children of this (warm) process, one child per call."""

    def __init__(self, log_dir: Path | None = None, timeout: float | None = None, slots: int | None = None) -> None:
        self.child_threads = prepare_parent()
        self.log_dir = log_dir
        self.timeout = timeout
        self.queries = 0
        # Queries that may run side by side: one per core (Inductor compiles on one thread).
        self.slots = slots or int(os.environ.get("PT2KIT_SLOTS") or max(1, min(os.cpu_count() or 1, 4)))
        self._learned: set[str] = set()

    def warm_up(self, inductor: bool = True) -> float:
        """Compile one small training step in this process so that children start warm.

        The lazy imports and first-compile work of dynamo, AOTAutograd and Inductor
        (about 2 s per query otherwise) then happen once here instead of in every child.
        Runs single-threaded; see the module docstring.
        """
        import torch

        global _WARMED
        if _WARMED >= (2 if inductor else 1):
            return 0.0
        start = time.perf_counter()
        x = torch.randn(4, 4, requires_grad=True)

        def step(t: torch.Tensor) -> torch.Tensor:
            return (torch.relu(t) * t.sin()).sum(dim=-1)

        for backend in ("eager", "aot_eager", "aot_eager_decomp_partition") + (("inductor",) if inductor else ()):
            torch.compile(step, backend=backend)(x).sum().backward()
        torch._dynamo.reset()
        _WARMED = 2 if inductor else 1
        return time.perf_counter() - start

    def start(self, fn: Callable[[], T], *, timeout: float | None = None, label: str = "query", threads: int | None = None) -> Running[T]:
        """Fork a child that runs ``fn()``; collect its result with :meth:`wait`.

        Several children may run at once (the machine's cores are the limit worth
        using); the parent stays single-threaded and waits on all their pipes.
        ``threads``: the child's torch threads (default: what the program had).
        """
        self._import_learned()
        check_fork_safe()
        timeout = self.timeout if timeout is None else timeout
        self.queries += 1
        log = self._log_path(label)
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        begun = time.perf_counter()
        # Ctrl-C stays pending across fork(): delivered inside os.fork's at-fork
        # callbacks (logging registers some) it would be swallowed as "Exception
        # ignored". Unblocked below, once the child is ours to kill, it interrupts us.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        pid = os.fork()
        if pid == 0:  # child
            os.close(read_fd)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides about Ctrl-C
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            self._child(fn, write_fd, log, threads or self.child_threads)
        os.close(write_fd)
        running: Running[T] = Running(pid, read_fd, label, log, begun, None if timeout is None else time.monotonic() + timeout, timeout)
        try:
            os.setpgid(pid, pid)  # also here: the child may not have run yet
        except (PermissionError, ProcessLookupError):
            pass
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException:
            running.kill()
            raise
        return running

    def wait(self, queries: Sequence[Running[Any]], on_wait: Callable[[], None] | None = None, *, any_: bool = False) -> None:
        """Wait until all (or, with ``any_``, one) of ``queries`` are done. Ctrl-C kills them all."""
        try:
            while True:
                pending = [q for q in queries if not q.done]
                if not pending or (any_ and len(pending) < len(queries)):
                    return
                now = time.monotonic()
                for q in pending:
                    if q.deadline is not None and now >= q.deadline:
                        q.kill()
                        q.timed_out = True
                pending = [q for q in pending if not q.done]
                if not pending:
                    continue
                deadlines = [q.deadline - now for q in pending if q.deadline is not None]
                ready, _, _ = select.select([q.read_fd for q in pending], [], [], max(0.0, min([0.25, *deadlines])))
                for q in pending:
                    if q.read_fd in ready:
                        q.read()
                if not ready and on_wait is not None:
                    on_wait()
        except BaseException:
            for q in queries:
                q.kill()
            raise

    def run_all(
        self,
        queries: Sequence[tuple[Callable[[], Any], str]],
        *,
        timeout: float | None = None,
        slots: int | None = None,
        enough: Callable[[list[QueryResult[Any] | None]], bool] | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> list[QueryResult[Any] | None]:
        """Run independent queries, ``slots`` children at a time (default: the cores); results in order.

        ``enough(results)`` is asked whenever a query finishes (``results`` holds None
        for queries not finished yet); once it says yes, running queries are killed,
        the rest never start, and their results stay None.
        """
        slots = min(slots or self.slots, len(queries)) or 1
        running: list[Running[Any]] = []
        results: list[QueryResult[Any] | None] = [None] * len(queries)

        def collect() -> bool:
            for i, q in enumerate(running):
                if q.done and results[i] is None:
                    results[i] = q.result()
                    self._learned.update(q.imported)
            return enough is not None and enough(results)

        try:
            for fn, label in queries:
                while sum(not q.done for q in running) >= slots:
                    self.wait([q for q in running if not q.done], on_wait, any_=True)
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

    @staticmethod
    def _stop(running: list[Running[Any]], results: list[QueryResult[Any] | None]) -> list[QueryResult[Any] | None]:
        for q in running:
            q.kill()  # no-op for the finished ones
        return results

    def _import_learned(self) -> None:
        """Import, here, the library modules children had to import lazily.

        Inductor and sympy import much of themselves on first use, so every child
        paid for the same imports again (a tenth of a second and more per query).
        Importing them once in the parent makes the next children start warmer.
        """
        import importlib

        for name in sorted(self._learned - set(sys.modules)):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a module that only imports in context: leave it to children
                pass
        self._learned.clear()

    def run(
        self,
        fn: Callable[[], T],
        *,
        timeout: float | None = None,
        label: str = "query",
        on_wait: Callable[[], None] | None = None,
    ) -> QueryResult[T]:
        """Run ``fn()`` in a forked child and return its (pickled) result.

        ``fn`` should catch the failures it is asked about and return them as data;
        an exception escaping it is a pt2kit bug and raises :class:`QueryError` here.
        ``on_wait`` is called a few times a second while the child runs (progress
        displays refresh from it: the parent must stay single-threaded).
        """
        result = self.run_all([(fn, label)], timeout=timeout, slots=1, on_wait=on_wait)[0]
        assert result is not None
        return result

    # -- child side --------------------------------------------------------- #

    def _child(self, fn: Callable[[], Any], write_fd: int, log: Path | None, threads: int) -> None:
        code = 0
        try:
            os.setpgid(0, 0)  # own process group: a timeout kills compilers it spawned too
            os.environ[AUTOLOAD_ENV] = "0"
            if log is not None:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                if faulthandler.is_enabled():  # a crash's stack goes to the query's log, not the user's terminal
                    faulthandler.enable(file=open(2, "w", closefd=False), all_threads=False)
            import torch

            torch.set_num_threads(threads)
            before = set(sys.modules)
            try:
                message: tuple[str, Any, list[str]] = ("ok", fn(), [])
            except BaseException:  # noqa: BLE001 - everything goes back to the parent
                message = ("raised", traceback.format_exc(), [])
            message[2].extend(m for m in set(sys.modules) - before if m.startswith(LEARNABLE_IMPORTS))
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            with io.FileIO(write_fd, "w", closefd=True) as pipe:
                pipe.write(data)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 70
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _log_path(self, label: str) -> Path | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60]
        return self.log_dir / f"{self.queries:04d}-{safe}.log"


class Running(Generic[T]):
    """A query's child while it runs: its pipe, its deadline, and what it sent so far."""

    def __init__(self, pid: int, read_fd: int, label: str, log: Path | None, begun: float, deadline: float | None, timeout: float | None) -> None:
        self.pid, self.read_fd, self.label, self.log = pid, read_fd, label, log
        self.begun, self.deadline, self.timeout = begun, deadline, timeout
        self.chunks: list[bytes] = []
        self.status: int | None = None
        self.timed_out = False
        self.done = False
        self.imported: list[str] = []  # library modules the child imported (see Worker._import_learned)
        self.ended = begun

    def read(self) -> None:
        """Take what the child wrote; at EOF, reap it."""
        chunk = os.read(self.read_fd, 1 << 20)
        if chunk:
            self.chunks.append(chunk)
            return
        _, self.status = os.waitpid(self.pid, 0)  # EOF: the child has exited or is exiting
        self._close()

    def kill(self) -> None:
        if not self.done:
            _kill_group(self.pid)
            self._close()

    def _close(self) -> None:
        os.close(self.read_fd)
        self.done = True
        self.ended = time.perf_counter()

    def result(self) -> QueryResult[T]:
        seconds = (self.ended if self.done else time.perf_counter()) - self.begun
        if self.timed_out:
            return QueryResult(None, signature_of_timeout(self.timeout or 0.0), seconds, self.log)
        payload = b"".join(self.chunks)
        if payload and self.status is not None and os.WIFEXITED(self.status) and os.WEXITSTATUS(self.status) == 0:
            tag, value, imported = pickle.loads(payload)
            self.imported = imported
            if tag == "raised":
                raise QueryError(f"{self.label} raised inside its worker:\n{value}")
            return QueryResult(value, None, seconds, self.log)
        tail = _tail(self.log)
        assert self.status is not None
        if os.WIFSIGNALED(self.status):
            return QueryResult(None, signature_of_crash(os.WTERMSIG(self.status), tail), seconds, self.log)
        return QueryResult(None, signature_of_exit(os.WEXITSTATUS(self.status), tail), seconds, self.log)


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _tail(log: Path | None, limit: int = 4000) -> str:
    if log is None or not log.exists():
        return ""
    with open(log, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - limit))
        return handle.read().decode(errors="replace")
