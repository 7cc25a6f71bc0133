"""``minify show RUN``: a run drawn again from its ``report.json``, as the command that made it drew it.

A run directory (or its ``report.json``) of ``minify run``, ``repro`` or ``bisect`` is read as a
typed record (:func:`~minifier.result.read_report`: JSON, never unpickled) and printed by the
same views (:mod:`minifier.report`), or as its JSON with ``--json``. A report written while the
run was still going says what was still to come (``pending``).
"""

from __future__ import annotations

from pathlib import Path

import click

from pt2kit.errors import CorruptRecord, ScriptNotFound, exit_with


@click.command("show", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout, nothing else.")
@click.argument("run", type=click.Path(path_type=Path))
def show_command(run: Path, as_json: bool) -> None:
    """Print the result of RUN again: a run directory, or its report.json.

    Exit codes: 0 shown; 2 RUN does not exist; 6 its report cannot be read, or the run ended without a result.
    """
    from .bisect.report import BisectRecord
    from .isolation.session import print_json
    from .report import print_bisect, print_minify, wide_console
    from .result import read_report

    path = run / "report.json" if run.is_dir() else run
    try:
        if not path.exists():
            raise ScriptNotFound(str(path), "report")
        record = read_report(path)
    except (ScriptNotFound, CorruptRecord) as error:
        exit_with(error, "minify", as_json)
    if as_json:
        print_json(record.to_json())
    elif isinstance(record, BisectRecord):
        print_bisect(record, wide_console())
    else:
        print_minify(record, wide_console())
