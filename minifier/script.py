"""Running a user's script as ``python SCRIPT ARGS...`` would, inside the current process.

Every pt2kit command that takes a SCRIPT (``minify run``, ``minify bisect``,
``python -m explain``, ``python -m replay record``) goes through :func:`run_script`, so
they all agree on what "running the script" means: ``__name__ == "__main__"``,
``sys.argv`` set, the script's directory first on ``sys.path``, and the working
directory left alone.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ScriptNotFound


def resolve_script(path: str | os.PathLike[str]) -> Path:
    """Return the absolute path of a script, or raise :class:`ScriptNotFound`."""
    script = Path(path).expanduser()
    if not script.is_file():
        raise ScriptNotFound(str(path))
    return script.resolve()


def run_script(path: str | os.PathLike[str], args: Sequence[str] = ()) -> dict[str, object]:
    """Execute ``path`` as the program's ``__main__`` with ``args`` as its arguments.

    Returns the script's globals. Exceptions (including ``SystemExit``) propagate to
    the caller, which decides what a failure means. ``sys.argv`` and ``sys.path`` are
    restored afterwards so several scripts can run in one process (tests do).
    """
    script = resolve_script(path)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    try:
        return runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
