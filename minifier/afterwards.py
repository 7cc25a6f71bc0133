"""The rest of a run once its repro is written: below the stage, other torch releases, then done.

The repro is announced first (printed, ``report.json`` written); what follows only adds
to the report. Until :func:`finished` marks the checkpoint done, the same command run
again resumes the run: Ctrl-C here loses nothing of the reduction.

- below the stage (:func:`below_the_stage`): the subsystem that breaks the minimized
  graph, confirmed on the original, and a workaround (:mod:`minifier.bisect.subsystem`);
- other torch releases (:func:`other_releases`, ``--torch-versions``): the repro under
  each, ``fixed_in`` / ``regressed_in``, and "upgrade torch" as a workaround where a
  newer release passes (:mod:`minifier.releases`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import cast

from .bisect.subsystem import Below, Workaround, add_workaround_to_repro, go_below
from .isolation.session import Session
from .pages.minify_page import write_run_report
from .reduce.checkpoint import Status, mark_checkpoint
from .releases.checks import Preparing, ReleaseCheck, THIS_ENVIRONMENT
from .result import MinifyResult


#: What ``report.json``'s ``pending`` names while it is looked at.
BELOW, RELEASES = "below the stage", "torch releases"


def finished(
    session: Session,
    result: MinifyResult,
    subsystem: bool,
    script: Path | None,
    args: list[str],
    releases: Preparing | None = None,
) -> MinifyResult:
    """Below the stage (``subsystem``), the other releases (``releases``, begun at the run's start), then done."""
    if (subsystem or releases is not None) and result.failure.failure is not None:
        then = " and ".join(
            [*(["below the stage for the subsystem and a workaround"] if subsystem else []),
             *(["at other torch releases"] if releases is not None else [])]
        )  # fmt: skip
        session.log(
            f"[bold]repro ready[/]: {result.repro} ({'verified elsewhere' if result.verified else 'not verified elsewhere'}); "
            f"now looking {then}"
        )
        result.pending = [*([BELOW] if subsystem else []), *([RELEASES] if releases is not None else [])]
        _rewrite_report(session, result)  # (the repro's report, saying what is still to come)
        if subsystem:
            below_the_stage(session, result, script, args)
        if releases is not None:
            other_releases(session, result, releases)
    elif releases is not None:
        releases.close()
    mark_checkpoint(session.run_dir, Status.DONE)
    if result.resumed_from is not None:  # (else the next run of the command would resume the same one again)
        mark_checkpoint(Path(result.resumed_from), Status.DONE)
    return result


def below_the_stage(session: Session, result: MinifyResult, script: Path | None, args: list[str]) -> None:
    """The subsystem that breaks the minimized graph, confirmed on the original, and a workaround (:mod:`minifier.bisect.subsystem`)."""
    if result.failure.failure is None:
        return

    def interim(found: Below) -> None:  # (a workaround fixes the repro: said now, the program's run with it to come)
        assert found.workaround is not None
        session.log(f"workaround: {found.workaround.what} (repro.py runs right with it); now the program runs with it")
        result.below = found
        _rewrite_report(session, result)

    try:
        below = go_below(
            session, result.failure.stage, result.failure.failure.signature, result.accuracy,
            original=result.before, minimized=result.after, report=result.bisect, script=script, args=args,
            interim=interim,
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - the repro is written: a failure below the stage costs a note, never the run
        result.notes.append(
            f"the subsystem search failed ({type(e).__name__}: {str(e)[:200]}); the repro is unaffected"
        )
        below = Below()
    result.below, result.notes = below, result.notes + below.notes
    if below.workaround is not None:
        add_workaround_to_repro(result.repro, below.workaround)
    _rewrite_report(session, result, done=BELOW)


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
