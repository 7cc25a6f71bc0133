"""``python -m explain [--json] [--html FILE] SCRIPT [ARGS]...``: graph breaks and recompiles of a whole script.

The script runs as ``python SCRIPT ARGS...`` would (``pt2kit.script.run_script``: as
``__main__``, with its ``sys.argv``), unchanged: explain/ observes the script's own
``torch.compile`` calls at the seats of :mod:`explain.hooks`, with a
:class:`~explain.RecompileProfiler` armed for the whole run. Nothing is compiled for the
analysis and nothing is reset; the report says so (``isolation.strategy == "observed"``).

Output: a rich report on stdout, or with ``--json`` the same report as JSON and nothing
else on stdout -- the script's own prints are sent to stderr for the run. ``--html FILE``
also draws that JSON as one self-contained page (:mod:`explain.page`) and names the file
on one line (on stderr with ``--json``). FILE is checked before the script runs: a file
there that is not a page pt2kit wrote is a user's, never overwritten (exit 2).

Exit codes: 0 when the report was printed; 1 when the script raised (the report of what
ran before is still printed, and the exception named in it); 2 for usage errors and a
missing script (one line on stderr). Like ``minify``, explain never ends in a traceback of
its own: a torch outside the tested range that breaks a seam explain needs is one line and
exit 9 (:func:`pt2kit.seams.require`), a bug of explain's one line and exit 70 (the
traceback is saved to a file the line names), Ctrl-C one line and exit 130; with ``--json``
each of these is also ``{"status": ..., "message": ..., "exit_code": ...}`` on stdout.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import click

from pt2kit.errors import InternalError, Interrupted, UsageError, UserFacingError, exit_with
from pt2kit.pages.document import page_path
from pt2kit.script import resolve_script, run_script, stdout_to_stderr


@click.command(
    context_settings={
        "ignore_unknown_options": True,  # the script's own options pass through to it
        "allow_interspersed_args": False,
        "help_option_names": ["-h", "--help"],
    }
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout, and nothing else there.")
@click.option(
    "--html",
    "html",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write the report as a self-contained HTML page to FILE (never over a file pt2kit did not write).",
)
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def main(as_json: bool, html: Path | None, script: str, args: tuple[str, ...]) -> None:
    """Run SCRIPT with ARGS and explain its graph breaks and recompiles.

    \b
    Exit codes: 0 the report was printed; 1 the script raised (the report of what ran
    is still printed); 2 a usage error or a missing script; 9 this torch breaks a torch
    internal explain needs (see `minify doctor`); 70 a bug of explain's; 130 interrupted.
    """
    try:
        path = resolve_script(script)
        if html is not None:
            html = page_path(html)  # before the script runs: a refusal costs nothing
    except UserFacingError as error:
        click.echo(f"explain: {error}", err=True)
        sys.exit(error.exit_code)
    try:
        failed = _explain_script(path, args, as_json, html)
    except KeyboardInterrupt:
        exit_with(Interrupted("interrupted"), "explain", as_json)
    except UserFacingError as error:  # a torch pt2kit does not support (seams.SeamBroken)
        exit_with(error, "explain", as_json)
    except Exception as bug:  # noqa: BLE001 - explain's own failure: one line, its own exit code
        exit_with(InternalError.of(bug, tool="explain"), "explain", as_json)
    sys.exit(1 if failed else 0)


def _explain_script(path: Path, args: tuple[str, ...], as_json: bool, html: Path | None = None) -> bool:
    """Run the script with explain listening, print the report (and write its page); True when the script raised."""
    # torch is imported only now, so that a usage error is reported at once
    from rich.console import Console

    from pt2kit import seams

    from . import hooks
    from .isolation import OBSERVED
    from .recompiles import RecompileProfiler
    from .session import Collector, ExplainReport

    seams.require("explain", *hooks.SEAMS)  # outside the tested torch range: one line, not a traceback
    collector, profiler = Collector(), RecompileProfiler()
    failure: str | None = None
    with stdout_to_stderr(as_json), hooks.listening(collector), profiler:
        try:
            run_script(path, args)
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                failure = f"SystemExit({exit_.code!r})"
        except Exception as exc:  # noqa: BLE001 - the user's script failed: report what ran, then say so
            traceback.print_exc(file=sys.stderr)
            failure = f"{type(exc).__name__}: {exc}".splitlines()[0]

    report = ExplainReport.from_frames(str(path), collector.frames, OBSERVED)
    report.recompiles, report.error = profiler, failure
    text = report.to_json()
    # The page first: a refusal (exit 2) then comes before any report is printed.
    page = _write_page(html, json.loads(text), path) if html is not None else None
    if as_json:
        sys.stdout.write(text + "\n")
    else:
        Console(soft_wrap=False).print(report)
    if page is not None:
        click.echo(f"page: {page}", err=as_json)
    return failure is not None


def _write_page(html: Path, data: dict[str, object], script: Path) -> Path | None:
    """The page of ``--json``'s very data at ``html``.

    A file that became a user's while the script ran is still never replaced (exit 2);
    any other failure to draw or write the page is one line on stderr, and the exit code
    stays the report's, as for ``python -m validation`` and minify's ``report.html``.
    """
    from .page import write_explain_page

    try:
        return write_explain_page(html, data, f"explain: {script.name}")
    except FileExistsError:  # write_explain_page's own check: a user's file is never replaced
        raise UsageError(f"--html {html} exists and is not a page pt2kit wrote: not overwriting it") from None
    except Exception as error:  # noqa: BLE001 - the page is a view of the report; the report stands without it
        click.echo(
            f"explain: the page was not written to {html} ({type(error).__name__}: {error})".splitlines()[0], err=True
        )
        return None


if __name__ == "__main__":
    main(prog_name="python -m explain")
