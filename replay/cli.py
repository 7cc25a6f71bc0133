"""``python -m replay``: record failing frames, look at records, replay them anywhere.

- ``record [--out DIR] [--json] SCRIPT [ARGS]...``: run the script with recording armed;
  exit 0 when something was recorded, 1 when nothing failed, 3 when the script raised
  before compiling anything.
- ``run [--backend NAME|module:function] [--fullgraph/--no-fullgraph] [--static]
  [--allow-partial] [--timeout S] [--json] RECORD``: replay in a fresh process; exit 1
  reproduced, 0 passed, 5 a different failure.
- ``show [--json] RECORD``, ``script RECORD [-o FILE]``,
  ``minify [--out DIR] [--timeout S] [--allow-partial] [--json] RECORD``.
- ``python -m replay RECORD`` is ``run RECORD``.

Bad input is one line and an exit code: 2 usage, 4 unknown backend, 6 a record that
cannot be read (truncated, corrupt, unsafe), 7 a frame that cannot be rebuilt here
(a module or source it needs is missing), 8 a partial record without --allow-partial.
Output contract as for ``minify``: with ``--json`` one JSON document on stdout and nothing
else there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import click

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

from pt2kit.errors import ScriptFailedBeforeCompile, UserFacingError, exit_with  # noqa: E402

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _print_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _console() -> Any:
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=140)


@click.group(context_settings=CONTEXT)
def main() -> None:
    """Record the frame torch.compile fails on, and replay it alone under any backend."""


@main.command(context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where records go [default: $TORCHDYNAMO_REPRO_DIR or ./torch_compile_debug].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary on stdout, nothing else.")
@click.argument("script", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def record(out: Path | None, as_json: bool, script: Path, args: tuple[str, ...]) -> None:
    """Run SCRIPT with ARGS and record every frame whose compile or compiled call fails."""
    from pt2kit.script import resolve_script

    try:
        path = resolve_script(script)
    except UserFacingError as error:
        exit_with(error, "replay", as_json)
    from pt2kit.script import run_script, stdout_to_stderr

    from .recorder import default_out, recording

    raised: BaseException | None = None
    try:
        with stdout_to_stderr(as_json), recording(out or default_out(), quiet=True) as recorder:
            try:
                run_script(path, args)
            except SystemExit:
                pass
            except Exception as exc:  # noqa: BLE001 - the script's own failure: recorded if a frame failed
                raised = exc
                recorder.script_failed(exc)  # (a frame whose backward it broke in)
                if not recorder.records:
                    traceback.print_exc(file=sys.stderr)
    except UserFacingError as error:  # a torch pt2kit does not support (seams.SeamBroken)
        exit_with(error, "replay", as_json)
    if raised is not None and recorder.frames_seen == 0:
        first_line = str(raised).splitlines()[0] if str(raised) else ""
        message = f"the script raised {type(raised).__name__} before torch.compile compiled anything: {first_line}"
        exit_with(ScriptFailedBeforeCompile(message), "replay", as_json)
    summary: dict[str, Any] = {
        "status": "recorded" if recorder.records else "no-failure",
        "records": [r.summary() for r in recorder.records],
    }
    if raised is not None and not recorder.records:
        summary["script_error"] = f"{type(raised).__name__}: {str(raised).splitlines()[0] if str(raised) else ''}"
    if recorder.unsaved and not recorder.records:
        summary["unsaved"] = recorder.unsaved
    if as_json:
        _print_json(summary)
    else:
        from .report import print_records

        print_records(summary, _console())
    sys.exit(0 if recorder.records else 1)


@main.command(context_settings=CONTEXT)
@click.option(
    "--backend", default=None, help="A registered backend name or module:function [default: the recorded one]."
)
@click.option(
    "--fullgraph/--no-fullgraph", default=None, help="Compile with fullgraph on or off [default: as recorded]."
)
@click.option(
    "--static", is_flag=True, help="Replay without the recorded dynamic-shape state (automatic dynamic, mark_dynamic)."
)
@click.option(
    "--allow-partial", is_flag=True, help="Replay a partial record; values that were not recorded become placeholders."
)
@click.option("--timeout", type=float, default=None, help="Seconds before the replay counts as a hang.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON result on stdout, nothing else.")
@click.option("--here", is_flag=True, hidden=True, help="Replay in this process (the isolated child does).")
@click.option("--result", type=click.Path(dir_okay=False, path_type=Path), default=None, hidden=True)
@click.argument("record_path", metavar="RECORD", type=click.Path(path_type=Path))
def run(
    backend: str | None,
    fullgraph: bool | None,
    static: bool,
    allow_partial: bool,
    timeout: float | None,
    as_json: bool,
    here: bool,
    result: Path | None,
    record_path: Path,
) -> None:
    """Rebuild RECORD's frame in a fresh process and call it compiled: exit 1 reproduced, 0 passed, 5 different failure."""
    if here:
        _run_here(record_path, backend, fullgraph, static, allow_partial, result)
        return
    from .runner import run as run_record

    try:
        outcome = run_record(
            record_path,
            backend=backend,
            fullgraph=fullgraph,
            static=static,
            allow_partial=allow_partial,
            timeout=timeout,
        )
    except UserFacingError as error:
        exit_with(error, "replay", as_json)
    if as_json:
        _print_json(outcome.to_json())
    else:
        from .report import print_result

        print_result(outcome, _console())
    sys.exit(outcome.exit_code)


def _run_here(
    record_path: Path,
    backend: str | None,
    fullgraph: bool | None,
    static: bool,
    allow_partial: bool,
    result: Path | None,
) -> None:
    """The isolated child: replay, then write the result (or the error) where the parent reads it."""
    from .runner import replay_here

    try:
        data = replay_here(
            record_path, backend=backend, fullgraph=fullgraph, static=static, allow_partial=allow_partial
        ).to_json()
    except UserFacingError as error:
        data = {"status": "error", "message": str(error), "exit_code": error.exit_code}
    text = json.dumps(data, indent=2, default=str)
    if result is not None:
        result.write_text(text)
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip torch's interpreter teardown


@main.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print what the record holds as JSON.")
@click.argument("record_path", metavar="RECORD", type=click.Path(path_type=Path))
def show(as_json: bool, record_path: Path) -> None:
    """What RECORD holds: the frame, its arguments, globals, config, state and failure."""
    from . import records as record_format
    from .report import print_show, show_data

    try:
        loaded = record_format.load(record_path)
    except UserFacingError as error:
        exit_with(error, "replay", as_json)
    data = show_data(loaded)
    if as_json:
        _print_json(data)
    else:
        print_show(data, _console())


@main.command(context_settings=CONTEXT)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the script [default: RECORD/replay.py].",
)
@click.argument("record_path", metavar="RECORD", type=click.Path(path_type=Path))
def script(output: Path | None, record_path: Path) -> None:
    """Write a torch-only script that replays RECORD's frame."""
    from . import records as record_format
    from .script import write_script

    try:
        path = write_script(record_path, output)
        _, manifest = record_format.read_manifest(record_path)
    except UserFacingError as error:
        exit_with(error, "replay", False)
    click.echo(str(path))
    # the script is still of use with another backend, or with --allow-partial: say so, do not refuse
    backend = manifest.get("compile", {}).get("backend", {})
    if not backend.get("name"):
        click.echo(f"replay: note: {_unrebuildable_backend(backend)}; run the script with --backend NAME", err=True)
    if manifest["status"] != "complete":
        click.echo("replay: note: the record is partial; the script replays it with --allow-partial", err=True)


def _unrebuildable_backend(backend: dict[str, Any]) -> str:
    return f"the recorded backend cannot be rebuilt ({backend.get('why') or 'it has no name'})"


@main.command(context_settings=CONTEXT)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Where minify's run directory goes."
)
@click.option("--timeout", type=float, default=None, help="Seconds per isolated query (minify run --timeout).")
@click.option(
    "--allow-partial", is_flag=True, help="Minify a partial record; values that were not recorded become placeholders."
)
@click.option("--json", "as_json", is_flag=True, help="Print minify's report.json on stdout, nothing else.")
@click.argument("record_path", metavar="RECORD", type=click.Path(path_type=Path))
def minify(out: Path | None, timeout: float | None, allow_partial: bool, as_json: bool, record_path: Path) -> None:
    """Write RECORD's replay script and minify it with `minify run` (exit codes are minify's)."""
    from pt2kit.errors import UnknownBackend

    from . import records as record_format
    from .runner import partial_record_error
    from .script import write_script

    try:
        _, manifest = record_format.read_manifest(record_path)
        # refused here, as `replay run` refuses them, rather than as a failure of the script under minify
        if manifest["status"] != "complete" and not allow_partial:
            raise partial_record_error(manifest)
        backend = manifest.get("compile", {}).get("backend", {})
        if not backend.get("name"):
            raise UnknownBackend(f"{_unrebuildable_backend(backend)}; minify cannot compile the frame with it")
        path = write_script(record_path)
    except UserFacingError as error:
        exit_with(error, "replay", as_json)
    command = [sys.executable, "-P", "-m", "minifier", "run"]
    if out is not None:
        command += ["--out", str(out)]
    if timeout is not None:
        command += ["--timeout", str(timeout)]
    if as_json:
        command.append("--json")
    command.append(str(path))
    if allow_partial:
        command.append("--allow-partial")  # the script's own option
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    if not as_json:
        click.echo(f"replay: minify run {path}", err=True)
    sys.exit(subprocess.run(command, env=env, check=False).returncode)


def entry_point() -> None:
    """``python -m replay``: :func:`main`, then exit without tearing torch down."""
    code: Any = 0
    argv = sys.argv[1:]
    if argv and argv[0] not in main.commands and Path(argv[0], "manifest.json").is_file():
        argv.insert(0, "run")  # `python -m replay RECORD` is `run RECORD`
    try:
        main(args=argv, prog_name="python -m replay")
    except SystemExit as e:
        code = e.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
