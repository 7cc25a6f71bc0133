"""The workaround's run of the whole program, in the background: ``minify run`` does not wait for it.

Below the stage verifies workarounds on the repro, each a query of seconds. Then the
unchanged program runs with one, torch alone, to the end (:func:`runs_to_the_end`): a run
as long as the program's own, and longer than the failing one, since with the workaround
the program goes on past its failure. That run is the one part of ``minify run`` whose
answer the user can read later, so by default it runs in a detached process once the
command's last report is written (:func:`minifier.afterwards.start_program_check`:
``python -m minifier.afterwards RUN_DIR``), with the first workaround that fixes the
repro, then the next should the program still fail. When it ends, it adds its answer to
``report.json``, the page and the repro's header: ``workaround.verified_on`` becomes
``program`` and ``verified`` true for the one the program ran to the end with, or a note
says none did. Meanwhile ``pending`` names it (:data:`PENDING`). ``--wait``
(``PT2KIT_WAIT=1``) runs it in the foreground instead, beside a query of the failing graph.

The detached process owns the run directory by then: ``minify run`` has written its
last report and exited. Its output goes to ``logs/program-check.log``; it holds none of
the command's pipes, so a caller reading ``minify run``'s output is not kept waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import click

#: ``report.json``'s ``pending`` while the program runs with the workaround.
PENDING = "the workaround on the program"
#: The check's arguments, in the run directory, for the detached process.
CHECK_FILE = Path("work") / "program-check.json"

wait_option = click.option(
    "--wait/--no-wait",
    default=False,
    envvar="PT2KIT_WAIT",
    show_default=True,
    help="Run the program with the workaround before exiting; by default it runs in the background and adds its "
    "answer to report.json when it ends.",
)


@dataclass(frozen=True)
class ProgramCheck:
    """The program's run with a workaround: the script, its arguments, the workaround, and the program's own seconds."""

    script: str
    args: list[str]
    code: str
    what: str
    program_seconds: float
    #: the other workarounds that fix the repro, ``[code, what]``, each tried in turn should the program still fail
    others: list[list[str]] = field(default_factory=list)


#: What ``repro.py``'s header says was seen to run right with the workaround, by ``verified_on``.
SEEN = {
    "program": "the program runs to the end with it",
    "graph": "the graph it failed in runs right with it",
    "repro": "repro.py runs right with it; the program runs with it in the background",
    "still fails": "repro.py runs right with it; the program still fails with it",
    "did not end in time": "repro.py runs right with it; the program did not end in time with it",
}


def say_in_header(path: Path, code: str, what: str, verified_on: str) -> None:
    """Say the workaround in the repro's header comment, in place of one said before (the code it runs is unchanged)."""
    lines = path.read_text().splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("# Workaround (")), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and lines[end].startswith("#     "):
            end += 1
        del lines[start:end]
    header = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    said = [f"# Workaround ({SEEN.get(verified_on, SEEN['graph'])}): {what}. Run before the program:\n"]
    said += [f"#     {line}\n" for line in code.splitlines()]
    path.write_text("".join(lines[:header] + said + lines[header:]))


@dataclass(frozen=True)
class Ran:
    """How the program ran with a workaround: to the end (``ok``), failing (``ok`` False, its last error line), or
    not within its time (``ok`` None)."""

    ok: bool | None
    error: str = ""


def runs_to_the_end(script: Path, args: list[str], code: str, timeout: float | None) -> Ran:
    """Does the user's program run to the end with ``code`` run first: torch alone, its own directory, the
    user's Inductor cache (:func:`~minifier.stages.elsewhere.plain_run`)?"""
    from ..stages.elsewhere import last_words, plain_run

    done = plain_run(script, args, timeout, first=code, users_cache=True)
    if done.returncode is None:
        return Ran(None)
    return Ran(True) if done.returncode == 0 else Ran(False, last_words(done.stderr))


def run(check: ProgramCheck) -> Ran:
    """Does the program run to the end with the workaround?

    A run that runs out of time is asked once more with twice the limit (an empty
    Inductor cache on a loaded machine).
    """
    ran = Ran(None)
    for timeout in (max(60.0, 4 * check.program_seconds), max(120.0, 8 * check.program_seconds)):
        ran = runs_to_the_end(Path(check.script), check.args, check.code, timeout)
        if ran.ok is not None:
            return ran
    return ran
