"""The user's whole program, run as a fresh process (under capture): started early, waited for, killed.

A fresh interpreter, in the user's own environment, every time: a second run starts
from the same state as the first (a warm worker would not), so a failure is judged
flaky only when the program itself is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pt2kit.signature import Failure

from .progress import Progress
from .timeline import Timeline


class Programs:
    """The program runs of one session; :attr:`longest` is the longest run's seconds so far."""

    def __init__(self, progress: Progress, timeline: Timeline) -> None:
        self.progress, self.timeline = progress, timeline
        self.longest = 0.0
        # started, not yet waited for: log -> (command, process, start)
        self._started: dict[str, tuple[list[str], Any, float]] = {}

    def start(self, command: list[str], *, log: Path) -> None:
        """Start a whole program now; the :meth:`run` of the same command waits for it.

        The command line starts the user's script this way before its own process
        imports torch (see :func:`minifier.capture.program.start_capture`). A program nobody
        waits for is killed by :meth:`kill_all`.
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
        self._started[str(log)] = (command, process, start)

    def run(
        self, command: list[str], label: str, *, log: Path, while_running: Callable[[], None] | None = None
    ) -> Failure | None:
        """Run a whole program and say how it ended: None when it exited normally.

        A program :meth:`start` started already is waited for, not started again.
        ``while_running()`` is called every fraction of a second until it ends (the
        bisection starts queries on graphs the program has saved so far).
        """
        import subprocess

        from pt2kit.signature import signature_of_crash, signature_of_exit
        from .worker import kill_program

        self.progress.update(label)
        if self._started.get(str(log), ([],))[0] != command:
            self.kill_all()  # (one started with other options is not this run's program)
            self.start(command, log=log)
        _, process, start = self._started.pop(str(log))
        try:
            preload_compile_stack()  # while the program runs, not after it
            while process.poll() is None:
                try:
                    process.wait(timeout=0.25 if while_running is None else 0.05)
                    continue
                except subprocess.TimeoutExpired:
                    pass
                # (outside the handler: what an in-process query raises must not carry the timeout as its context)
                if while_running is not None:
                    while_running()
                self.progress.tick()
        except BaseException:
            kill_program(process)
            raise
        self.timeline.mark(label, time.monotonic() - start)
        self.longest = max(self.longest, time.monotonic() - start)
        tail = log.read_bytes()[-4000:].decode(errors="replace")
        if process.returncode < 0:
            return signature_of_crash(-process.returncode, tail)
        if process.returncode not in (0,):
            return signature_of_exit(process.returncode, tail)
        return None

    def started(self) -> list[Any]:
        """The processes started and not yet waited for."""
        return [process for _, process, _ in self._started.values()]

    def kill_all(self) -> None:
        """Kill every program started and not waited for (an error, a resumed run)."""
        from .worker import kill_program

        for _, process, _ in self._started.values():
            kill_program(process)
        self._started.clear()


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
