"""The errors pt2kit reports to a user, each with one clear line and its own exit code.

Every command-line entry point (``minify``, ``python -m minifier``, ``python -m explain``)
catches :class:`UserFacingError`, prints its message on one line and exits with its
``exit_code``. Anything else that escapes is a pt2kit bug: it becomes an
:class:`InternalError` (exit 70), one line too, with the traceback kept in the run
directory.

Exit codes are documented in docs/minify.md (0 written, 1 nothing to minify or flaky,
2 usage); the other bad inputs get codes of their own so scripts can tell them apart.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NoReturn


#: Every exit code of pt2kit's commands, one meaning each, shared by the tools (a code one tool
#: does not use is never another meaning there). ``1`` is each command's negative answer.
EXIT_CODES = {
    0: "done: a repro written, the call passed, sound, complete, every seam works",
    1: "the negative answer: nothing failed or it was flaky (minify), the failure reproduced (replay run), unsound (validation)",
    2: "usage error: bad options, a missing script or file, an output that already exists",
    3: "the script raised before torch.compile compiled anything",
    4: "a backend that is not registered, or cannot be imported here",
    5: "it fails, but not the same way: no captured graph fails alone (minify), the call failed differently (replay run)",
    6: "a record, repro or checkpoint cannot be read: truncated, corrupt, or unsafe to load",
    7: "incomplete (validation): something could not be translated or enumerated, so never called sound or complete",
    8: "a partial record without --allow-partial (replay)",
    9: "the installed torch breaks (or predates) an internal the feature needs (minify doctor)",
    10: "the recorded frame cannot be rebuilt here: a module, class or source it needs is missing or changed (replay)",
    70: "a bug of pt2kit's: its traceback is saved and the line names the file",
    130: "interrupted (Ctrl-C): work so far is kept and a rerun resumes it",
}


class UserFacingError(Exception):
    """A problem with the user's input, reported as one line and an exit code.

    ``report``: fields ``report.json`` and ``--json`` carry beside the message (what
    pt2kit could not carry, by name: ``inputs_unsupported``, ``state_missing``).
    """

    exit_code: int = 2
    status: str = "error"

    def __init__(self, *args: object, **report: object) -> None:
        super().__init__(*args)
        self.report = report


class UsageError(UserFacingError):
    """Bad options or arguments (exit 2)."""

    exit_code = 2


class ScriptNotFound(UsageError):
    """The script to run (or the repro to read: ``what``) does not exist (exit 2, a usage error)."""

    def __init__(self, path: str, what: str = "script") -> None:
        super().__init__(f"{what} not found: {path}")


class OutputNotWritable(UsageError):
    """The directory run directories go to cannot be created or written (exit 2, a usage error)."""

    def __init__(self, out: object, reason: str) -> None:
        super().__init__(
            f"cannot write run directories to {out}: {reason}; choose another --out or TORCHDYNAMO_REPRO_DIR"
        )


class NoFailure(UserFacingError):
    """The program ran to the end and nothing failed: there is nothing to minify (exit 1)."""

    exit_code = 1
    status = "no-failure"


class FlakyFailure(UserFacingError):
    """The failure does not reproduce consistently, so bisecting it would chase noise (exit 1)."""

    exit_code = 1
    status = "flaky"


class ScriptFailedBeforeCompile(UserFacingError):
    """The script raised before torch.compile compiled anything: its own bug, not a compiler's (exit 3)."""

    exit_code = 3


class UnknownBackend(UserFacingError):
    """The backend named on the command line is not registered and cannot be imported (exit 4)."""

    exit_code = 4


class NotReproducible(UserFacingError):
    """The program fails, but no captured graph fails the same way in isolation (exit 5)."""

    exit_code = 5


class WithinTolerance(NotReproducible):
    """Exit 5 under ``--accuracy``: the program's own check fails, but every graph is within the fp64
    rule's tolerance (``minify run`` then judges each graph bit for bit against eager)."""


class ComparesEagersDraws(NotReproducible):
    """Exit 5 under ``--accuracy``: the program runs right only where its compiled graphs draw eager's very random
    numbers (it compares them with eager's own), which every graph did, judged with ``fallback_random``
    (``minify run`` then judges each graph's draws as they come)."""


class CorruptRecord(UserFacingError):
    """A saved repro, record or checkpoint cannot be read (exit 6)."""

    exit_code = 6


class InternalError(UserFacingError):
    """pt2kit's own machinery failed (exit 70, EX_SOFTWARE); the traceback is in the run directory."""

    exit_code = 70

    @classmethod
    def of(cls, bug: BaseException, run_dir: Path | None = None, tool: str = "minify") -> InternalError:
        """pt2kit's own failure as one line; its traceback goes to ``run_dir/logs`` (else a file of its own), named in it."""
        import tempfile
        import traceback

        text = "".join(traceback.format_exception(bug))
        try:
            if run_dir is not None:
                log = run_dir / "logs" / "internal-error.txt"
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(text)
            else:
                fd, name = tempfile.mkstemp(prefix=f"pt2kit-{tool}-internal-error-", suffix=".txt")
                with os.fdopen(fd, "w") as file:
                    file.write(text)
                log = Path(name)
            where = f"details in {log}"
        except OSError:
            where = "its traceback could not be saved"
        first = (str(bug).strip().splitlines() or [""])[0][:200]
        return cls(f"internal error ({type(bug).__name__}: {first}); this is a pt2kit bug, {where}")


class Interrupted(UserFacingError):
    """Ctrl-C: work so far is saved and a rerun resumes it (exit 130, the shell's convention)."""

    exit_code = 130
    status = "interrupted"


def exit_with(error: UserFacingError, program: str, as_json: bool = False) -> NoReturn:
    """Every command's way out on a :class:`UserFacingError`: ``program: message`` on one
    line of stderr and the error's exit code; with ``--json``, its JSON on stdout first
    (``status``, ``message``, ``exit_code`` and the error's ``report`` fields)."""
    if as_json:
        data = {"status": error.status, "message": str(error), "exit_code": error.exit_code, **error.report}
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"{program}: {error}\n")
    sys.stderr.flush()
    sys.exit(error.exit_code)


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 node``, ``2 nodes``: a count and its noun, as a message says it."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


#: ``minify run``/``bisect``/``repro --help``'s last lines: :data:`EXIT_CODES` as ``minify`` reads them (docs/minify.md
#: has the long form).
MINIFY_EXIT_HELP = """\b
Exit codes: 0 a repro was written (bisect: the table); 1 no failure, or a flaky one;
2 usage error or no such script; 3 the script raised before torch.compile compiled
anything; 4 no such backend; 5 the program fails but no graph fails alone (the
message says why, and the run directory's issue.md holds the program as its
repro); 6 a record that cannot be read; 9 this torch breaks a pt2kit seam;
70 pt2kit's own bug; 130 interrupted (a rerun resumes)."""
