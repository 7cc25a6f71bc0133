"""The zygote: pt2kit's own warm process, which forks one child per query and does nothing else.

Every question pt2kit asks ("does this graph still fail under Inductor?") may
segfault, ``abort()`` or hang inside compiled code, so it runs in a child process.
Starting a fresh interpreter per query costs seconds of ``import torch``; forking a
warm process costs milliseconds. But ``fork()`` is only safe from a process that runs
no other threads: a child inherits the parent's locks, not the threads that hold
them, and hangs in its first OpenMP region or allocator call.

A user's process can never be trusted to be single-threaded: ``import torch`` pulls
in numpy, whose OpenBLAS starts a thread pool; tqdm starts a monitor thread;
data loaders, OpenMP and the user's own code start more. So pt2kit forks from a
process of its own that is fork-safe *by construction*:

- it is started fresh (``python -P -m minifier.isolation.zygote``) by :class:`minifier.isolation.worker.Worker`,
  with every thread pool pinned to one thread in its environment before torch,
  numpy or MKL load (:data:`PINNED_ENV`);
- it never runs user code: it imports torch and warms dynamo/AOTAutograd/Inductor
  (:mod:`minifier.isolation.warmup`), and forwards each query's pickled payload to a child
  *without unpickling it*; only the child unpickles and runs it;
- it checks that it still runs one thread before each fork, and says so instead of
  forking when something (a warm-up compile) left one behind;
- its children get the controller's environment, working directory, ``sys.path``
  and the program's thread count back.

The protocol, over two pipes whose fd numbers come on the command line, is a
stream of length-prefixed pickles (pt2kit talking to itself; nothing a user handed
over is ever unpickled here)::

    controller → zygote   ("run", qid, payload, log, result, threads, cwd, sys_path, env)
                          ("warm", level)       ("import", [module, ...])
    zygote → controller   ("ready", info)       ("started", qid, pid)
                          ("exited", qid, wait_status)
                          ("refused", qid, reason)
                          ("warmed", seconds, threads, error, thread names)

The controller starts and talks to a zygote through :class:`ZygoteProcess` (this module,
so that the protocol's two ends live together); :class:`minifier.isolation.worker.Worker` drives it.

A child writes its result (``("ok", value, imported)`` or ``("raised", traceback,
imported)``) to the ``result`` file, atomically, then exits 0. Killing a child
(timeouts, Ctrl-C) is the controller's job: each child leads its own process
group, so ``killpg`` takes its compiler subprocesses with it.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from pt2kit.processes import AUTOLOAD_ENV, kill_group, pt2kit_env, python_command
from pt2kit.script import PT2KIT_PACKAGES  # a caller may have the zygote preload the module its queries' functions live in

from .warmup import warm_up

#: Thread pools pinned to one thread before anything loads them. Children get the
#: controller's environment back with each query.
PINNED_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
#: Library modules a child imported that the zygote may import too (never user modules).
LEARNABLE_IMPORTS = (
    "torch._inductor.",
    "torch._functorch.",
    "torch._dynamo.",
    "torch.fx.",
    "sympy.",
    "torch._subclasses.",
    "torch._higher_order_ops.",
)

_HEADER = struct.Struct("!Q")


def send(fd: int, message: object) -> None:
    """Write one length-prefixed pickle to ``fd``."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, _HEADER.pack(len(data)) + data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Reader:
    """Reassembles length-prefixed pickles from a non-blocking stream of chunks."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.closed = False

    def read(self) -> list[Any]:
        """Read what is available (call when ``fd`` is readable); returns the complete messages."""
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            self.closed = True
        self.buffer += chunk
        messages = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                break
            payload = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
            del self.buffer[: _HEADER.size + size]
            messages.append(pickle.loads(payload))
        return messages


# --------------------------------------------------------------------------- #
# The controller's side: starting a zygote (minifier.isolation.worker drives it)
# --------------------------------------------------------------------------- #


class WorkerDied(RuntimeError):
    """pt2kit's zygote process went away (killed from outside, or a pt2kit bug)."""


class ZygoteProcess:
    """The controller's handle on one zygote process: its pipes, and the queries running in it."""

    def __init__(self, log: Path | None, neutral: Path) -> None:
        to_zygote, self.in_fd = os.pipe()  # we write self.in_fd
        self.out_fd, from_zygote = os.pipe()  # we read self.out_fd
        env = pt2kit_env(PINNED_ENV)
        stderr = open(log, "ab") if log is not None else subprocess.DEVNULL
        # (Python 3.10 has no -P: an empty working directory of pt2kit's keeps the
        # user's files from shadowing pt2kit's modules; children go back to the caller's.)
        try:
            self.process = subprocess.Popen(
                python_command("minifier.isolation.zygote", str(to_zygote), str(from_zygote)),
                pass_fds=(to_zygote, from_zygote),
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                env=env,
                cwd=neutral,
                # Its own process group (the terminal's Ctrl-C is the controller's to handle), but the
                # controller's session: Linux schedules each session as a group (autogroup), and
                # a session of its own would take half the CPU from the program being captured.
                **({"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}),
            )
        finally:
            if not isinstance(stderr, int):  # (not subprocess.DEVNULL)
                stderr.close()
            os.close(to_zygote)
            os.close(from_zygote)
        self.reader = Reader(self.out_fd)
        self.ready = False
        self.closed = False
        self.retired = False  # refused a fork: no new queries go here
        self.running: dict[int, Any] = {}  # qid -> minifier.isolation.worker.Running

    def send(self, message: object) -> None:
        try:
            send(self.in_fd, message)
        except (BrokenPipeError, OSError) as e:
            raise WorkerDied(f"pt2kit's worker process is gone ({e})") from None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in (self.in_fd, self.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        # An idle zygote exits on the closed pipe at once. One still warming up reads it
        # only when its compile ends (seconds, when the program ended early or ran no
        # compile): it runs no user code and holds no query by now, so it is stopped.
        for stop in (None, self.process.terminate, self.process.kill):
            if stop is not None:
                stop()
            try:
                self.process.wait(timeout=0.2 if stop is None else 5)
                return
            except subprocess.TimeoutExpired:
                continue
        self.process.wait()


# --------------------------------------------------------------------------- #
# The zygote's side (runs as ``python -m minifier.isolation.zygote IN_FD OUT_FD``)
# --------------------------------------------------------------------------- #


def fork_unsafe() -> str | None:
    """Why a child forked now could hang or fail, or None: a thread besides the main one (its locks
    would be held forever in the child), or CUDA initialized here (a child cannot use it again)."""
    if native_thread_count() > 1:
        return f"the zygote runs {native_thread_count()} threads ({thread_names()})"
    torch = sys.modules.get("torch")
    try:
        initialized = torch is not None and torch.cuda.is_initialized()
    except Exception:  # noqa: BLE001 - a torch without a CUDA module has none to initialize
        initialized = False
    return "the zygote initialized CUDA (a forked child cannot use it)" if initialized else None


def native_thread_count() -> int:
    """Threads of this process, OpenMP/BLAS pools included (Python only sees its own)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: Python's view is the best we have
        import threading

        return threading.active_count()


def thread_names() -> str:
    """What the threads besides the main one are, by the names the kernel knows them by.

    ``pt_autograd_N`` are autograd's device threads; ``omp``/``openblas`` names are a
    thread pool. Python's own threads are named as Python names them.
    """
    import threading

    python = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    try:
        tasks = sorted(os.listdir("/proc/self/task"), key=int)[1:]  # the first is the main thread
        native = [open(f"/proc/self/task/{task}/comm").read().strip() for task in tasks]
    except OSError:
        native = []
    autograd = [name for name in native if name.startswith("pt_autograd")]
    others = [name for name in native if not name.startswith("pt_autograd") and name not in python]
    parts = python + (["autograd's device threads (" + ", ".join(autograd) + ")"] if autograd else []) + others
    return ", ".join(parts) or "native threads"


def serve(in_fd: int, out_fd: int) -> None:
    """The zygote's loop: fork queries, reap children, report; until the controller goes away."""
    import select

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the controller decides about Ctrl-C
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written

    _quiet_thread_starters()
    import torch

    torch.set_num_threads(1)
    send(out_fd, ("ready", {"pid": os.getpid(), "torch": torch.__version__, "threads": native_thread_count()}))

    reader = Reader(in_fd)
    children: dict[int, int] = {}  # pid -> qid
    while True:
        ready, _, _ = select.select([in_fd, wake_read], [], [])
        if wake_read in ready:
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass
        _reap(children, out_fd)
        if in_fd not in ready:
            continue
        for message in reader.read():
            _handle(message, children, in_fd, out_fd, wake_read, wake_write)
        if reader.closed:  # the controller is gone: nobody will read results
            for pid in children:
                kill_group(pid)
            os._exit(0)


def _reap(children: dict[int, int], out_fd: int) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        qid = children.pop(pid, None)
        if qid is not None:
            send(out_fd, ("exited", qid, status))


def _handle(
    message: tuple[Any, ...], children: dict[int, int], in_fd: int, out_fd: int, wake_read: int, wake_write: int
) -> None:
    tag = message[0]
    if tag == "run":
        _, qid, payload, log, result, threads, cwd, sys_path, env = message
        if (unsafe := fork_unsafe()) is not None:
            send(out_fd, ("refused", qid, unsafe))
            return
        sys.stdout.flush()
        sys.stderr.flush()
        # Everything alive now (torch, the warm-up's state) moves to the collector's
        # permanent generation: a child's full collections then skip it, and leave the
        # inherited pages shared (a collection writes to every page it walks).
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            os.close(in_fd)
            os.close(out_fd)
            os.close(wake_read)
            os.close(wake_write)
            _child(payload, log, result, threads, cwd, sys_path, env)
        try:
            os.setpgid(pid, pid)  # also here: the child may not have run yet
        except (PermissionError, ProcessLookupError):
            pass
        children[pid] = qid
        send(out_fd, ("started", qid, pid))
    elif tag == "warm":
        seconds, error = warm_up(message[1])
        send(out_fd, ("warmed", seconds, native_thread_count(), error, thread_names()))
    elif tag == "import":
        for name in message[1]:
            if (
                name.startswith(LEARNABLE_IMPORTS) or name.split(".")[0] in PT2KIT_PACKAGES
            ) and name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - a module that only imports in context: children do it
                    pass


def _quiet_thread_starters() -> None:
    """Libraries that start threads on their own, told not to (before torch imports them)."""
    try:
        import tqdm  # torch.fx.Interpreter makes a (disabled) bar; tqdm starts a monitor thread anyway

        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass


def _child(
    payload: bytes, log: str | None, result: str, threads: int, cwd: str, sys_path: list[str], env: dict[str, str]
) -> None:
    """(In the forked child) run the query and write its result; never returns."""
    import traceback

    code = 0
    try:
        os.setpgid(0, 0)
        os.chdir(cwd)
        sys.path[:] = list(dict.fromkeys([*sys_path, *sys.path]))  # what the controller can import
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.environ.clear()  # the controller's environment (the pinned values were for this process only)
        os.environ.update(env)
        os.environ[AUTOLOAD_ENV] = "0"
        if log is not None:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            import faulthandler

            faulthandler.enable(file=open(2, "w", closefd=False), all_threads=False)  # a crash's stack goes to the log
        import torch

        torch.set_num_threads(threads)
        _fresh_python_randomness()
        before = set(sys.modules)
        try:
            fn = pickle.loads(payload)
            message: tuple[str, object, list[str]] = ("ok", fn(), [])
        except BaseException:  # noqa: BLE001 - everything goes back to the controller
            message = ("raised", traceback.format_exc(), [])
        message[2].extend(m for m in set(sys.modules) - before if m.startswith(LEARNABLE_IMPORTS))
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an unpicklable result is a pt2kit bug; say so
            data = pickle.dumps(
                ("raised", "the query's result cannot be pickled:\n" + traceback.format_exc(), message[2])
            )
        tmp = f"{result}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, result)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _fresh_python_randomness() -> None:
    """Each child draws its own random numbers, as a fresh process would.

    A forked child inherits its parent's ``random`` (and numpy's) state: every query
    would draw the same numbers, and a failure that shows in half of a program's runs
    (a compiler's random choice) would show in all of them or none. (torch's own
    generator is seeded by every query that runs a graph.)
    """
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
