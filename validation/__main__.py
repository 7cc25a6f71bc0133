"""``python -m validation guards|sizes``: the command line of :mod:`validation`.

``guards [--json] [--confirm] [--timeout-ms N] SCRIPT [ARGS]...`` runs the script as
``python SCRIPT ARGS...`` would (``pt2kit.script.run_script``) under a
:class:`~validation.GuardValidator` and reports every compile. Exit codes (docs/validation.md): 0
sound, 1 unsound, 7 incomplete, 2 usage error, 3 the script raised before compiling. A
script that raises after compiling still gets its report (the exception is named in it)
and the exit code of the verdict.

``sizes --fn MODULE:FUNCTION --ranks R1,R2 --box LO:HI [...]`` enumerates the size classes
of one function (:func:`validation.sizes`). ``MODULE`` is an importable module or a ``.py``
file. Exit codes: 0 complete, 7 incomplete (``--max-classes`` reached), 1 when
``--check-brute-force`` found a point whose class predicted the wrong outcome (the report
is then ``incomplete`` too), 2 usage error (a box without an upper bound, an unknown
function...).

Every error is one line on stderr, ``validation: ...``, with its exit code: a usage error
(click's own included: a missing or bad option) 2, the script raising before compiling 3,
Ctrl-C 130, a bug of pt2kit's own 70 (its traceback saved to a file the line names).

With ``--json`` each prints exactly one JSON document on stdout -- the report, or for an
error ``{"status": "error", "message": ..., "exit_code": ...}`` -- and everything else the
program writes there goes to stderr for the run.

``--html FILE`` (both commands) also draws that JSON document as a self-contained page
(:mod:`validation.page`) and prints ``page: FILE`` on one line (on stderr with ``--json``,
so stdout stays one JSON document). FILE is checked before the script runs: a file that
is not a page pt2kit wrote is never replaced (exit 2, one line). A page that cannot be
written costs one line on stderr, never the verdict's exit code.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from pt2kit.errors import (
    InternalError,
    Interrupted,
    ScriptFailedBeforeCompile,
    UsageError,
    UserFacingError,
    exit_with,
)
from pt2kit.pages.document import ours, page_path, write_page
from pt2kit.script import resolve_script, run_script, stdout_to_stderr

_SETTINGS = {"help_option_names": ["-h", "--help"]}
_HTML_HELP = "Also write the report as a self-contained HTML page to FILE (never over a file pt2kit did not write)."


class _Commands(click.Group):
    """The command group, with click's own usage errors as pt2kit's: one line on stderr, exit 2, a JSON twin."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as error:
            error.show()
            sys.exit(error.exit_code)
        except click.exceptions.UsageError as error:
            where = f" (see {error.ctx.command_path} --help)" if error.ctx is not None else ""
            exit_with(UsageError(f"{error.format_message().rstrip('.')}{where}"), "validation", "--json" in argv)
        except click.exceptions.Abort:
            exit_with(Interrupted("interrupted"), "validation", "--json" in argv)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_Commands, context_settings=_SETTINGS)
def main() -> None:
    """Validate dynamo's shape guards with Z3, and enumerate the valid input sizes of a function."""


@main.command(
    context_settings={**_SETTINGS, "ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout, and nothing else there.")
@click.option("--confirm", is_flag=True, help="Run each counterexample: eager against the cached compiled entry.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=None, help="Z3 time per obligation (default 2000).")
@click.option("--html", "html_file", metavar="FILE", default=None, help=_HTML_HELP)
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def guards(
    as_json: bool, confirm: bool, timeout_ms: int | None, html_file: str | None, script: str, args: tuple[str, ...]
) -> None:
    """Run SCRIPT and check that the guards of every compile imply its shape assumptions.

    \b
    Exit codes: 0 sound; 1 unsound; 7 incomplete (something could not be translated to
    Z3 -- never reported as sound); 2 usage error; 3 the script raised before compiling;
    70 a bug of pt2kit's; 130 interrupted.
    """
    try:
        path = resolve_script(script)
        html_path = _page_path(html_file)
    except UserFacingError as error:
        exit_with(error, "validation", as_json)
    with _errors(as_json):
        _guards(path, args, as_json=as_json, confirm=confirm, timeout_ms=timeout_ms, html_path=html_path)


def _guards(
    path: Path, args: tuple[str, ...], *, as_json: bool, confirm: bool, timeout_ms: int | None, html_path: Path | None
) -> None:
    from .guards import DEFAULT_TIMEOUT_MS, GuardValidator
    from .page import render_guards_page

    title = f"pt2kit guards: {path.name}"

    validator = GuardValidator(confirm=confirm, timeout_ms=timeout_ms or DEFAULT_TIMEOUT_MS)
    failure: str | None = None
    with stdout_to_stderr(as_json):
        with validator:
            try:
                run_script(path, args)
            except SystemExit as exit_:
                if exit_.code not in (None, 0):
                    failure = f"SystemExit({exit_.code!r})"
            except Exception as exc:  # noqa: BLE001 - the script failed: report what compiled, then say so
                traceback.print_exc(file=sys.stderr)
                failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
    report = validator.report
    report.target, report.error = str(path), failure
    if failure is not None and not report.compiles:
        message = f"the script raised before compiling anything: {failure}"
        error = ScriptFailedBeforeCompile(message, error=message, compiles=[])
        # the document --json prints (exit_with's), and the page drawn from it
        document = json.dumps(
            {"status": error.status, "message": message, "exit_code": error.exit_code, **error.report}
        )
        _write_page(html_path, render_guards_page, document, title, as_json)
        exit_with(error, "validation", as_json)
    document = _print(report, as_json)
    _write_page(html_path, render_guards_page, document, title, as_json)
    sys.exit(report.exit_code)


@main.command(context_settings=_SETTINGS)
@click.option(
    "--fn",
    "target",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The function: an importable module or a .py file, and its name.",
)
@click.option(
    "--ranks", required=True, metavar="R1,R2,...", help="One tensor argument per rank, e.g. 2,2 for a matmul."
)
@click.option("--box", required=True, metavar="LO:HI", help="Every dimension ranges over LO..HI (inclusive).")
@click.option(
    "--no-specialize", is_flag=True, help="Trace without 0/1 specialization and duck sizing (fewest classes)."
)
@click.option("--merge", is_flag=True, help="Join classes with the same outcome.")
@click.option(
    "--check-brute-force", "brute_force", is_flag=True, help="Also run every point of the box for real and compare."
)
@click.option(
    "--max-classes", type=click.IntRange(min=1), default=None, help="Stop after this many classes (default 64)."
)
@click.option("--recompiles", is_flag=True, help="Count the cache entries the range needs against the recompile limit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout, and nothing else there.")
@click.option("--html", "html_file", metavar="FILE", default=None, help=_HTML_HELP)
def sizes(
    target: str,
    ranks: str,
    box: str,
    no_specialize: bool,
    merge: bool,
    brute_force: bool,
    max_classes: int | None,
    recompiles: bool,
    as_json: bool,
    html_file: str | None,
) -> None:
    """Enumerate the input sizes of FUNCTION inside the box as equivalence classes.

    \b
    Exit codes: 0 complete; 7 incomplete (--max-classes reached); 1 brute force found a
    disagreement (the report says incomplete); 2 usage error; 70 a bug of pt2kit's; 130
    interrupted.
    """
    try:
        rank_list = _ranks(ranks)
        from .enumeration import DEFAULT_MAX_CLASSES, parse_box

        bounds = parse_box(box)
        html_path = _page_path(html_file)
        with stdout_to_stderr(as_json):  # importing the user's module may print
            fn = _load_function(target)
    except UserFacingError as error:
        exit_with(error, "validation", as_json)
    from .enumeration import sizes as enumerate_sizes
    from .page import render_sizes_page

    with _errors(as_json), stdout_to_stderr(as_json), _progress(not as_json) as progress:
        report = enumerate_sizes(
            fn,
            rank_list,
            bounds,
            specialize=not no_specialize,
            merge=merge,
            brute_force=brute_force,
            max_classes=max_classes or DEFAULT_MAX_CLASSES,
            recompiles=recompiles,
            progress=progress,
        )
    document = _print(report, as_json)
    _write_page(html_path, render_sizes_page, document, f"pt2kit sizes: {report.target}", as_json)
    if report.brute_force and report.brute_force["disagreements"]:
        sys.exit(1)
    sys.exit(0 if report.status == "complete" else 7)


@contextlib.contextmanager
def _errors(as_json: bool) -> Iterator[None]:
    """pt2kit's ways out of a command: a user-facing error, Ctrl-C (130), or a bug of pt2kit's own (70), one line each."""
    try:
        yield
    except KeyboardInterrupt:
        exit_with(Interrupted("interrupted"), "validation", as_json)
    except UserFacingError as error:
        exit_with(error, "validation", as_json)
    except Exception as bug:  # noqa: BLE001 - validation's own failure: one line, its own exit code
        exit_with(InternalError.of(bug, tool="validation"), "validation", as_json)


def _ranks(text: str) -> list[int]:
    try:
        ranks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--ranks {text!r} is not a comma-separated list of integers") from None
    if not ranks or any(rank < 0 for rank in ranks):
        raise UsageError(f"--ranks {text!r}: give one non-negative rank per tensor argument")
    return ranks


def _load_function(target: str) -> Any:
    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"--fn {target!r} is not MODULE:FUNCTION")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = Path(module_name).expanduser()
            if not path.is_file():
                raise UsageError(f"--fn: no such file {module_name}")
            sys.path.insert(0, str(path.resolve().parent))
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise UsageError(f"--fn: cannot import {module_name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules.setdefault(path.stem, module)
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's module failed to import
        raise UsageError(
            f"--fn: importing {module_name} failed: {type(error).__name__}: {error}".splitlines()[0]
        ) from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(f"--fn: {module_name} has no {attribute}") from None
    if not callable(value):
        raise UsageError(f"--fn: {target} is not callable")
    return value


def _print(report: Any, as_json: bool) -> str:
    """Print ``report`` (its JSON document, or the rich table); the JSON document either way, for the page."""
    document = report.to_json()
    if as_json:
        sys.stdout.write(document + "\n")
    else:
        from rich.console import Console

        Console(soft_wrap=False).print(report)
    return document


def _page_path(html_file: str | None) -> Path | None:
    return None if html_file is None else page_path(html_file)


def _write_page(path: Path | None, render: Any, document: str, title: str, as_json: bool) -> None:
    """Draw the page from ``document`` -- the JSON text ``--json`` prints, parsed back: the same data, not a second report -- and say where it is.

    ``page: FILE`` goes where the report went (stderr with ``--json``). A file that became
    a user's while the script ran is still never replaced (exit 2); any other failure to
    draw or write the page is one line on stderr and leaves the exit code to the verdict.
    """
    if path is None:
        return
    if not ours(path):
        exit_with(UsageError(f"--html {path} exists and is not a page pt2kit wrote: not overwriting it"), "validation")
    try:
        write_page(path, render(json.loads(document), title))
    except Exception as error:  # noqa: BLE001 - the page is a view of the report; the verdict stands without it
        click.echo(
            f"validation: the page was not written to {path} ({type(error).__name__}: {error})".splitlines()[0],
            err=True,
        )
        return
    click.echo(f"page: {path}", err=as_json)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A transient spinner on stderr with classes and traces so far (enumerations can take a while)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), console=Console(stderr=True), transient=True
    ) as progress:
        task = progress.add_task("enumerating sizes", total=None)

        def update(classes: int, traces: int) -> None:
            progress.update(task, description=f"enumerating sizes: {classes} classes, {traces} traces")

        yield update


if __name__ == "__main__":
    main(prog_name="python -m validation")
