"""The rest of a run once its repro is written: below the stage, other torch releases, then done.

The repro is announced first (printed, ``report.json`` written); what follows only adds
to the report. Until :func:`finished` marks the checkpoint done, the same command run
again resumes the run: Ctrl-C here loses nothing of the reduction.

- the lower stages a higher one vouched for before the reduction (:func:`lower_stages`,
  :mod:`minifier.bisect.implied`): asked now, the stage table corrected where one fails;
- below the stage (:func:`below_the_stage`): the subsystem that breaks the minimized
  graph, confirmed on the original, and a workaround (:mod:`minifier.bisect.subsystem`);
- other torch releases (:func:`other_releases`, ``--torch-versions``): the repro under
  each, ``fixed_in`` / ``regressed_in``, and "upgrade torch" as a workaround where a
  newer release passes (:mod:`minifier.releases`);
- last, the program's run with the workaround, in a detached process unless ``--wait``
  (:func:`start_program_check`, then ``python -m minifier.afterwards RUN_DIR``:
  :func:`check_program`), which adds its answer to the report when it ends
  (:mod:`minifier.bisect.program_check`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from collections.abc import Sequence
from typing import cast

from .bisect import program_check
from .bisect.program_check import CHECK_FILE, PENDING, ProgramCheck
from .bisect.report import Row
from .bisect.implied import implied, take_answers
from .bisect.steps import run_each
from .bisect.subsystem import Below, Workaround, add_workaround_to_repro, go_below
from .isolation.session import Session
from .pages.minify_page import write_run_report
from .reduce.checkpoint import Status, mark_checkpoint
from .releases.checks import Preparing, ReleaseCheck, THIS_ENVIRONMENT
from .result import MinifyResult, save_bisected


#: What ``report.json``'s ``pending`` names while it is looked at.
STAGES, BELOW, RELEASES = "lower stages", "below the stage", "torch releases"


def finished(
    session: Session,
    result: MinifyResult,
    subsystem: bool,
    script: Path | None,
    args: list[str],
    releases: Preparing | None = None,
) -> MinifyResult:
    """The stages implied so far (:mod:`minifier.bisect.implied`), below the stage (``subsystem``), the other releases
    (``releases``, begun at the run's start), then done."""
    cells = implied(result.bisect)
    stages = bool(cells)
    if (stages or subsystem or releases is not None) and result.failure.failure is not None:
        then = " and ".join(
            [*(["at the graphs' lower stages"] if stages else []),
             *(["below the stage for the subsystem and a workaround"] if subsystem else []),
             *(["at other torch releases"] if releases is not None else [])]
        )  # fmt: skip
        session.log(f"[bold]repro ready[/]: {result.repro} ({_verified_where(result.verified)}); now looking {then}")
        result.pending = [
            *([STAGES] if stages else []),
            *([BELOW] if subsystem else []),
            *([RELEASES] if releases is not None else []),
        ]
        _rewrite_report(session, result)  # (the repro's report, saying what is still to come)
        if stages:
            lower_stages(session, result, cells)
        later = below_the_stage(session, result, script, args) if subsystem else None
        if releases is not None:
            other_releases(session, result, releases)
        if later is not None:  # (the last: from now on the detached process alone writes the report)
            start_program_check(session.run_dir, later)
            session.log(
                f"{Path(later.script).name} now runs with the workaround in the background; "
                f"{session.run_dir / 'report.json'} says how it ran when it ends (a copy printed now, --json's, does not; "
                "--wait waits for it)"
            )
    elif releases is not None:
        releases.close()
    mark_checkpoint(session.run_dir, Status.DONE)
    if result.resumed_from is not None:  # (else the next run of the command would resume the same one again)
        mark_checkpoint(Path(result.resumed_from), Status.DONE)
    return result


def lower_stages(session: Session, result: MinifyResult, cells: list[tuple[Row, str]]) -> None:
    """The stages a higher one vouched for before the reduction (``cells``: :func:`~minifier.bisect.implied.implied`),
    asked now in one batch over the cores."""
    assert result.bisect is not None
    try:
        answers = run_each(
            session,
            [(row.case, stage) for row, stage in cells if row.case is not None],
            accuracy=result.bisect.accuracy,
        )
        result.notes.extend(take_answers(cells, answers))
        signature = result.failure.failure.signature if result.failure.failure else None
        save_bisected(session.run_dir, result.bisect, result.before, signature)  # (a resumed run reports them asked)
    except Exception as e:  # noqa: BLE001 - the repro is written: a failure here costs a note, never the run
        result.notes.append(
            f"the lower stages were not asked ({type(e).__name__}: {str(e)[:200]}); the repro is unaffected"
        )
    _rewrite_report(session, result, done=STAGES)


def below_the_stage(
    session: Session, result: MinifyResult, script: Path | None, args: list[str]
) -> ProgramCheck | None:
    """The subsystem that breaks the minimized graph, confirmed on the original, and a workaround (:mod:`minifier.bisect.subsystem`).

    With ``session.program_later``, the program's run with the workaround is left to the
    background: returned, and named in ``pending`` (:mod:`minifier.bisect.program_check`).
    """
    if result.failure.failure is None:
        return None
    later: list[ProgramCheck] = []

    def interim(found: Below) -> None:  # (a workaround fixes the repro: said now, the program's run with it to come)
        assert found.workaround is not None
        session.log(f"workaround: {found.workaround.what} (repro.py runs right with it); now the program runs with it")
        result.below = found
        _rewrite_report(session, result)

    try:
        below = go_below(
            session, result.failure.stage, result.failure.failure.signature, result.accuracy,
            original=result.before, minimized=result.after, report=result.bisect, script=script, args=args,
            interim=interim, later=later.append if session.program_later else None,
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - the repro is written: a failure below the stage costs a note, never the run
        result.notes.append(
            f"the subsystem search failed ({type(e).__name__}: {str(e)[:200]}); the repro is unaffected"
        )
        below = Below()
    result.below, result.notes = below, result.notes + below.notes
    if below.workaround is not None:
        add_workaround_to_repro(result.repro, below.workaround)
    if later and below.workaround is not None:
        result.pending.append(PENDING)
    _rewrite_report(session, result, done=BELOW)
    return later[0] if later and below.workaround is not None else None


def other_releases(session: Session, result: MinifyResult, releases: Preparing) -> None:
    """The repro under each release of ``--torch-versions``; a newer release that passes is a workaround.

    This environment's row is the verification's answer when the repro was verified
    elsewhere (it failed the same way with torch alone); else the repro runs here once
    more. An upgrade is offered only where below the stage found no workaround of its
    own: a config switch is the smaller change.
    """
    import torch

    assert result.failure.failure is not None
    target = result.failure.failure.signature
    ours = ReleaseCheck(torch.__version__, THIS_ENVIRONMENT, True, True) if result.verified else None
    try:
        checked = session.timed(
            f"repro.py under {len(releases.specs)} other torch release(s)",
            lambda: releases.check(result.repro, target, session.timeout, ours=ours, jobs=session.jobs),
        )
    except Exception as e:  # noqa: BLE001 - the repro is written: a failed release check costs a note, never the run
        result.notes.append(f"the release check failed ({type(e).__name__}: {str(e)[:200]}); the repro is unaffected")
        _rewrite_report(session, result, done=RELEASES)
        return
    finally:
        releases.close()
    result.releases = checked
    result.notes.extend(
        f"torch {c.torch} ({c.where}) was not checked: {c.note}" for c in checked.checks if c.fails is None
    )
    below = result.below or Below()
    if checked.fixed_in and below.workaround is None:
        upgrade = Workaround(code="", what=f"upgrade torch to {checked.fixed_in}", verified_on="repro")
        result.below = replace(below, workaround=upgrade)
    _rewrite_report(session, result, done=RELEASES)


def _rewrite_report(session: Session, result: MinifyResult, done: str | None = None) -> None:
    result.pending = [p for p in result.pending if p != done]
    result.queries, result.seconds, result.timeline = session.queries, session.seconds, session.full_timeline()
    write_run_report(cast(Path, result.run_dir), result.to_json())  # (a minification's result: the session's run_dir)


def start_program_check(run_dir: Path, check: ProgramCheck) -> None:
    """Start the detached process that runs ``check``, its output in ``logs/program-check.log``."""
    from pt2kit.processes import pt2kit_env, python_command

    (run_dir / CHECK_FILE).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / CHECK_FILE).write_text(json.dumps(asdict(check)))
    (run_dir / "logs").mkdir(exist_ok=True)
    with open(run_dir / "logs" / "program-check.log", "ab") as log:
        subprocess.Popen(
            python_command("minifier.afterwards", str(run_dir)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=pt2kit_env(),  # (the user's own: the program runs in it)
            cwd=run_dir,
            start_new_session=True,  # (a Ctrl-C at the user's terminal is the command's, not this run's)
            close_fds=True,
        )


def add_program_check(
    run_dir: Path, ran: ProgramCheck | None, seconds: float, timed_out: bool = False, failed: Sequence[tuple[str, str]] = ()
) -> None:
    """Add the program's answer to ``report.json`` (and the page, and the repro's header): the workaround it ran to
    the end with (``ran``), verified on the program, or a note why none. ``failed``: each workaround tried before
    it, and how the program still failed with it (what, last error line): said, since the workaround changes."""
    data = json.loads((run_dir / "report.json").read_text())
    workaround = data.get("workaround") or {}
    script = Path(json.loads((run_dir / CHECK_FILE).read_text())["script"]).name
    data["notes"] = [
        *data.get("notes", []),
        *(f"{script} still fails with the workaround '{what}'" + (f" ({error})" if error else "") + ", though the repro runs right with it: "
          "another failure behind this one, or the same one elsewhere" for what, error in failed),
    ]  # fmt: skip
    if ran is not None:
        workaround.update(code=ran.code, what=ran.what, verified_on="program", verified=True)
        program_check.say_in_header(run_dir / "repro.py", ran.code, ran.what, "program")
    else:  # (the repro's header and issue.md say it too: "in the background" is over)
        workaround["program"] = outcome = "did not end in time" if timed_out else "still fails"
        if workaround.get("code"):
            program_check.say_in_header(run_dir / "repro.py", workaround["code"], workaround.get("what", ""), outcome)
        data["notes"] = [
            *data.get("notes", []),
            f"{script} {outcome} with the workaround (logs/program-check.log): only the repro was seen to run right with it",
        ]
    data["pending"] = [p for p in data.get("pending", []) if p != PENDING]
    if not data["pending"]:  # (as report.json has it when nothing is pending)
        del data["pending"]
    data["timeline"] = [
        *data.get("timeline", []),
        {"step": f"running {script} with the workaround, in the background", "seconds": round(seconds, 2)},
    ]
    write_run_report(run_dir, data)


def check_program(run_dir: Path) -> int:
    """(The detached process) run the check written in ``run_dir`` and add its answer to the report."""
    import time

    try:
        check = ProgramCheck(**json.loads((run_dir / CHECK_FILE).read_text()))
        began = time.perf_counter()
        tried = [check, *(replace(check, code=code, what=what, others=[]) for code, what in check.others)]
        answers: list[program_check.Ran] = []
        for option in tried:  # (in order, until the program runs to the end with one, or runs out of time)
            answers.append(program_check.run(option))
            if answers[-1].ok is not False:
                break
        ran = tried[len(answers) - 1] if answers[-1].ok else None
        failed = [(option.what, answer.error) for option, answer in zip(tried, answers) if answer.ok is False]
        add_program_check(
            run_dir, ran, time.perf_counter() - began, timed_out=answers[-1].ok is None, failed=failed if ran is not None else []
        )
    except Exception as e:  # noqa: BLE001 - one line in the log: the run directory may be gone, or its report changed
        print(f"pt2kit: the workaround's run of the program was not added to the report: {type(e).__name__}: {e}")
        return 1
    for option, answer in zip(tried, answers):
        print(f"pt2kit: {Path(check.script).name} with {option.what}: " + (
            "ran to the end" if answer.ok else "did not end in time" if answer.ok is None else f"failed: {answer.error or 'no error line'}"
        ))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(check_program(Path(sys.argv[1])))


def _verified_where(verified: bool) -> str:
    if not verified:
        return "not verified elsewhere"
    # (pt2kit's own tests switch the run elsewhere off: minifier.stages.elsewhere.verify)
    return "verified here only" if os.environ.get("PT2KIT_VERIFY_ELSEWHERE") == "0" else "verified elsewhere"
