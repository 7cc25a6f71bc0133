"""An explain report as one self-contained HTML page (``python -m explain --html FILE``).

The page is drawn from the very dict ``--json`` prints (:func:`render_explain_page` takes
it), or from a :class:`~explain.RecompileProfiler`'s ``to_dict()`` (which is that dict's
``recompiles`` part): nothing is recomputed, so the page and the JSON never disagree. It
is built only from :mod:`pt2kit.pages.document`'s blocks, which escape every ``str``
they are given, so a source line like ``# <script>alert(1)</script>`` is shown as text.

The JSON keeps three lists apart (graphs, compile records, breaks); the page joins them the
way tlparse shows a run, one entry per compile however often torch repeated its id
(:mod:`explain.tree`). Compile ids are shown ``[0/1]`` as tlparse shows them. What the page
shows, each a section with a stable id (a browser test finds them):

- ``summary``: the counts, the error the script raised, how the user's caches were kept;
- ``timeline``: compile time, one bar per compile (only when the data timed compiles);
- ``compiles``: the compile tree, frames in the order they first compiled, each compile
  with its cause, graph, time, triggering line, every failing guard, the graph breaks it
  hit and its guards;
- ``breaks``: every graph break: where, the source line, why, what to do, torch's words;
- ``recompiles``: every recompile with *all* its failing guards, the limits hit, remedies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pt2kit.pages.charts import Bar, timeline_chart
from pt2kit.pages.document import (
    Markup,
    Section,
    badge,
    code_block,
    details,
    esc,
    facts,
    join,
    ours,
    page,
    table,
    tag,
    write_page,
)

from .compiles import EntryFailures, distinct_failures
from .tree import Compile, CompileTree, Frame, compile_tree, frame_name, recompile_data

Data = dict[str, Any]

#: Lists longer than this (failing guards of one compile, ops of one graph) start collapsed.
OPEN_LIMIT = 12

#: A frame's compiles hang below it, as in tlparse's compile tree.
INDENTED = "margin:6px 0 12px 14px;padding-left:12px;border-left:3px solid #d0d7de"


def render_explain_page(data: Data, title: str) -> str:
    """The page of ``data``: ``python -m explain --json``'s dict, or ``RecompileProfiler.to_dict()``."""
    recompiles = recompile_data(data)
    tree = compile_tree(data)
    breaks = data.get("breaks")
    sections = [Section("summary", "Summary", _summary(data, recompiles, tree))]
    if any(c.seconds is not None for c in tree.compiles):
        sections.append(Section("timeline", "Compile time", _timeline(tree)))
    sections.append(Section("compiles", "Compile tree", _compile_tree(tree, breaks or [])))
    if breaks is not None:
        sections.append(Section("breaks", f"Graph breaks ({len(breaks)})", _breaks(breaks, tree)))
    if recompiles is not None:
        sections.append(
            Section("recompiles", f"Recompiles ({recompiles.get('recompile_count', 0)})", _recompiles(recompiles, tree))
        )
    return page(title, _subtitle(data, recompiles), sections)


def write_explain_page(path: str | os.PathLike[str], data: Data, title: str) -> Path:
    """Write the page of ``data`` to ``path``; a file there that is not a pt2kit page is never replaced."""
    path = Path(path)
    refusal = overwrite_refusal(path)
    if refusal is not None:
        raise FileExistsError(refusal)
    return write_page(path, render_explain_page(data, title))


def overwrite_refusal(path: Path) -> str | None:
    """Why writing a page to ``path`` would destroy a user's file, or None when ``path`` is free or a page of ours."""
    if ours(path):
        return None
    return f"{path} exists and is not a page pt2kit wrote: not overwriting it"


# -- the sections -------------------------------------------------------------------------


def _subtitle(data: Data, recompiles: Data | None) -> Markup:
    parts: list[object] = []
    if "break_count" in data:
        count = data["break_count"]
        parts += [badge(_plural(count, "graph break"), "bad" if count else "ok"), " "]
    if recompiles is not None:
        count = recompiles.get("recompile_count", 0)
        parts += [badge(_plural(count, "recompile"), "bad" if count else "ok"), " "]
    if data.get("error"):
        parts += [badge("the script raised", "bad"), " "]
    parts.append(f"explain · {data['target']}" if data.get("target") else "RecompileProfiler")
    return join(parts)


def _summary(data: Data, recompiles: Data | None, tree: CompileTree) -> Markup:
    recompiles = recompiles or {}
    seconds = data.get("compile_seconds")
    if seconds is None and tree.compiles:
        seconds = sum(c.seconds or 0.0 for c in tree.compiles)
    refused = recompiles.get("refused_count")
    isolation = data.get("isolation")
    rows = [
        ("target", data.get("target")),
        ("graphs", data.get("graph_count")),
        ("graph breaks", data.get("break_count")),
        ("frames", len(tree.frames)),
        ("compiles", recompiles.get("compile_count")),
        ("recompiles", recompiles.get("recompile_count")),
        ("refused", badge(f"{refused}: recompile limit hit", "bad") if refused else refused),
        ("compile time", f"{seconds:.3f} s" if seconds is not None else None),
        ("the script raised", badge(data["error"], "bad") if data.get("error") else None),
        ("your compiled caches", _isolation(isolation) if isolation else None),
    ]
    return facts(rows)


def _isolation(isolation: Data) -> Markup:
    called = "was" if isolation.get("reset_called") else "was not"
    notes = [tag("li", detail) for detail in isolation.get("details") or []]
    return join(
        [f"{isolation.get('strategy')}; torch._dynamo.reset() {called} called", tag("ul", *notes) if notes else ""]
    )


#: The timeline's colours: a first compile, and a recompile (tlparse's red for trouble).
COMPILE_PHASES = {"first compile": "#0072B2", "recompile": "#D55E00"}


def _timeline(tree: CompileTree) -> Markup:
    frame_of = {id(c): frame for frame in tree.frames for c in frame.compiles}
    bars, start = [], 0.0
    for c in tree.compiles:
        if c.seconds is None:
            continue
        frame = frame_of[id(c)]
        label = f"[{c.compile_id}] {frame.name} ({c.cause or 'compile'})"
        phase = "first compile" if c.cause in (None, "first compile") else "recompile"
        bars.append(Bar(label, start, c.seconds, phase, lane=f"[{frame.frame_id}] {frame.name}"))
        start += c.seconds
    note = tag(
        "p",
        "One bar per compile, one lane per frame, laid end to end: the data holds how long each compile took, not when "
        "it began, so the time the program ran between compiles is left out. A recompile refused at the "
        "recompile limit counts as a recompile.",
        class_="note",
    )
    return join([timeline_chart(bars, phases=COMPILE_PHASES), note])


def _compile_tree(tree: CompileTree, breaks: list[Data]) -> Markup:
    if not tree.frames:
        return tag("p", "Nothing was compiled.", class_="note")
    return join(_frame_entry(frame, tree, breaks) for frame in tree.frames)


def _frame_entry(frame: Frame, tree: CompileTree, breaks: list[Data]) -> Markup:
    summary = frame.summary or {}
    counts = (
        f" — {_plural(summary['compiles'], 'compile')}, {_plural(summary['recompiles'], 'recompile')}"
        if "compiles" in summary
        else ""
    )
    head = tag(
        "h3",
        badge(f"[{frame.frame_id}]"),
        " ",
        frame.name,
        " (",
        _where(frame.filename, frame.firstlineno),
        ")",
        counts,
    )
    parts: list[object] = [head]
    if (limit := summary.get("limit_hit")) is not None:
        parts.append(
            tag("p", badge("recompile limit hit", "bad"), " ", limit.get("lost_to_eager") or limit.get("compile_id"))
        )
    parts.extend(_compile_entry(c, tree, breaks) for c in frame.compiles)
    return tag("div", *parts, id=frame.anchor)


def _compile_entry(c: Compile, tree: CompileTree, breaks: list[Data]) -> Markup:
    record, graph = c.record or {}, c.graph
    head: list[object] = [tag("b", f"[{c.compile_id}]")]
    if c.cause:
        head += [" ", badge(c.cause, _cause_kind(c.cause))]
    if graph:
        head.append(f"  graph {str(graph.get('hash'))[:10]}, {graph.get('inputs')} in / {graph.get('outputs')} out")
    if c.seconds is not None:
        head.append(f"  {c.seconds:.3f} s")
    outcome = record.get("outcome")
    rows = [
        ("outcome", f"{outcome}: {record.get('detail')}" if outcome not in (None, "compiled") else None),
        ("triggered by", _user_line(record.get("triggered_by"))),
        ("ops", _ops(graph) if graph else None),
        ("backend time", f"{record['backend_seconds']:.3f} s" if record.get("backend_seconds") is not None else None),
        ("thread", record.get("thread") if record.get("thread") not in (None, "MainThread") else None),
    ]
    parts: list[object] = [tag("p", *head), facts(rows)]
    if record.get("failed_guards"):
        parts.append(_failing_guards(c, tree))
    if c.breaks:
        items = [
            tag(
                "li",
                tag("a", f"graph break {i}", href=f"#break-{i}"),
                ": ",
                _where(breaks[i].get("filename"), breaks[i].get("lineno")),
                " ",
                breaks[i].get("reason"),
            )
            for i in c.breaks
        ]
        parts.append(tag("ul", *items))
    for g in c.graphs:
        guards = g.get("guards") or []
        guard_rows = [
            # the readable text names the value as the user does; torch's own code is its tooltip
            [guard.get("kind"), tag("span", guard.get("text"), title=guard.get("raw"))]
            for guard in guards
        ]
        parts.append(details(f"guards of graph {g.get('index')} ({len(guards)})", table(["kind", "guard"], guard_rows)))
    return tag("div", *parts, id=c.anchor, style=INDENTED)


def _breaks(breaks: list[Data], tree: CompileTree) -> Markup:
    if not breaks:
        return tag("p", badge("none", "ok"), " No graph breaks.")
    return join(_break_entry(index, brk, tree.broke.get(index, [])) for index, brk in enumerate(breaks))


def _break_entry(index: int, brk: Data, broke: list[Compile]) -> Markup:
    why: list[object] = [brk.get("reason")]
    if brk.get("frame_skipped"):
        why += [" ", badge("the whole function runs eagerly", "bad")]
    doc = brk.get("doc_url")
    torch_says: list[object] = [brk.get("cause") or brk.get("gb_type")]
    if isinstance(doc, str) and doc.startswith("https://"):  # a link out, never a script: URL
        torch_says += [" — ", tag("a", doc, href=doc)]
    rows = [
        ("line", tag("code", brk["source"]) if brk.get("source") else None),
        ("why", join(why)),
        ("fix", brk.get("remedy") or "no known remedy"),
        ("torch", join(torch_says)),
        ("broke", join([_compile_link(c) for c in broke], " ")),
    ]
    parts: list[object] = [
        tag("h3", f"#{index}  ", _where(brk.get("filename"), brk.get("lineno")), f" in {brk.get('function') or '?'}"),
        facts(rows),
    ]
    stack = brk.get("user_stack") or []
    if len(stack) > 1:
        stack_rows = [
            [frame.get("function"), _where(frame.get("filename"), frame.get("lineno")), tag("code", frame.get("line"))]
            for frame in stack
        ]
        parts.append(details(f"user stack ({len(stack)} frames)", table(["function", "where", "line"], stack_rows)))
    if brk.get("raw_reason"):
        parts.append(details("torch's message", code_block(brk["raw_reason"])))
    return tag("div", *parts, id=f"break-{index}")


def _recompiles(recompiles: Data, tree: CompileTree) -> Markup:
    rows: list[list[object]] = [
        [
            _compile_link(c),
            frame.name,
            badge(c.cause, _cause_kind(c.cause)),
            _user_line((c.record or {}).get("triggered_by")),
            _failing_guards(c, tree),
        ]
        for frame in tree.frames
        for c in frame.compiles
        if c.record is not None and c.cause not in (None, "first compile")
    ]
    if not rows:
        return tag("p", badge("none", "ok"), " No recompiles.")
    parts: list[object] = [table(["compile", "function", "cause", "triggered by", "every guard it failed"], rows)]
    for function in recompiles.get("functions") or []:
        if (limit := function.get("limit_hit")) is not None:
            parts.append(
                tag(
                    "p", badge("recompile limit hit", "bad"), " ", limit.get("lost_to_eager") or limit.get("compile_id")
                )
            )
        if function.get("remedies"):
            name = frame_name(function.get("function"), function.get("resumed_at"))
            parts += [tag("h3", f"What to do about {name}"), _remedies(function["remedies"])]
    return join(parts)


# -- small pieces -------------------------------------------------------------------------


def _failing_guards(c: Compile, tree: CompileTree) -> Markup:
    """Every guard the call failed, each once, with the cached graphs it failed against; collapsed when long."""
    entries = [EntryFailures.from_dict(entry) for entry in (c.record or {}).get("failed_guards") or []]
    cached = [tree.against(entry.against, c) for entry in entries]
    links = {
        entry.against: _compile_link(found) if found else esc(f"[{entry.against}]")
        for entry, found in zip(entries, cached)
    }
    items = []
    for distinct in distinct_failures(entries):
        item: list[object] = [distinct.text]
        if len(distinct.against) < len(entries):  # say which graphs only where it is not all of them
            item += ["  (", join([links[a] for a in distinct.against], ", "), ")"]
        kind = "note" if distinct.failure is None else None
        items.append(tag("li", *item, title=distinct.failure.raw if distinct.failure else None, class_=kind))
    head = tag("div", "failed the guards of ", join(links.values(), ", "), f" ({len(items)} distinct):")
    body = join([head, tag("ul", *items)])
    return details(f"{len(items)} failing guards", body) if len(items) > OPEN_LIMIT else body


def _ops(graph: Data) -> Markup:
    counts = graph.get("op_counts") or {}
    text = ", ".join(f"{op} ×{n}" if n > 1 else op for op, n in counts.items()) or "none"
    total = graph.get("op_count", len(counts))
    return details(f"{total} ops", text) if len(counts) > OPEN_LIMIT else esc(f"{total}: {text}")


def _remedies(remedies: list[str]) -> Markup:
    return tag("ul", *(tag("li", tag("b", "→ "), remedy) for remedy in remedies))


def _user_line(frame: Data | None) -> Markup | None:
    """``file:line`` of a user frame and its source line, as code."""
    if not frame:
        return None
    source = frame.get("line")
    return join([_where(frame.get("filename"), frame.get("lineno")), "  ", tag("code", source) if source else ""])


def _where(filename: str | None, lineno: object) -> Markup:
    """``name.py:12``, the full path as its tooltip."""
    if not filename:
        return esc("?")
    return tag("span", f"{Path(filename).name}:{lineno}", title=filename)


def _compile_link(c: Compile | None) -> Markup:
    return tag("a", f"[{c.compile_id}]", href=f"#{c.anchor}") if c is not None else esc("?")


def _cause_kind(cause: str | None) -> str:
    return {"first compile": "ok", "recompile": "none"}.get(cause or "", "bad")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


__all__ = [
    "Compile",
    "CompileTree",
    "Frame",
    "compile_tree",
    "overwrite_refusal",
    "render_explain_page",
    "write_explain_page",
]
