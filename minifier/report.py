"""Rendering results for people (rich tables on stderr/stdout); ``--json`` prints ``to_json()`` instead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from .bisect.report import BisectReport, Row
    from .result import MinifyResult
    from .bisect.subsystem import Below

_STYLES = {
    "pass": "green",
    "compile_error": "bold red",
    "runtime_error": "bold red",
    "accuracy": "bold magenta",
    "crash": "bold red",
    "timeout": "bold yellow",
}


def _frame(frame: dict[str, Any] | None) -> str:
    if not frame:
        return ""
    return f"{frame.get('name', '?')} ({Path(str(frame.get('filename', '?'))).name}:{frame.get('lineno', '?')})"


def _cell(row: Row, stage: str, culprit: bool) -> Text:
    outcome = row.outcomes.get(stage)
    if outcome is None:
        return Text("·", style="dim")
    text = outcome.status
    style = _STYLES.get(text, "")
    if culprit and not outcome.passed:
        return Text(f"✗ {text}", style=style + " reverse")
    return Text(text, style=style)


def bisect_table(report: BisectReport) -> Table:
    table = Table(title=f"Stage bisection of {report.script}", title_justify="left")
    for column in ("graph", "frame", "boundary", "kind", "nodes"):
        table.add_column(column, no_wrap=column != "frame")
    for stage in report.stages:
        table.add_column(stage, no_wrap=True)
    for row in report.rows:
        culprit = row is report.culprit
        cells = [
            Text(row.label, style="bold" if culprit else ""),
            _frame(row.frame),
            row.boundary,
            row.kind,
            "?" if row.nodes is None else str(row.nodes),
        ]
        table.add_row(*cells, *(_cell(row, s, culprit) for s in report.stages))
    return table


def print_bisect(report: BisectReport, console: Console) -> None:
    console.print(bisect_table(report))
    failure = report.failure
    if report.culprit is None or failure is None or failure.failure is None:
        console.print("No graph fails.")
        return
    culprit = report.culprit
    where = _frame(culprit.frame)
    console.print(
        f"First failure: [bold]{failure.stage}[/] on [bold]{culprit.label}[/]"
        + (f" ({culprit.kind} graph)" if culprit.boundary == "aot" else "")
        + (f" from {where}" if where and culprit.case is not None else f" at {where}" if where else "")
    )
    console.print(f"  {failure.failure.signature}", highlight=False, markup=False)
    if report.note:
        console.print(f"  note: {report.note}")
    if culprit.case_path:
        console.print(f"  graph: {culprit.case_path}")
    if report.below is not None:
        table = Table(show_header=False, box=None, padding=(0, 1, 0, 2))
        for name, text in below_rows(report.below):
            table.add_row(name, text)
        console.print(table)
        for note in report.below.notes:
            console.print(f"  note: {note}", highlight=False, markup=False)
    console.print(f"[dim]{report.queries} queries, {report.seconds:.1f} s; run directory {report.run_dir}[/]")
    _print_page(report.run_dir, console)


def below_rows(below: Below) -> list[tuple[str, Text]]:
    """The subsystem and workaround rows (``minify run``'s table, under ``minify bisect``'s)."""
    rows = []
    if below.subsystem is not None:
        confirmed = (
            ""
            if below.confirmed is None
            else " (confirmed on the original graph)"
            if below.confirmed
            else " (not confirmed on the original graph)"
        )
        rows.append(("subsystem", Text(below.subsystem.describe() + confirmed)))
    if below.workaround is not None:
        seen = {
            "program": "the program runs to the end with it",
            "repro": "repro.py passes there: torch alone, an empty Inductor cache",
        }.get(below.workaround.verified_on, "the failing graph runs right with it")
        code = below.workaround.code.rstrip()
        rows.append(("workaround", Text(f"{below.workaround.what} ({seen})" + (f"\n{code}" if code else ""))))
    else:
        rows.append(("workaround", Text("none found (see notes)")))
    return rows


def print_minify(result: MinifyResult, console: Console) -> None:
    data = result.to_json()
    table = Table(title="Minified", title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    failure = data["failure"]
    table.add_row("failure", f"{failure['kind']} at {failure['stage']}: {failure['exception']}: {failure['message']}")
    graph = data["graph"]
    kind = "dynamo graph" if graph["boundary"] == "dynamo" else f"{graph['kind']} graph (after aot)"
    table.add_row("graph", f"{kind} #{graph['index']}")
    table.add_row("nodes", f"{data['nodes_before']} → {data['nodes_after']}: {', '.join(data['ops_after'])}")
    table.add_row("inputs", result.inputs_summary())
    table.add_row("queries", f"{data['queries']} in {data['seconds']:.1f} s")
    table.add_row(
        "repro", str(data["repro"]) + ("" if data.get("verified") else "  (not verified on another machine: see notes)")
    )
    if result.below is not None:
        for name, text in below_rows(result.below):
            table.add_row(name, text)
    if result.releases is not None:
        from .releases.command import releases_line

        table.add_row("torch releases", Text(releases_line(result.releases)))
    for note in data.get("notes") or []:
        table.add_row("note", Text(note))
    console.print(table)
    if result.run_dir is not None:
        _print_page(result.run_dir, console)


def _print_page(run_dir: Path, console: Console) -> None:
    from .pages.minify_page import REPORT_HTML

    if (run_dir / REPORT_HTML).is_file():
        console.print(f"report: {run_dir / REPORT_HTML}", highlight=False, markup=False, soft_wrap=True)


def print_doctor(data: dict[str, Any], console: Console) -> None:
    """``minify doctor``: each seam and what it serves; each feature and whether it works."""
    tested = ", ".join(data["tested"])
    console.print(
        f"torch {data['torch']} (pt2kit is tested with {tested})"
        + ("" if data["in_tested_range"] else " [bold yellow]outside the tested range[/]")
    )
    table = Table(title="torch internals pt2kit relies on", title_justify="left")
    for column in ("seam", "wraps", "status"):
        table.add_column(column, overflow="fold")
    for seam in data["seams"]:
        if seam["ok"]:
            status = Text("ok", style="green")
        elif seam.get("absent"):
            status = Text(seam["error"], style="yellow")
        else:
            status = Text(f"broken: {seam['error']}", style="bold red")
        table.add_row(seam["seam"], Text(seam["wraps"] or "?"), status)
    console.print(table)
    features = Table(title="features", title_justify="left", show_header=False)
    features.add_column("feature")
    features.add_column("")
    for feature, ok in sorted(data["features"].items()):
        features.add_row(
            feature, Text("works", style="green") if ok else Text("not with this torch", style="bold red")
        )
    console.print(features)
