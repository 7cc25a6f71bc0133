"""The processes pt2kit starts: how each is launched, in which environment, and how it is killed.

Every tool starts processes of its own (the minifier's zygote and capture, replay's
frame, the hook's background run): :func:`python_command` keeps the user's working
directory from shadowing pt2kit's modules, :func:`pt2kit_env` keeps pt2kit's own
``TORCHDYNAMO_REPRO_AFTER`` hook and torch's minifier quiet in them, and
:func:`kill_group` takes a process down with the compiler subprocesses it started.
"""

from __future__ import annotations

import os
import signal
import sys

#: Set in every process pt2kit starts: its TORCHDYNAMO_REPRO_AFTER hook stays quiet there.
AUTOLOAD_ENV = "PT2KIT_AUTOLOAD"


def python_command(module: str, *args: str) -> list[str]:
    """``python -m module args`` that files in the current directory cannot shadow.

    (``-P``, Python 3.11+, keeps the working directory off ``sys.path``; on 3.10
    ``PYTHONSAFEPATH`` is not known either, so callers also run with ``cwd`` set to
    a pt2kit directory there.)
    """
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", module, *args]


def pt2kit_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process pt2kit starts: the hook quiet, torch's minifier off."""
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL")}
    env[AUTOLOAD_ENV] = "0"
    env.update(extra or {})
    return env


def kill_group(pid: int) -> None:
    """SIGKILL a process pt2kit started as a group leader, and its group with it (its compiler
    subprocesses); one already gone, or no longer ours, is left alone."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
