"""Rendering results for people (rich tables on stderr/stdout); ``--json`` prints ``to_json()`` instead.

The views read records (:class:`~minifier.result.MinifyRecord`, :class:`~minifier.bisect.report.BisectRecord`:
report.json as data), never the live objects of a run, so a run is drawn the same from its
``report.json`` later (``minify show``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text
from .unit.case import Boundary
from pt2kit.signature import Kind, shown

if TYPE_CHECKING:
    from .bisect.report import BelowRecord, BisectRecord, GraphRecord
    from .result import MinifyRecord

_STYLES = {
    "pass": "green",
    Kind.COMPILE_ERROR: "bold red",
    Kind.RUNTIME_ERROR: "bold red",
    Kind.ACCURACY: "bold magenta",
    Kind.CRASH: "bold red",
    Kind.TIMEOUT: "bold yellow",
}


def wide_console() -> Console:
    """A console for results: tables get 140 columns when stdout is not a terminal."""
    console = Console()
    return console if console.is_terminal else Console(width=140)


def _frame(frame: dict[str, Any] | None) -> str:
    if not frame:
        return ""
    return f"{frame.get('name', '?')} ({Path(str(frame.get('filename', '?'))).name}:{frame.get('lineno', '?')})"


def _cell(row: GraphRecord, stage: str, culprit: bool) -> Text:
    status = row.stages.get(stage)
    if status is None:
        return Text("·", style="dim")
    style = _STYLES.get(status, "")
    if culprit and status != "pass":
        return Text(f"✗ {status}", style=style + " reverse")
    return Text(status, style=style)


def _stages(record: BisectRecord) -> list[str]:
    """The backend's stages, in order (each row names every one of them)."""
    return list(record.graphs[0].stages) if record.graphs else list(record.stages)


def _culprit(record: BisectRecord) -> GraphRecord | None:
    label = record.graph.label if record.graph is not None else None
    return next((row for row in record.graphs if row.label == label), None) if label is not None else None


def bisect_table(record: BisectRecord) -> Table:
    table = Table(title=f"Stage bisection of {record.script}", title_justify="left")
    for column in ("graph", "frame", "boundary", "kind", "nodes"):
        table.add_column(column, no_wrap=column != "frame")
    stages, culprit_row = _stages(record), _culprit(record)
    for stage in stages:
        table.add_column(stage, no_wrap=True)
    for row in record.graphs:
        culprit = row is culprit_row
        cells: list[Text | str] = [
            Text(row.label, style="bold" if culprit else ""),
            _frame(row.frame),
            row.boundary,
            row.kind,
            "?" if row.nodes is None else str(row.nodes),
        ]
        table.add_row(*cells, *(_cell(row, s, culprit) for s in stages))
    return table


def print_bisect(record: BisectRecord, console: Console) -> None:
    console.print(bisect_table(record))
    failure, culprit = record.failure, _culprit(record)
    if culprit is None or failure is None:
        console.print("No graph fails.")
        return
    where = _frame(culprit.frame)
    console.print(
        f"First failure: [bold]{failure.stage}[/] on [bold]{culprit.label}[/]"
        + (f" ({culprit.kind} graph)" if culprit.boundary == Boundary.AOT else "")
        + (f" from {where}" if where and culprit.repro is not None else f" at {where}" if where else "")
    )
    console.print(f"  {failure.signature}", highlight=False, markup=False)
    if record.note:
        console.print(f"  note: {record.note}", highlight=False, markup=False)  # (torch's words: "OrderedSet([u3])" is no tag)
    if culprit.repro:
        console.print(f"  graph: {culprit.repro}", markup=False)
    if record.below is not None:
        table = Table(show_header=False, box=None, padding=(0, 1, 0, 2))
        for name, text in below_rows(record.below):
            table.add_row(name, text)
        console.print(table)
        for note in record.notes or ():
            console.print(f"  note: {note}", highlight=False, markup=False)
    console.print(f"[dim]{record.queries} queries, {record.seconds:.1f} s; run directory {record.run_dir}[/]")
    _print_page(Path(record.run_dir), console)


def below_rows(below: BelowRecord) -> list[tuple[str, Text]]:
    """The subsystem and workaround rows (``minify run``'s table, under ``minify bisect``'s)."""
    rows = []
    if (subsystem := below.subsystem) is not None:
        confirmed = {None: "", True: " (confirmed on the original graph)", False: " (not confirmed on the original graph)"}
        where = f" #{subsystem['application']}" if subsystem.get("application") else ""
        detail = f": {subsystem['detail']}" if subsystem.get("detail") else ""
        described = f"{subsystem['backend']} · {subsystem['name']}{where}{detail}"
        rows.append(("subsystem", Text(described + confirmed[subsystem.get("confirmed_on_original")])))
    if (workaround := below.workaround) is not None:
        seen = {
            "program": "the program runs to the end with it",
            "repro": "repro.py runs right with it",
        }.get(workaround["verified_on"], "the failing graph runs right with it")
        seen += f"; the program {workaround['program']} with it" if workaround.get("program") else ""
        code = workaround["code"].rstrip()
        rows.append(("workaround", Text(f"{workaround['what']} ({seen})" + (f"\n{code}" if code else ""))))
    else:
        rows.append(("workaround", Text("none found (see notes)")))
    return rows


def inputs_summary(record: MinifyRecord) -> str:
    """The minimized graph's tensor inputs: random, or real values in the repro's data file."""
    from pt2kit.errors import plural

    tensors = [i for i in record.inputs_after if i.shape is not None]
    if record.inputs == "random":
        return f"{plural(len(tensors), 'random tensor')} (no data file)"
    return f"{plural(len(tensors), 'tensor')}, real values among them in a data file"


def print_minify(record: MinifyRecord, console: Console) -> None:
    table = Table(title="Minified", title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    failure = record.failure
    table.add_row("failure", f"{failure.kind} at {failure.stage}: {failure.exception}: {shown(failure.message)}")
    graph = record.graph
    kind = "dynamo graph" if graph.boundary == Boundary.DYNAMO else f"{graph.kind} graph (after aot)"
    table.add_row("graph", f"{kind} #{graph.index}")
    table.add_row("nodes", f"{record.nodes_before} → {record.nodes_after}: {', '.join(record.ops_after)}")
    table.add_row("inputs", inputs_summary(record))
    table.add_row("queries", f"{record.queries} in {record.seconds:.1f} s")
    verified = "" if record.verified else "  (not verified on another machine: see notes)"
    table.add_row("repro", record.repro + verified)
    if record.below.subsystem is not None or record.below.workaround is not None:
        for name, text in below_rows(record.below):
            table.add_row(name, text)
    if record.releases is not None:
        from .releases.command import releases_line

        table.add_row("torch releases", Text(releases_line(record.releases)))
    for note in record.notes:
        table.add_row("note", Text(note))
    if record.pending:
        table.add_row("still to come", Text(", ".join(record.pending)))
    console.print(table)
    if record.run_dir is not None:
        _print_page(Path(record.run_dir), console)


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
