"""Running a user's script as ``python SCRIPT ARGS...`` would, inside the current process.

Every pt2kit command that takes a SCRIPT (``minify run``, ``minify bisect``,
``python -m explain``, ``python -m validation``, ``python -m replay record``) goes
through :func:`run_script`, so they all agree on what "running the script" means:
``__name__ == "__main__"``, ``sys.argv`` set, the script's directory first on
``sys.path``, and the working directory left alone. Reports point at the user's
frames, never at the launcher's (:func:`is_internal_file`). Nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import runpy
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import ScriptFailedBeforeCompile, ScriptNotFound


def resolve_script(path: str | os.PathLike[str], what: str = "script") -> Path:
    """Return the absolute path of a script (or a repro: ``what``), or raise :class:`ScriptNotFound`."""
    script = Path(path).expanduser()
    if not script.is_file():
        raise ScriptNotFound(str(path), what)
    return script.resolve()


def check_syntax(script: Path) -> None:
    """A script that does not parse fails before it runs: said at once (exit 3), not after torch has loaded."""
    try:
        source = script.read_bytes()
    except OSError as e:
        raise ScriptNotFound(f"{script} ({e.strerror})") from None
    try:
        compile(source, str(script), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        where = f", line {e.lineno}" if isinstance(e, SyntaxError) and e.lineno else ""
        message = e.msg if isinstance(e, SyntaxError) else str(e)
        raise ScriptFailedBeforeCompile(
            f"{script.name} raised before torch.compile compiled anything: {type(e).__name__}: {message}{where}"
        ) from None


#: The script this process ran with :func:`run_script` (its ``__main__``, once runpy
#: has put the previous ``__main__`` back).
last_script: Path | None = None


def main_module_file() -> str | None:
    """The file of the program's ``__main__``: the user's script, however it was started."""
    if last_script is not None:
        return str(last_script)
    return getattr(sys.modules.get("__main__"), "__file__", None)


def run_script(path: str | os.PathLike[str], args: Sequence[str] = ()) -> dict[str, object]:
    """Execute ``path`` as the program's ``__main__`` with ``args`` as its arguments.

    Returns the script's globals. Exceptions (including ``SystemExit``) propagate to
    the caller, which decides what a failure means. ``sys.argv`` and ``sys.path`` are
    restored afterwards so several scripts can run in one process (tests do).
    """
    global last_script
    script = resolve_script(path)
    last_script = script
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    try:
        return runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


# Frames that are not the user's code: torch's, pt2kit's own, and the machinery that
# runs a script (runpy, frozen importlib). Reports point at the first frame outside.
_TORCH_DIR = os.path.dirname(importlib.util.find_spec("torch").origin or "") + os.sep  # type: ignore[union-attr]
#: pt2kit's own packages: the floor and the five tools. A repro imports none of them.
PT2KIT_PACKAGES = ("pt2kit", "minifier", "replay", "validation", "explain", "opcheck")
_PT2KIT_DIRS = tuple(
    os.path.join(str(Path(__file__).resolve().parents[1]), package) + os.sep for package in PT2KIT_PACKAGES
)


def is_launcher_file(filename: str) -> bool:
    """pt2kit's own files and runpy's: what runs the user's code, not the user's code."""
    return (
        filename.startswith(_PT2KIT_DIRS) or filename.endswith(os.sep + "runpy.py") or filename.startswith("<frozen ")
    )


#: One frame of a Python traceback or stack trace as text: ``File "<filename>", line <lineno>, in <name>``.
STACK_LINE = re.compile(r'File "(?P<filename>[^"]+)", line (?P<lineno>\d+), in (?P<name>\S+)')


def is_internal_file(filename: str) -> bool:
    """torch's files and the launcher's, which no user wants a report to point at."""
    return filename.startswith(_TORCH_DIR) or is_launcher_file(filename)


@contextlib.contextmanager
def stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """Keep stdout for a command's JSON document: send everything else written there to stderr.

    Python-level writes are redirected with ``redirect_stdout``; when stdout is the real
    file descriptor 1, fd 1 is pointed at stderr too, so output from C code (or from
    subprocesses the script starts) cannot slip into the JSON either. Every ``--json``
    command that runs a user's script in its own process uses it (explain, validation,
    replay record).
    """
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved_fd = None
    try:
        if sys.stdout.fileno() == 1:
            saved_fd = os.dup(1)
            os.dup2(2, 1)
    except (AttributeError, OSError, ValueError):  # not a real file (a test runner's buffer)
        saved_fd = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


#: The names a user's script runs under: its ``__main__``, and multiprocessing's copy of it.
MAIN_MODULES = ("__main__", "__mp_main__")

#: What a repro's carried definitions (the script's code it needs) run as: a module per block of them
#: (``pt2kit_definitions_<hash>``), in ``sys.modules`` since dynamo imports the module of a function it inlines.
CARRIED_MODULE = "pt2kit_definitions"


def is_carried_module(name: str) -> bool:
    """Is ``name`` a module of carried definitions, the script's own code run again (never one to import)?"""
    return name == CARRIED_MODULE or name.startswith(CARRIED_MODULE + "_")


def module_import_spec(module_name: str) -> tuple[str, str] | None:
    """``(import name, sys.path root)`` for a user module, or None for torch/stdlib/site-packages.

    The user's script itself (``__main__``) is never a module to import: a repro that
    imported it would run the whole program again (see :mod:`minifier.capture.extract`).
    """
    if module_name in MAIN_MODULES or is_carried_module(module_name):
        return None
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path is None:
        return None
    path = os.path.abspath(path)
    if (
        any(part in path for part in ("site-packages", "dist-packages"))
        or path.startswith(sys.base_prefix)
        or is_launcher_file(path)
    ):
        return None
    root = Path(path).parent
    for _ in range(module_name.count(".") + (1 if path.endswith("__init__.py") else 0)):
        root = root.parent
    return module_name, str(root)
