"""Rich renderings of explain/'s reports, for people (``--json`` is the twin for tools).

Reports are data first (``to_dict`` on every record); this module only lays them out, so
that they read well from a 80-column pipe to a wide terminal: short facts go in tables,
long prose (reasons, remedies, guards) in indented blocks under each entry.

- :func:`explain_renderable`: graph breaks (where, the source line, why, what to do), then
  graphs (ops, inputs/outputs, compile time, guards), then how the user's caches were
  protected;
- :func:`recompiles_renderable`: per code object, one row per compile (cause, graph hash,
  inputs/outputs, time), each followed by the line that triggered it and *every* guard it
  failed; then the recompile limit and remedies.

Guards on process state and bookkeeping (grad mode, ``mark_dynamic`` markers...) are
folded into a count here; the JSON lists them all.

This module depends only on the records it lays out (:mod:`explain.breaks`,
:mod:`explain.graphs`, :mod:`explain.compiles`, :mod:`explain.isolation`); the reports
themselves (:class:`~explain.ExplainReport`, :class:`~explain.RecompileProfiler`) call it,
never the other way round, and an explain report is known here only by its shape
(:class:`Explanation`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any, Protocol

from rich.console import Console, Group, JustifyMethod
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from .breaks import GraphBreak
from .compiles import CompileRecord, FunctionCompiles, distinct_failures
from .graphs import CapturedGraph
from .isolation import Isolation

MAX_GUARDS_SHOWN = 8
INDENT = 4


def to_text(renderable: Any, width: int = 100) -> str:
    """Render for ``print`` and logs: rich layout, no colour codes."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(renderable)
    return buffer.getvalue()


def where(filename: str | None, lineno: int | None) -> str:
    if filename is None:
        return "?"
    return f"{_short_path(filename)}:{lineno}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _block(*lines: Text) -> Padding:
    return Padding(Group(*lines), (0, 0, 0, INDENT))


def _labelled(label: str, body: str | Text, style: str = "") -> Text:
    text = Text(f"{label} ", style="bold")
    text.append(body if isinstance(body, Text) else Text(body, style=style))
    return text


# -- explain ------------------------------------------------------------------------------


class Explanation(Protocol):
    """What :func:`explain_renderable` lays out: the shape of an :class:`explain.ExplainReport`."""

    target: str
    isolation: Isolation
    recompiles: Any  # a RecompileProfiler (its ``functions``), or None
    error: str | None

    @property
    def graphs(self) -> Sequence[CapturedGraph]: ...

    @property
    def breaks(self) -> Sequence[GraphBreak]: ...

    @property
    def graph_count(self) -> int: ...

    @property
    def break_count(self) -> int: ...

    @property
    def compile_seconds(self) -> float: ...


def explain_renderable(report: Explanation) -> Group:
    parts: list[Any] = [
        Text(
            f"explain: {report.target}\n{_plural(report.graph_count, 'graph')}, "
            f"{_plural(report.break_count, 'graph break')}, {report.compile_seconds:.2f} s compiling",
            style="bold",
        ),
        Rule(f"Graph breaks ({report.break_count})", align="left"),
    ]
    parts.extend(_break_entry(index, brk) for index, brk in enumerate(report.breaks))
    if not report.breaks:
        parts.append(Text("None.", style="green"))
    parts.append(Rule(f"Graphs ({report.graph_count})", align="left"))
    if report.graphs:
        parts.append(_graphs_table(report.graphs))
        parts.extend(_graph_details(graph) for graph in report.graphs)
    if report.recompiles is not None:
        parts.append(recompiles_renderable(report.recompiles.functions))
    parts.append(Rule("Your compiled caches", align="left"))
    isolation = report.isolation
    parts.append(
        Text(
            f"{isolation.strategy}; torch._dynamo.reset() {'was' if isolation.reset_called else 'was not'} called.\n"
            + "\n".join(f"- {detail}" for detail in isolation.details),
            style="dim",
        )
    )
    if report.error is not None:
        parts.append(Text(f"The script raised {report.error}", style="bold red"))
    return Group(*parts)


def _break_entry(index: int, brk: GraphBreak) -> Group:
    location = brk.location
    head = Text(f"{index}  ", style="bold")
    head.append(where(brk.filename, brk.lineno), style="bold")
    if location is not None:
        head.append(f" in {location.function}")
    if len(brk.compile_ids) > 1:
        head.append(f"  (broke {len(brk.compile_ids)} graphs: {', '.join(brk.compile_ids)})", style="dim")
    lines: list[Text | Padding] = [head]
    body = []
    if location is not None and location.line:
        body.append(Text(f"│ {location.line}", style="cyan"))
    why = Text(brk.reason)
    if brk.frame_skipped:
        why.append(" (the whole function runs eagerly)", style="yellow")
    body.append(_labelled("why:", why))
    body.append(_labelled("fix:", brk.remedy or "no known remedy", style="" if brk.remedy else "dim"))
    body.append(Text(f"torch: {brk.cause}" + (f" — {brk.doc_url}" if brk.doc_url else ""), style="dim"))
    if len(brk.user_stack) > 1:
        stack = " → ".join(f"{frame.function} ({where(frame.filename, frame.lineno)})" for frame in brk.user_stack)
        body.append(_labelled("stack:", stack, style="dim"))
    lines.append(_block(*body))
    return Group(*lines)


def _graphs_table(graphs: Sequence[CapturedGraph]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"),
        ("function", "left"),
        ("id", "left"),
        ("ops", "right"),
        ("in/out", "center"),
        ("compile", "right"),
        ("hash", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True)
    for graph in graphs:
        function = graph.function + (f" (after line {graph.resumed_at})" if graph.resumed_at is not None else "")
        table.add_row(
            str(graph.index),
            function,
            graph.compile_id,
            str(graph.summary.op_count),
            f"{graph.summary.inputs}/{graph.summary.outputs}",
            f"{graph.compile_seconds:.3f} s",
            graph.summary.hash[:10],
        )
    return table


def _graph_details(graph: CapturedGraph) -> Group:
    ops = ", ".join(f"{op} ×{count}" if count > 1 else op for op, count in graph.summary.op_counts.items())
    shown = [guard for guard in graph.guards if not guard.ambient]
    guard_lines = [Text(f"  {guard.text}") for guard in shown[:MAX_GUARDS_SHOWN]]
    hidden = len(graph.guards) - len(guard_lines)
    if hidden:
        guard_lines.append(Text(f"  (+{hidden} on process state and bookkeeping; see --json)", style="dim"))
    return Group(
        Text(f"graph {graph.index}", style="bold"),
        _block(_labelled("ops:", ops or "none"), Text("guards:", style="bold"), *guard_lines),
    )


# -- recompiles ---------------------------------------------------------------------------


def recompiles_renderable(functions: list[FunctionCompiles]) -> Group:
    records = [record for function in functions for record in function.records]
    compiles = sum(function.compiles for function in functions)
    recompiles = sum(function.recompiles for function in functions)
    refused = sum(1 for record in records if record.cause == "recompile refused")
    header = Rule(
        f"Compiles ({compiles} of {_plural(len(functions), 'code object')}, "
        f"{_plural(recompiles, 'recompile')}, {refused} refused)",
        align="left",
    )
    return Group(header, *(_function_panel(function) for function in functions))


def _function_panel(function: FunctionCompiles) -> Panel:
    parts: list[Any] = []
    for record in function.records:
        parts.append(_record_entry(record))
    if (lost := function.lost_to_eager) is not None:
        parts.append(Text(f"Recompile limit hit: {lost}.", style="bold red"))
    for remedy in function.remedies:
        parts.append(_labelled("→", remedy, style="green"))
    name = function.function + (f" (resumed after line {function.resumed_at})" if function.resumed_at else "")
    title = (
        f"{name}  {where(function.filename, function.firstlineno)} — {_plural(function.compiles, 'compile')}, "
        f"{_plural(function.recompiles, 'recompile')}"
    )
    return Panel(Group(*parts), title=title, title_align="left")


def _record_entry(record: CompileRecord) -> Group:
    style = {"first compile": "", "recompile": "yellow", "recompile refused": "bold red"}[record.cause]
    head = Text(f"{record.compile_id}  ", style="bold")
    head.append(record.cause, style=style)
    if record.graph is not None:
        head.append(f"  graph {record.graph.hash[:10]}, {record.graph.inputs} in / {record.graph.outputs} out")
    if record.seconds is not None:
        head.append(f"  {record.seconds:.3f} s")
    body: list[Text] = []
    if record.outcome == "refused":
        body.append(Text(f"{record.detail}: not compiled, runs eagerly", style="red"))
    elif record.outcome != "compiled":
        body.append(Text(f"{record.outcome}: {record.detail}", style="dim"))
    if record.triggered_by is not None:
        trigger = Text(where(record.triggered_by.filename, record.triggered_by.lineno))
        if record.triggered_by.line:
            trigger.append(f"  {record.triggered_by.line}", style="cyan")
        body.append(_labelled("triggered by:", trigger))
    if record.failed_guards:
        cached = [entry.against for entry in record.failed_guards]
        body.append(Text(f"failed the guards of {', '.join(cached)}:", style="bold"))
        for distinct in distinct_failures(record.failed_guards):
            line = Text(f"  {distinct.text}")
            if len(distinct.against) < len(cached):  # which cached graphs, where it is not all of them
                line.append(f"  ({', '.join(distinct.against)})", style="dim")
            body.append(line)
    return Group(head, _block(*body)) if body else Group(head)


def _short_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith(".." + os.sep + "..") else relative


__all__ = ["Explanation", "explain_renderable", "recompiles_renderable", "to_text", "where"]
