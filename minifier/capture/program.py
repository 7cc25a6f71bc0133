"""The user's program as ``minify`` runs it under capture: a fresh process, ``minify _capture``.

:class:`ProgramRun` says how (the script, its arguments, the backend and accuracy
check it runs under); :func:`start_capture` starts it together with the worker's
warm-up. Like :mod:`pt2kit.script`, which runs a script in the current process,
nothing here imports torch, so the program starts before ``minify`` has loaded it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pt2kit.processes import python_command
from ..unit.check import Stage

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy
    from ..isolation.session import Session


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
        options = ["--out", str(out_dir)] + (["--backend", self.backend] if self.backend else [])
        options += ["--timeout", str(timeout)] if timeout else []
        options += ["--accuracy", self.accuracy if isinstance(self.accuracy, str) else "on"] if self.accuracy else []
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
            return self.backend == Stage.INDUCTOR
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
