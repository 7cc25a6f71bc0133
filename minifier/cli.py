"""The ``minify`` command line: ``minify run``, ``minify bisect``, ``minify repro``.

Output contract (docs/minify.md): progress on stderr, a rich summary for people, and with
``--json`` exactly one JSON document on stdout and nothing else. Bad input ends
with one clear line and the exit code of its :class:`~pt2kit.errors.UserFacingError`.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

# Before torch is imported anywhere: the worker forks, and a compile thread pool
# in the parent would deadlock its children. torch's own minifier must stay out of
# pt2kit's processes (it reads these at import and would dump repros of every
# failing query). (torch without numpy warns on import.)
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
for _variable in ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL"):
    os.environ.pop(_variable, None)
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

from pt2kit.errors import MINIFY_EXIT_HELP, InternalError, Interrupted, UserFacingError, exit_with  # noqa: E402
from pt2kit.script import check_syntax, resolve_script  # noqa: E402
from pt2kit.processes import nproc_option  # noqa: E402
from .hunt.command import hunt_command  # noqa: E402
from .releases.command import specs_or_exit, torch_versions_option, versions_command  # noqa: E402
from .show import show_command  # noqa: E402
from .isolation.jobs import jobs_option  # noqa: E402
from .bisect.program_check import wait_option  # noqa: E402

if TYPE_CHECKING:
    from .unit.accuracy import Accuracy
    from .unit.case import GraphCase

CONTEXT = {"help_option_names": ["-h", "--help"]}
#: A query's time limit: a positive number of seconds (0 or less would call every query a hang).
TIMEOUT = click.FloatRange(min=0, min_open=True)
_Flag = TypeVar("_Flag", bound="bool | None")  # --accuracy: a flag, or an --accuracy/--no-accuracy that may be unset


def _script_arguments(func: Any) -> Any:
    func = click.argument("args", nargs=-1, type=click.UNPROCESSED)(func)
    return click.argument("script", type=click.Path(dir_okay=False, path_type=Path))(func)


def _common_options(func: Any) -> Any:
    func = jobs_option(func)
    func = nproc_option(func)
    func = click.option("--json", "as_json", is_flag=True, help="Print the JSON report on stdout, nothing else.")(func)
    func = click.option(
        "--timeout",
        type=TIMEOUT,
        default=300.0,
        show_default=True,
        help="Seconds per isolated query before it counts as a hang.",
    )(func)
    func = click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Where run directories go [default: $TORCHDYNAMO_REPRO_DIR or ./torch_compile_debug].",
    )(func)
    func = click.option(
        "--backend",
        default=None,
        help="Final stage: a registered backend name or module:function [default: what the script asks for].",
    )(func)
    func = click.option(
        "--strict-accuracy", is_flag=True, help="Like --accuracy, but compiled outputs must equal eager's bit for bit."
    )(func)
    func = click.option(
        "--accuracy", is_flag=True, help="Also treat wrong answers (against an fp64 reference) as failures."
    )(func)
    return func


def _accuracy(accuracy: _Flag, strict: bool) -> _Flag | Literal["strict"]:
    """``--accuracy`` / ``--strict-accuracy`` as one value: False, True or "strict"."""
    return "strict" if strict else accuracy


@click.group(context_settings=CONTEXT)
def main() -> None:
    """Find which torch.compile stage breaks, and shrink the failing graph to a plain-torch repro.py."""


def _finish(render: Any, data: dict[str, Any], as_json: bool, console: Any) -> None:
    from .isolation.session import print_json

    if as_json:
        print_json(data)
    else:
        render(console)


_subsystem_option = click.option(
    "--subsystem/--no-subsystem",
    default=True,
    envvar="PT2KIT_SUBSYSTEM",
    show_default=True,
    help="Go below the failing stage: the subsystem that breaks (torch's CompilerBisector) and a workaround.",
)


def _saved_option(func: Any) -> Any:
    """``--saved``, and the hidden ``--run-dir`` the API names: its own directory, where the graphs were saved."""
    func = click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None, hidden=True)(func)
    return click.option(
        "--saved",
        is_flag=True,
        help="SCRIPT and ARGS are repro.py files of one program's graphs, in order (minifier.save_repro's): "
        "bisect those instead of running a program.",
    )(func)


def _saved_paths(script: Path, args: tuple[str, ...]) -> list[Path]:
    """``--saved``: every path on the command line, each a repro that must exist."""
    return [resolve_script(p, "repro") for p in (str(script), *args)]


@main.command(context_settings={**CONTEXT, "ignore_unknown_options": True}, epilog=MINIFY_EXIT_HELP)
@_saved_option
@_subsystem_option
@_common_options
@_script_arguments
def bisect(
    script: Path,
    args: tuple[str, ...],
    saved: bool,
    run_dir: Path | None,
    subsystem: bool,
    accuracy: bool,
    strict_accuracy: bool,
    backend: str | None,
    out: Path | None,
    timeout: float,
    as_json: bool,
    nproc: int,
) -> None:
    """Run SCRIPT, then each of its graphs through eager → aot_eager → aot_eager_decomp_partition → final backend."""
    try:
        paths = _saved_paths(script, args) if saved else [resolve_script(script)]
        check_syntax(paths[0])
    except UserFacingError as error:
        exit_with(error, "minify", as_json)
    path = paths[0]

    def work(session: Any) -> tuple[dict[str, Any], Any]:
        from .bisect.bisection import bisect_saved, bisect_script
        from .report import print_bisect

        if saved:
            from .capture.torch_repro import load_any_repro

            cases: list[tuple[GraphCase, Path | None]] = [(load_any_repro(p, session).case, p) for p in paths]
            report = bisect_saved(
                session, cases, path.parent.parent.name, accuracy=_accuracy(accuracy, strict_accuracy)
            )
        else:
            report = bisect_script(
                session, path, list(args), backend=backend, accuracy=_accuracy(accuracy, strict_accuracy), nproc=nproc
            )
        failure, culprit = report.failure, report.culprit
        if subsystem and failure is not None and failure.failure is not None and culprit and culprit.case is not None:
            from .bisect.subsystem import go_below

            report.below = go_below(
                session,
                failure.stage,
                failure.failure.signature,
                _accuracy(accuracy, strict_accuracy),
                original=culprit.case,
                minimized=None,
                report=report,
                script=None if saved else path,
                args=[] if saved else list(args),
            )
        from .pages.minify_page import write_run_report

        data = report.to_json()
        write_run_report(session.run_dir, data)
        return data, lambda console: print_bisect(report.record(), console)

    # bisect leaves no report.json for an error (run and repro do)
    _session_command(
        path.stem,
        work,
        out=out,
        timeout=timeout,
        as_json=as_json,
        error_report=False,
        run_dir=run_dir,
        first=None if saved else _capture_starter(path, args, backend, nproc, _accuracy(accuracy, strict_accuracy)),
    )


@main.command(context_settings={**CONTEXT, "ignore_unknown_options": True}, epilog=MINIFY_EXIT_HELP)
@click.option(
    "--after",
    type=click.Choice(["auto", "dynamo", "aot"]),
    default="auto",
    show_default=True,
    help="Minify the dynamo graph, the aot graph, or the aot one when it reproduces.",
)
@_saved_option
@_subsystem_option
@wait_option
@torch_versions_option
@_common_options
@_script_arguments
def run(
    script: Path,
    args: tuple[str, ...],
    after: str,
    saved: bool,
    run_dir: Path | None,
    subsystem: bool,
    wait: bool,
    torch_versions: tuple[str, ...],
    accuracy: bool,
    strict_accuracy: bool,
    backend: str | None,
    out: Path | None,
    timeout: float,
    as_json: bool,
    nproc: int,
) -> None:
    """Run SCRIPT; if it fails, bisect the stages and shrink the failing graph into repro.py."""
    from .isolation.session import default_out_dir

    out = out or default_out_dir()
    try:
        paths = _saved_paths(script, args) if saved else [resolve_script(script)]
        check_syntax(paths[0])
    except UserFacingError as error:
        exit_with(error, "minify", as_json)
    path, releases = paths[0], specs_or_exit(torch_versions, as_json)

    def work(session: Any) -> tuple[dict[str, Any], Any]:
        from .minification import minify_repro, minify_script

        session.program_later = not wait
        if saved:
            return _minified(
                minify_repro(
                    session,
                    path,
                    saved=paths[1:],
                    after=after,
                    accuracy=_accuracy(accuracy, strict_accuracy),
                    out=out,
                    subsystem=subsystem,
                    releases=releases,
                )
            )
        return _minified(
            minify_script(
                session,
                path,
                list(args),
                after=after,
                backend=backend,
                accuracy=_accuracy(accuracy, strict_accuracy),
                out=out,
                nproc=nproc,
                subsystem=subsystem,
                releases=releases,
            )
        )

    _session_command(
        script.stem,
        work,
        out=out,
        timeout=timeout,
        as_json=as_json,
        run_dir=run_dir,
        first=None if saved else _capture_starter(path, args, backend, nproc, _accuracy(accuracy, strict_accuracy)),
    )


@main.command(context_settings=CONTEXT, epilog=MINIFY_EXIT_HELP)
@click.option(
    "--after",
    type=click.Choice(["auto", "dynamo", "aot"]),
    default="auto",
    show_default=True,
    help="For a dynamo graph: minify it, or its failing aot graph.",
)
@click.option("--accuracy/--no-accuracy", default=None, help="Judge wrong answers [default: as the repro says].")
@click.option("--strict-accuracy", is_flag=True, help="Judge wrong answers bit for bit against eager.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Where run directories go.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None, hidden=True)
@click.option("--recorded-only", is_flag=True, hidden=True)  # (the hook's: only the failure the program had)
@click.option("--timeout", type=TIMEOUT, default=300.0, show_default=True, help="Seconds per isolated query.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report on stdout, nothing else.")
@click.option("--device", default=None, help="Move the repro to this device first: does a GPU bug show on the CPU?")
@torch_versions_option
@jobs_option
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def repro(
    path: Path,
    recorded_only: bool,
    device: str | None,
    torch_versions: tuple[str, ...],
    after: str,
    accuracy: bool | None,
    strict_accuracy: bool,
    out: Path | None,
    run_dir: Path | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Minify an existing repro.py further (one of pt2kit's, or torch's repro.py / minifier_launcher.py)."""
    from .minification import minify_repro
    from .isolation.session import default_out_dir

    out = out or default_out_dir()
    try:
        resolved = resolve_script(path, "repro")
    except UserFacingError as error:
        exit_with(error, "minify", as_json)
    releases = specs_or_exit(torch_versions, as_json)

    def work(session: Any) -> tuple[dict[str, Any], Any]:
        options: dict[str, Any] = dict(after=after, out=out, releases=releases, device=device, recorded_only=recorded_only)
        return _minified(minify_repro(session, resolved, accuracy=_accuracy(accuracy, strict_accuracy), **options))

    _session_command(path.stem, work, out=out, timeout=timeout, as_json=as_json, run_dir=run_dir)


@main.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report on stdout, nothing else.")
def doctor(as_json: bool) -> None:
    """Check the installed torch against every torch internal pt2kit relies on."""
    from pt2kit import seams
    from .report import print_doctor
    from .isolation.session import print_json

    statuses = seams.check_all()
    working = seams.features(statuses)
    import torch

    data = {
        "status": seams.overall(statuses),
        "torch": torch.__version__,
        "tested": [".".join(map(str, v)) for v in seams.TESTED_TORCH],
        "in_tested_range": seams.in_tested_range(),
        "seams": [s.to_json() for s in statuses],
        "features": working,
    }
    if as_json:
        print_json(data)
    else:
        from .report import wide_console

        print_doctor(data, wide_console())
    if data["status"] != "ok":
        sys.exit(seams.SeamBroken.exit_code)


main.add_command(hunt_command)
main.add_command(versions_command)
main.add_command(show_command)


@main.command("_capture", hidden=True, context_settings={**CONTEXT, "ignore_unknown_options": True})
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--backend", default=None)
@click.option("--timeout", type=float, default=None)
@click.option("--accuracy", type=click.Choice(["on", "strict", "draws"]), default=None)
@_script_arguments
def capture_(
    out: Path, backend: str | None, timeout: float | None, accuracy: str | None, script: Path, args: tuple[str, ...]
) -> None:
    """(pt2kit's own) run SCRIPT with capture armed; events and graphs go to OUT."""
    from .capture.recorder import capture_script

    capture_script(
        script.resolve(),
        list(args),
        out,
        backend=backend,
        timeout=timeout,
        accuracy="strict" if accuracy == "strict" else "draws" if accuracy == "draws" else accuracy == "on",
    )


def _minified(result: Any) -> tuple[dict[str, Any], Any]:
    """``run`` and ``repro``: the report and the summary of a :class:`~minifier.result.MinifyResult`."""
    from .report import print_minify

    record = result.record()
    return record.to_json(), lambda console: print_minify(record, console)


def _capture_starter(script: Path, args: tuple[str, ...], backend: str | None, nproc: int, accuracy: Accuracy) -> Any:
    """``run`` and ``bisect``: start the program under capture first (a torchrun job starts its ranks later)."""
    if nproc > 1:
        return None
    from .capture.program import ProgramRun, start_capture

    return lambda session: start_capture(session, ProgramRun(script, tuple(args), backend, accuracy))


def _session_command(
    name: str,
    work: Any,
    *,
    out: Path | None,
    timeout: float,
    as_json: bool,
    run_dir: Path | None = None,
    error_report: bool = True,
    first: Any = None,
) -> None:
    """Every command's frame: a session, ``work(session) -> (report, render)``, errors, and the summary or JSON.

    ``first(session)``, when given, runs before this process imports torch (the
    user's program under capture starts there: it runs beside pt2kit's own imports).
    """
    from .isolation.session import Session
    from .pages.issue import prefetch_environment

    from pt2kit import seams

    session = None
    try:
        session = Session(name, out=out, timeout=timeout, run_dir=run_dir)
        if first is not None:
            first(session)
        prefetch_environment()  # (issue.md's environment block, collected beside the run)
        seams.require("the minifier", *seams.MINIFIER_SEAMS)  # outside the tested torch range: one line, not a traceback deep inside
        data, render = work(session)
        session.close()
        from .report import wide_console

        _finish(render, data, as_json, wide_console())
    except KeyboardInterrupt:
        interrupted = Interrupted(
            f"interrupted; partial results are in {session.run_dir if session else '(nothing yet)'}"
        )
        if session:
            session.close()
            if error_report:
                _write_error_report(session, interrupted)
        exit_with(interrupted, "minify", as_json)
    except UserFacingError as error:
        if session:
            session.close()
            session.keeps_found(error)  # (report.json and --json alike)
            if error_report:
                _write_error_report(session, error)
        exit_with(error, "minify", as_json)
    except Exception as bug:  # noqa: BLE001 - pt2kit's own failure: one line, its own exit code, nothing lost
        internal = InternalError.of(bug, session.run_dir if session else None)
        if session:
            session.close()
            _write_error_report(session, internal)
        exit_with(internal, "minify", as_json)


def _write_error_report(session: Any, error: UserFacingError) -> None:
    from .pages.minify_page import write_run_report

    if not (session.run_dir / "report.json").exists():
        fields = {"status": error.status, "message": str(error), "exit_code": error.exit_code, **error.report, "queries": session.queries}
        write_run_report(session.run_dir, {**fields, "seconds": round(session.seconds, 2)})


def entry_point(prog_name: str = "minify") -> None:
    """The ``minify`` executable: :func:`main`, then exit without tearing torch down.

    Finalizing an interpreter that imported torch, dynamo and Inductor takes one to two
    seconds of garbage collection that a finished command does not need. Everything a
    run writes is closed by then and its workers are reaped, so after flushing the
    output streams and logging the process ends at once.
    """
    code: Any = 0
    try:
        _terminate_as_interrupt()
        main(prog_name=prog_name)
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        print(f"{prog_name}: interrupted", file=sys.stderr)
        code = Interrupted.exit_code
    except BaseException as bug:  # noqa: BLE001 - even a failure to start is one line, never a traceback
        error = InternalError.of(bug)
        print(f"{prog_name}: {error}", file=sys.stderr)
        code = error.exit_code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def _terminate_as_interrupt() -> None:
    """SIGTERM (torchrun stopping its ranks, a batch system's time limit, ``kill``) is handled as Ctrl-C.

    Either way the run stops where it is and keeps what it has: the best repro so far,
    its checkpoint (the same command resumes it) and a ``report.json`` that says
    ``interrupted``. Without this, SIGTERM ends the process with nothing written.
    """
    import signal
    import threading

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


if __name__ == "__main__":  # pragma: no cover
    entry_point()
