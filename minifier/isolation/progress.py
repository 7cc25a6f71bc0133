"""What a run shows while it works: one live line on a terminal, plain lines otherwise."""

from __future__ import annotations

import rich.progress
from rich.console import Console


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
