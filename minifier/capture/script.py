"""Running a user's script as ``python SCRIPT ARGS...`` would, inside the current process.

Every pt2kit command that takes a SCRIPT (``minify run``, ``minify bisect``,
``python -m explain``) goes through :func:`run_script`, so
they all agree on what "running the script" means: ``__name__ == "__main__"``,
``sys.argv`` set, the script's directory first on ``sys.path``, and the working
directory left alone. :func:`capture_plan` and :func:`start_capture` say how the
minifier runs it under capture, as a fresh process; like the rest of this module
they import no torch.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ScriptFailedBeforeCompile, ScriptNotFound

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy
    from ..isolation.session import Session


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


@dataclass(frozen=True)
class ProgramRun:
    """The user's program as pt2kit runs it under capture: ``python SCRIPT ARGS...``, in a fresh process.

    ``backend``: what every ``torch.compile`` of the program gets instead of its own
    backend (None: its own). ``accuracy``: how the capture judges each compiled graph's
    first run. ``nproc``: the ranks of a torchrun job (1: one process). Nothing here
    imports torch, so ``minify run`` can start the program before its own process has
    imported torch (:meth:`minifier.isolation.session.Session.start_program`).
    """

    script: Path
    args: tuple[str, ...] = ()
    backend: str | None = None
    accuracy: Accuracy = False
    nproc: int = 1

    def command(self, out_dir: Path, timeout: float | None) -> list[str]:
        """The command that runs :func:`minifier.capture.recorder.capture_script` into ``out_dir`` (``minify _capture``)."""
        from ..isolation.zygote import python_command

        options = ["--out", str(out_dir)] + (["--backend", self.backend] if self.backend else [])
        options += ["--timeout", str(timeout)] if timeout else []
        options += ["--accuracy", "strict" if self.accuracy == "strict" else "on"] if self.accuracy else []
        return python_command("minifier", "_capture", *options, "--", str(self.script), *self.args)

    def plan(self, run_dir: Path, timeout: float | None, again: bool = False) -> tuple[list[str], Path, Path]:
        """How a run directory's capture of the program runs: (command, its output directory, its log)."""
        out = run_dir / ("captured-again" if again else "captured")
        return self.command(out, timeout), out, run_dir / "logs" / f"{out.name}.log"

    @property
    def warms_inductor(self) -> bool:
        """Should the worker warm Inductor up while the program runs? A guess, made before the program says which
        backend it compiles with, that costs only time when wrong: a stage that needs Inductor warms it up then, and
        Inductor's warm-up is a compile (seconds) that a program on another backend never needs. Yes unless
        ``--backend`` names another, or :func:`compiles_only_elsewhere` reads it in the script."""
        if self.backend is not None:
            return self.backend == "inductor"
        return not compiles_only_elsewhere(self.script)


def compiles_only_elsewhere(script: Path) -> bool:
    """Does every ``compile`` call in ``script`` name a backend that is not Inductor (``backend=``)?

    Read from the script's syntax, so only what it says plainly counts: a string other than ``"inductor"``, a
    function defined in the script, a lambda, or a call that makes a backend (a closure, ``functools.partial``).
    Anything else, a compile with no ``backend=``, a bare ``@torch.compile``, no compile in the script at all (its
    modules compile), or a script that does not parse, may be Inductor: False.
    """
    try:
        tree = ast.parse(script.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return False
    functions = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def is_compile(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "compile") or (
            isinstance(node, ast.Attribute) and node.attr == "compile"
        )

    def elsewhere(value: ast.expr) -> bool:
        if isinstance(value, ast.Constant):
            return isinstance(value.value, str) and value.value != "inductor"
        return isinstance(value, (ast.Lambda, ast.Call)) or (isinstance(value, ast.Name) and value.id in functions)

    compiles = 0
    for node in ast.walk(tree):
        decorators = getattr(node, "decorator_list", [])
        if any(is_compile(decorator) for decorator in decorators):
            return False  # a bare @torch.compile: the default backend
        if isinstance(node, ast.Call) and is_compile(node.func):
            compiles += 1
            backend = next((k.value for k in node.keywords if k.arg == "backend"), None)
            if backend is None or not elsewhere(backend):
                return False
    return compiles > 0


def start_capture(session: Session, program: ProgramRun) -> None:
    """Start the program under capture now, and the worker's warm-up; the bisection's capture adopts it.

    For the command line, before its own process imports torch (nothing here does):
    the program, the worker's warm-up and pt2kit's own imports then run at once.
    """
    command, _, log = program.plan(session.run_dir, session.timeout)
    session.warm_up(inductor=program.warms_inductor)
    session.start_program(command, log=log)


# Frames that are not the user's code: torch's, pt2kit's own, and the machinery that
# runs a script (runpy, frozen importlib). Reports point at the first frame outside.
_TORCH_DIR = os.path.dirname(importlib.util.find_spec("torch").origin or "") + os.sep  # type: ignore[union-attr]
_PT2KIT_DIRS = tuple(
    os.path.join(str(Path(__file__).resolve().parents[2]), package) + os.sep
    for package in ("minifier", "replay", "validation", "explain", "opcheck")
)


def is_launcher_file(filename: str) -> bool:
    """pt2kit's own files and runpy's: what runs the user's code, not the user's code."""
    return (
        filename.startswith(_PT2KIT_DIRS) or filename.endswith(os.sep + "runpy.py") or filename.startswith("<frozen ")
    )


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
