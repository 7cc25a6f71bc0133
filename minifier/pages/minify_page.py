"""``report.html``: a ``minify run`` or ``minify bisect`` run directory as one page.

The page is drawn from the very data of ``report.json`` beside it (:func:`render_report_page`
takes that dict), plus the files the run directory already holds: ``repro.py`` and the
graph before minification (``work/origin/repro.py``). Nothing is recomputed, so the page
and the JSON never disagree, and a page can be drawn again from an old run directory
(:func:`write_report_page`).

What it shows, each a section with a stable id (the browser test finds them):

- ``summary``: the verdict, the failure, the sizes and counts;
- ``pending``: what was still to come when the report was written (the repro comes first);
- ``stages``: the stage table, each graph with its first failing stage;
- ``below``: the subsystem and the workaround, when the drill-down found them;
- ``releases``: the repro under other torch releases, and which fixed it (``--torch-versions``);
- ``graph``: the failing graph before and after, side by side; the ops kept are
  highlighted in the original;
- ``inputs``: the inputs after shrinking;
- ``timeline``: where the time went, as a chart;
- ``repro``: ``repro.py``, with a copy button.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from pt2kit.pages.charts import Bar, timeline_chart
from .issue import write_issue
from pt2kit.signature import shown
from pt2kit.pages.document import (
    Markup,
    Section,
    badge,
    code_block,
    copy_button,
    details,
    esc,
    facts,
    join,
    page,
    status_cell,
    table,
    tag,
    write_page,
)

#: The page's file name in a run directory, beside ``report.json``.
REPORT_HTML = "report.html"


def write_run_report(run_dir: Path, report: dict[str, Any]) -> Path | None:
    """``report.json``, and ``report.html`` and ``issue.md`` drawn from the same data; the page's path.

    The page is drawn from the JSON as written (paths and numbers as ``report.json``
    holds them). A page that cannot be drawn costs a note in ``report.json``, never the run.
    """
    data = json.loads(json.dumps(report, default=str))
    try:
        html_path: Path | None = write_report_page(run_dir, data)
    except Exception as e:  # noqa: BLE001 - the page is a view; the run's results stand without it
        html_path = None
        data["notes"] = [*data.get("notes", []), f"report.html was not written ({type(e).__name__}: {e})"]
    try:
        write_issue(run_dir, data)
    except Exception as e:  # noqa: BLE001 - like the page, a view: the run's results stand without it
        data["notes"] = [*data.get("notes", []), f"issue.md was not written ({type(e).__name__}: {e})"]
    (run_dir / "report.json").write_text(json.dumps(data, indent=2))
    return html_path


def write_report_page(run_dir: Path, report: dict[str, Any]) -> Path:
    """Draw ``report`` (``report.json``'s data) and the run directory's repros as ``run_dir/report.html``."""
    return write_page(run_dir / REPORT_HTML, render_report_page(report, run_dir))


def render_report_page(report: dict[str, Any], run_dir: Path) -> str:
    status = report.get("status") or "unknown"
    script = report.get("script") or run_dir.name
    command = "bisect" if "graphs" in report and "nodes_after" not in report else "run"
    repro = _read(Path(report["repro"])) if report.get("repro") else None
    origin = _read(run_dir / "work" / "origin" / "repro.py")
    sections = [Section("summary", "Summary", _summary(report))]
    if report.get("pending"):  # (the repro is written first; this run was stopped, or is still at it, past that)
        still = ", ".join(report["pending"])
        sections.append(Section("pending", "Still to come", tag("p", f"{still}: the same command again finishes it")))
    if report.get("graphs") or report.get("stages"):
        sections.append(Section("stages", "Stages", _stages(report)))
    if report.get("subsystem") or report.get("workaround"):
        sections.append(Section("below", "Below the stage", _below(report)))
    if report.get("versions"):
        sections.append(Section("releases", "Other torch releases", _releases(report)))
    if repro is not None:
        sections.append(Section("graph", "The failing graph, before and after", _before_after(origin, repro, report)))
    if report.get("inputs_after"):
        sections.append(Section("inputs", "Inputs after shrinking", _inputs(report["inputs_after"])))
    if report.get("timeline"):
        sections.append(Section("timeline", "Where the time went", timeline_chart(timeline_bars(report["timeline"]))))
    if repro is not None:
        sections.append(
            Section(
                "repro",
                "repro.py",
                Markup(copy_button("repro-code") + _run_line(report) + code_block(repro, id_="repro-code")),
            )
        )
    subtitle = join(
        [
            badge(status, "bad" if status in ("error", "interrupted", "flaky") else "ok"),
            f"  minify {command} · {script} · {run_dir}",
        ]
    )
    return page(f"pt2kit: {Path(script).name}", subtitle, sections)


def _summary(report: dict[str, Any]) -> Markup:
    failure = report.get("failure") or {}
    what = None
    if failure:
        what = join(
            [
                f"{failure.get('kind') or 'failure'} at ",
                tag("b", failure.get("stage") or "?"),
                f": {failure.get('exception') or ''}: {shown(failure.get('message'))}",
            ]
        )
    graph = report.get("graph") or {}
    rows = [
        ("status", report.get("status")),
        ("message", report.get("message")),
        ("failure", what),
        (
            "graph",
            f"{graph.get('label') or 'g' + str(graph.get('index'))} ({graph.get('boundary')}, {graph.get('kind')})"
            if graph
            else None,
        ),
        ("nodes", f"{report['nodes_before']} → {report['nodes_after']}" if "nodes_after" in report else None),
        ("ops kept", ", ".join(report["ops_after"]) if report.get("ops_after") else None),
        ("verified", _verified(report) if "verified" in report else None),
        ("failure rate", f"{report['failure_rate']:.0%}" if report.get("failure_rate") is not None else None),
        ("inputs", report.get("inputs")),
        ("queries", report.get("queries")),
        ("seconds", report.get("seconds")),
        ("kernel", report.get("kernel")),
        ("run directory", report.get("run_dir")),
    ]
    notes = report.get("notes") or []
    body = facts(rows)
    if notes:
        body = Markup(body + tag("h3", "Notes") + tag("ul", *(tag("li", n) for n in notes)))
    return body


def _verified(report: dict[str, Any]) -> Markup:
    return badge("yes: repro.py fails alone the same way", "ok") if report.get("verified") else badge("no", "bad")


def _stages(report: dict[str, Any]) -> Markup:
    graphs = report.get("graphs")
    if not graphs:
        stages = list(report["stages"])
        label = (report.get("graph") or {}).get("label") or "the failing graph"
        first = next((s for s in stages if report["stages"][s] == "fail"), None)
        return table(
            ["graph", *stages, "first failure"],
            [[label, *(status_cell(report["stages"][s]) for s in stages), first or "-"]],
            class_="stages",
        )
    stages = list(dict.fromkeys(s for g in graphs for s in g.get("stages", {})))
    rows = []
    for g in graphs:
        culprit = g.get("label") == (report.get("graph") or {}).get("label")
        name = tag("b", g["label"]) if culprit else esc(g["label"])
        nodes = g.get("nodes") if g.get("nodes") is not None else ""
        rows.append(
            [
                name,
                g.get("kind") or "",
                nodes,
                *(status_cell(g["stages"].get(s)) for s in stages),
                g.get("first_failure") or "-",
                _frame(g.get("frame")),
            ]
        )
    return table(["graph", "kind", "nodes", *stages, "first failure", "from"], rows, class_="stages")


def _frame(frame: dict[str, Any] | None) -> str:
    """Where dynamo captured the graph, as tlparse says it: ``file:line in function``."""
    if not frame:
        return ""
    return f"{Path(str(frame.get('filename') or '?')).name}:{frame.get('lineno', '?')} in {frame.get('name') or '?'}"


def _below(report: dict[str, Any]) -> Markup:
    parts = []
    subsystem = report.get("subsystem")
    if subsystem:
        parts.append(
            facts(
                [
                    ("backend", subsystem.get("backend")),
                    ("subsystem", tag("b", subsystem.get("name"))),
                    ("application", subsystem.get("application")),
                    ("detail", subsystem.get("detail")),
                ]
            )
        )
    workaround = report.get("workaround")
    if workaround:
        verified = (
            badge("verified on your program", "ok")
            if workaround.get("verified")
            else badge(f"verified on repro.py; the program {workaround['program']} with it", "none")
            if workaround.get("program")
            else badge("verified on repro.py", "ok")
            if workaround.get("verified_on") == "repro"
            else badge("not verified on the whole program", "none")
        )
        parts.append(tag("h3", "Workaround: ", workaround.get("what"), " ", verified))
        if workaround.get("code"):
            parts.append(Markup(copy_button("workaround-code") + code_block(workaround["code"], id_="workaround-code")))
    return join(parts)


def _releases(report: dict[str, Any]) -> Markup:
    """The repro under each torch release checked (``--torch-versions``), and what they say."""
    said = {None: badge("not checked", "none"), True: badge("fails", "bad"), False: badge("passes", "ok")}
    rows = [
        [v["torch"], v["where"], said[v.get("fails")], "yes" if v.get("same_failure") else "", v.get("note") or ""]
        for v in report["versions"]
    ]
    verdict = facts([("fixed in", report.get("fixed_in")), ("regressed in", report.get("regressed_in"))])
    return join([table(["torch", "where", "repro.py", "same failure", "note"], rows), verdict])


def _before_after(origin: str | None, repro: str, report: dict[str, Any]) -> Markup:
    after, _ = forward_source(repro)
    kept = assigned_names(after)
    after_block = tag("div", tag("h3", f"after: {report.get('nodes_after', '?')} op nodes"), code_block(after))
    if origin is None:
        return tag("div", after_block, class_="side")
    before, _ = forward_source(origin)
    marked = [n for n, line in enumerate(before.splitlines(), 1) if _assigned(line) in kept]
    before_block = tag(
        "div",
        tag("h3", f"before: {report.get('nodes_before', '?')} nodes, the {len(marked)} kept highlighted"),
        details("show the original graph", code_block(before, marked=marked), open_=len(before.splitlines()) <= 80),
    )
    return tag("div", before_block, after_block, class_="side")


def _inputs(inputs: list[dict[str, Any]]) -> Markup:
    rows = [
        [
            i.get("name"),
            i.get("dtype"),
            _dims(i.get("shape")),
            _dims(i.get("stride")),
            ", ".join(map(str, i.get("dynamic_dims") or [])) or "-",
        ]
        for i in inputs
    ]
    return table(["input", "dtype", "shape", "stride", "dynamic dims"], rows)


def _run_line(report: dict[str, Any]) -> Markup:
    return tag(
        "p",
        "Run ",
        tag("code", "python repro.py"),
        ": it exits non-zero when the failure reproduces (torch alone; no pt2kit needed).",
        class_="note",
    )


def _dims(dims: list[int] | None) -> str:
    return "-" if dims is None else "[" + ", ".join(map(str, dims)) + "]"


def timeline_bars(timeline: list[dict[str, Any]]) -> list[Bar]:
    """``report.json``'s timeline as chart bars: a step without an end ran from the start (a warm-up)."""
    bars = []
    for entry in timeline:
        step = str(entry.get("step"))
        seconds = float(entry.get("seconds") or 0.0)
        ended = entry.get("ended")
        start = max(0.0, float(ended) - seconds) if ended is not None else 0.0
        phase = _phase(step, ended is None)
        lane = step.partition(" · ")[0] if phase == "reduction" else phase
        bars.append(Bar(step, start, seconds, phase, lane))
    return bars


def _phase(step: str, unended: bool) -> str:
    """Which phase a timeline step belongs to, from the words its writer gave it."""
    if unended or step.startswith("warm-up"):
        return "warm-up"
    if "with capture armed" in step or step.startswith("running the program"):
        return "program"
    if " through " in step or "lowering to aot" in step:
        return "stages"
    if " · " in step and "queries" in step:
        return "reduction"
    if any(words in step for words in ("which part of", "confirming", "workaround", "subsystem", "bisector")):
        return "below the stage"
    if "elsewhere" in step or "verif" in step or "repro" in step or "profiling" in step:
        return "checks"
    return "other"


def forward_source(text: str) -> tuple[str, int]:
    """The ``forward`` of the repro's ``Repro`` module (its graph), and its first line; the whole text if none."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text, 1
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            lines = text.splitlines()[node.lineno - 1 : node.end_lineno]
            return "\n".join(lines), node.lineno
    return text, 1


def assigned_names(source: str) -> set[str]:
    return {name for line in source.splitlines() if (name := _assigned(line))}


def _assigned(line: str) -> str | None:
    """The name a graph line assigns (``relu = torch.ops...``), if it assigns one."""
    head, sep, _ = line.strip().partition(" = ")
    return head if sep and head.isidentifier() else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    """``python -m minifier.pages.minify_page RUN_DIR``: draw an existing run directory's page again."""
    import sys

    from pt2kit.errors import CorruptRecord

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not (Path(args[0]) / "report.json").is_file():
        print("usage: python -m minifier.pages.minify_page RUN_DIR (a directory holding report.json)", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    try:
        data = json.loads((run_dir / "report.json").read_text())
        if not isinstance(data, dict) or "status" not in data:
            raise ValueError("it holds no pt2kit report")
        print(write_report_page(run_dir, data))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        detail = e.strerror if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
        print(f"minify_page: cannot draw {run_dir / 'report.json'} ({detail})", file=sys.stderr)
        return CorruptRecord.exit_code
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
