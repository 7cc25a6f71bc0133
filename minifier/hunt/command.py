"""``minify hunt``: its options, and the summary it prints (a rich table, or ``--json``)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click


from typing import TYPE_CHECKING

from pt2kit.errors import exit_with
from ..isolation.jobs import jobs_option
from ..releases.command import specs_or_exit, torch_versions_option

if TYPE_CHECKING:
    from .hunt import HuntSummary


def print_hunt(summary: HuntSummary, console: Any) -> None:
    from rich.table import Table

    data = summary.to_json()
    rates = data["rates"]
    console.print(
        f"[bold]{summary.programs} programs[/bold] in {summary.seconds:.0f} s on torch {summary.torch} "
        f"({rates['programs_per_hour']}/h): {summary.suspects} survived triage, "
        f"[bold]{len(summary.findings)} distinct bugs[/bold] ({rates['findings_per_hour']}/h)"
    )
    if summary.dropped:
        console.print("dropped by triage: " + ", ".join(f"{rule} {n}" for rule, n in sorted(summary.dropped.items())))
    if summary.findings:
        table = Table("bug", "nodes", "queries", "repro", "why it is torch's")
        for f in summary.findings:
            fixed = f"; fixed in torch {f.fixed_in}" if f.fixed_in else ""
            table.add_row(
                f.key,
                f.nodes,
                f"{f.queries}" + ("" if f.within_query_bound else " (over the bound)"),
                f.repro,
                f.why + fixed,
            )
        console.print(table)
    for bug in summary.pt2kit_bugs:
        console.print(f"[red]pt2kit's own bug[/red]: {bug['program']}: {bug['what']}")
    if summary.interrupted:
        console.print("interrupted: the summary so far")


@click.command("hunt", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--minutes", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed draws the same programs.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Default: ./pt2kit_hunt/<time>."
)
@click.option("--backend", default=None, hidden=True, help="Minify under this backend (pt2kit's own tests).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout, nothing else.")
@torch_versions_option
@jobs_option
def hunt_command(
    minutes: float, seed: int, out: Path | None, backend: str | None, as_json: bool, torch_versions: tuple[str, ...]
) -> None:
    """Generate valid programs, compare eager with torch.compile, and minify each distinct bug found."""
    from rich.console import Console

    from pt2kit.errors import OutputNotWritable
    from ..isolation.progress import Progress
    from ..isolation.session import print_json
    from .hunt import hunt

    out = out or Path("pt2kit_hunt") / time.strftime("%Y%m%d-%H%M%S")
    try:
        out.mkdir(parents=True, exist_ok=True)
        writable = os.access(out, os.W_OK)
    except OSError as e:
        writable, reason = False, e.strerror or type(e).__name__
    if not writable:
        exit_with(OutputNotWritable(out, locals().get("reason", "not writable")), "minify", as_json)
    releases = ",".join(spec.text for spec in specs_or_exit(torch_versions, as_json))
    progress = Progress(Console(stderr=True), enabled=True)
    summary = hunt(minutes, seed, out, progress, backend=backend, releases=releases)
    if as_json:
        print_json(summary.to_json())
    else:
        console = Console()
        print_hunt(summary, console if console.is_terminal else Console(width=140))
    sys.exit(130 if summary.interrupted else 0)
