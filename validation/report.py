"""The rich rendering of both reports (``python -m validation guards`` and ``sizes`` without ``--json``)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from .guards import GuardReport
    from .size_classes import SizeReport

_STYLE = {"sound": "green", "complete": "green", "unsound": "bold red", "incomplete": "yellow"}


def _status(status: str) -> Text:
    return Text(status, style=_STYLE.get(status, ""))


def guards_renderable(report: GuardReport) -> Any:
    parts: list[Any] = []
    headline = Text.assemble(
        "guard validation: ",
        _status(report.status),
        f"  ({len(report.compiles)} compile{'s' if len(report.compiles) != 1 else ''}, "
        f"validation {report.seconds:.2f} s for {report.compile_seconds:.2f} s of compiling)",
    )
    parts.append(headline)
    if report.compiles:
        table = Table(show_edge=False, pad_edge=False)
        for column in ("compile", "function", "status", "guards", "assumptions", "validation s", "compile s"):
            table.add_column(
                column, justify="right" if column.endswith(" s") or column in ("guards", "assumptions") else "left"
            )
        for check in report.compiles:
            table.add_row(
                check.compile_id,
                f"{check.function} ({check.filename.rsplit('/', 1)[-1]}:{check.firstlineno})",
                _status(check.status),
                str(check.guards),
                str(check.assumptions),
                f"{check.seconds:.3f}",
                f"{check.compile_seconds:.3f}",
            )
        parts.append(table)
    for check in report.compiles:
        for finding in check.findings:
            line = Text.assemble(
                (f"[{check.compile_id}] {finding.kind}", "bold red" if finding.unsound else "yellow"),
                f" ({finding.origin}): {finding.readable or finding.assumption}",
            )
            parts.append(line)
            if finding.where:
                parts.append(Text(f"    at {finding.where}", style="dim"))
            if finding.counterexample:
                sizes = ", ".join(f"{name} = {value}" for name, value in finding.counterexample.items())
                accepted = " (the installed guards accept these sizes)" if finding.accepted else ""
                parts.append(Text(f"    counterexample: {sizes}{accepted}"))
            if finding.confirmed is not None:
                parts.append(
                    Text(
                        f"    confirmed: {'yes' if finding.confirmed else 'no'}",
                        style="bold" if finding.confirmed else "",
                    )
                )
            if finding.detail:
                parts.append(Text(f"    {finding.detail}", style="dim"))
    if report.error:
        parts.append(Text(f"the program raised: {report.error}", style="yellow"))
    if not report.compiles:
        parts.append(Text("nothing was compiled", style="yellow"))
    return Group(*parts)


def sizes_renderable(report: SizeReport) -> Any:
    parts: list[Any] = []
    status = (
        report.status
        if not report.specializes_on or report.status == "complete"
        else f"incomplete: specializes on {', '.join(report.specializes_on)}"
    )
    parts.append(
        Text.assemble(
            f"size space of {report.target} over box {report.box[0]}..{report.box[1]}: ",
            _status(report.status) if status == report.status else Text(status, style="yellow"),
            f"  ({len(report.classes)} class{'es' if len(report.classes) != 1 else ''}, {report.traces} traces, {report.seconds:.2f} s)",
        )
    )
    table = Table(show_edge=False, pad_edge=False)
    for column in ("#", "outcome", "representative", "condition", "value-dependent"):
        table.add_column(column)
    for index, cls in enumerate(report.classes):
        table.add_row(
            str(index),
            Text(cls.outcome, style="green" if cls.outcome == "ok" else "red"),
            " ".join(str(list(shape)) for shape in cls.representative),
            cls.condition,
            "yes" if cls.value_dependent else "",
        )
    parts.append(table)
    if report.reason:
        parts.append(Text(f"incomplete: {report.reason}", style="yellow"))
    elif report.specializes_on:
        parts.append(Text(f"specializes on: {', '.join(report.specializes_on)}", style="yellow"))
    if report.brute_force is not None:
        bf = report.brute_force
        style = "green" if not bf["disagreements"] else "bold red"
        extra = []
        if bf.get("value_dependent"):
            extra.append(f"{bf['value_dependent']} in value-dependent classes, not compared")
        if bf.get("uncovered"):
            extra.append(f"{bf['uncovered']} not reached by the enumeration")
        suffix = f" ({'; '.join(extra)})" if extra else ""
        parts.append(
            Text(f"brute force: {bf['points']} points, {bf['disagreements']} disagreements{suffix}", style=style)
        )
        for example in bf.get("examples", []):
            parts.append(Text(f"    {example}", style="dim"))
    if report.recompiles is not None:
        rc = report.recompiles
        parts.append(
            Text(
                f"recompiles: {rc['entries']} cache entries for this range (recompile limit {rc['limit']}): "
                + ("fits" if rc["fits"] else "exceeds the limit"),
                style="green" if rc["fits"] else "bold red",
            )
        )
    return Group(*parts)


def to_text(renderable: Any, width: int = 120) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, force_terminal=False, color_system=None, soft_wrap=False).print(renderable)
    return buffer.getvalue()
