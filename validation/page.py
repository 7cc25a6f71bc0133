"""``--html FILE``: a ``guards`` or ``sizes`` report as one self-contained page.

A page is drawn from the very dict ``--json`` prints (:meth:`GuardReport.to_dict
<validation.guards.GuardReport.to_dict>`, :meth:`SizeReport.to_dict
<validation.size_classes.SizeReport.to_dict>`), never from the report objects: nothing is
computed twice, so the page and the JSON cannot disagree, and a page can be drawn again
from a saved ``--json`` document (``render_guards_page(json.load(f), title)``).

Everything on it is built from :mod:`pt2kit.pages.document`'s blocks, which escape every
``str`` they are given: a source line the user wrote (``where``), a file name, an
exception message are only ever text. No HTML is spelled here around data.

The guards page, each part a section or block with a stable id:

- ``summary``: the verdict, the script, how many compiles were checked and how many of
  each verdict, the time validation took against the time compiling took;
- ``compiles``: one row per compile (its id as tlparse writes it, ``[frame/compile]``,
  its verdict coloured), then one block per compile, ``compile-F-C`` (``compile-0-0``):
  the guards translated and the assumptions checked, and each finding -- the assumption
  (readable and as ShapeEnv spells it), the user's line behind it, and for an unsound one
  the counterexample sizes that pass the installed guards and break it.

The sizes page: ``summary``; ``classes``, the equivalence classes with their minimal
representatives; ``brute-force`` and ``recompiles`` when those checks ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pt2kit.pages.document import Markup, Section, badge, facts, join, page, status_cell, table, tag

#: A verdict's colour: good (ok), bad, or neither -- ``incomplete`` is not a pass, and not a
#: counterexample either, so it is shown muted, never green.
_KIND = {"sound": "ok", "complete": "ok", "ok": "ok", "unsound": "bad", "error": "bad", "incomplete": "warn"}

#: Finding kinds that mean a counterexample (the rest mean "could not check").
_UNSOUND = ("unsound-guard", "static-decision", "guard-rejects-own-inputs")


def render_guards_page(data: dict[str, Any], title: str) -> str:
    """The page of ``python -m validation guards --json``'s document ``data``."""
    status = str(data.get("status") or "unknown")
    compiles = list(data.get("compiles") or [])
    sections = [
        Section("summary", "Summary", _guards_summary(data, compiles)),
        Section("compiles", "Compiles", _compiles(compiles)),
    ]
    subtitle = join(
        [badge(status, _KIND.get(status, "none")), "  python -m validation guards · ", data.get("target") or ""]
    )
    return page(title, subtitle, sections)


def render_sizes_page(data: dict[str, Any], title: str) -> str:
    """The page of ``python -m validation sizes --json``'s document ``data``."""
    status = str(data.get("status") or "unknown")
    sections = [Section("summary", "Summary", _sizes_summary(data)), Section("classes", "Size classes", _classes(data))]
    if data.get("brute_force") is not None:
        sections.append(Section("brute-force", "Brute force", _brute_force(data["brute_force"])))
    if data.get("recompiles") is not None:
        sections.append(
            Section("recompiles", "Recompiles", _recompiles(data["recompiles"], merged=bool(data.get("merged"))))
        )
    box = data.get("box") or ["?", "?"]
    subtitle = join(
        [
            badge(status, _KIND.get(status, "none")),
            f"  python -m validation sizes · {data.get('target') or '?'} over box {box[0]}..{box[1]}",
        ]
    )
    return page(title, subtitle, sections)


# -- guards ------------------------------------------------------------------------------


def _guards_summary(data: dict[str, Any], compiles: list[dict[str, Any]]) -> Markup:
    status = str(data.get("status") or "unknown")
    counts = {
        verdict: sum(1 for c in compiles if c.get("status") == verdict)
        for verdict in ("sound", "unsound", "incomplete")
    }
    seconds, compile_seconds = data.get("seconds"), data.get("compile_seconds")
    confirm = data.get("confirm")
    rows: list[tuple[str, object]] = [
        ("status", badge(status, _KIND.get(status, "none"))),
        ("script", data.get("target")),
        ("compiles checked", len(compiles)),
        ("sound", badge(counts["sound"], "ok" if counts["sound"] else "none")),
        ("unsound", badge(counts["unsound"], "bad" if counts["unsound"] else "none")),
        ("incomplete", badge(counts["incomplete"], "warn" if counts["incomplete"] else "none")),
        (
            "time",
            f"validation {seconds:.2f} s for {compile_seconds:.2f} s of compiling"
            if seconds is not None and compile_seconds is not None
            else None,
        ),
        (
            "--confirm",
            None
            if confirm is None
            else "yes: each counterexample was run, eager against the compiled entry"
            if confirm
            else "no: counterexamples were not run",
        ),
        ("the program raised", data.get("error")),
    ]
    body = facts(rows)
    if status == "incomplete":
        body = Markup(
            body
            + tag(
                "p",
                "Incomplete is never sound: something could not be checked exactly (see the findings below).",
                class_="note",
            )
        )
    return body


def _compiles(compiles: list[dict[str, Any]]) -> Markup:
    if not compiles:
        return tag("p", "Nothing was compiled.", class_="note")
    rows = []
    for c in compiles:
        rows.append(
            [
                tag("a", _compile_label(c), href=f"#{_compile_anchor(c)}"),
                _function(c),
                _verdict_cell(c.get("status")),
                c.get("guards"),
                c.get("assumptions"),
                len(c.get("findings") or []),
                _seconds(c.get("seconds")),
                _seconds(c.get("compile_seconds")),
            ]
        )
    overview = table(
        ["compile", "function", "verdict", "guards", "assumptions", "findings", "validation s", "compile s"],
        rows,
        class_="compiles",
    )
    return join([overview, *(_compile_block(c) for c in compiles)])


def _compile_block(c: dict[str, Any]) -> Markup:
    """One compile: its verdict, what was checked, and every finding (the counterexample of an unsound one)."""
    status = str(c.get("status") or "unknown")
    heading = tag("h3", _compile_label(c), " ", _function(c), " ", badge(status, _KIND.get(status, "none")))
    checked = facts(
        [
            (
                "guards",
                f"{c.get('guards')} shape guard parts of the installed guards, translated to Z3 (the hypotheses)",
            ),
            ("assumptions", f"{c.get('assumptions')} shape assumptions of the trace, each checked against them"),
            (
                "installed",
                None
                if c.get("installed") is None
                else "yes"
                if c.get("installed")
                else "no: torch did not install this entry",
            ),
            ("torch refused it", c.get("refused")),
        ]
    )
    findings = c.get("findings") or []
    if findings:
        body = join(_finding(f) for f in findings)
    else:
        body = tag(
            "p",
            "Every assumption is implied by the installed guards." if status == "sound" else "No findings.",
            class_="note",
        )
    return tag("div", heading, checked, body, id=_compile_anchor(c), class_="compile")


def _finding(f: dict[str, Any]) -> Markup:
    kind = str(f.get("kind") or "?")
    readable = f.get("readable") or f.get("assumption")
    head = tag(
        "p", badge(kind, "bad" if kind in _UNSOUND else "none"), f" ({f.get('origin') or '?'}) ", tag("code", readable)
    )
    counterexample = f.get("counterexample")
    rows: list[tuple[str, object]] = [
        ("assumption", tag("code", f.get("assumption"))),
        ("at", tag("code", f["where"]) if f.get("where") else None),
    ]
    if counterexample is not None:
        rows.append(("counterexample", _counterexample(counterexample, readable, kind)))
    rows += [
        ("confirmed", _confirmed(f.get("confirmed"), bool(f.get("refuted")))),
        ("detail", f.get("detail")),
    ]
    return tag("div", head, facts(rows), class_="finding")


def _counterexample(sizes: dict[str, Any], readable: object, kind: str) -> Markup:
    """The sizes as a table, and what they do: pass the installed guards, and break the assumption."""
    if kind == "guard-rejects-own-inputs":
        says = join(["the inputs the guards were built from; the guard ", tag("code", readable), " is false on them"])
    else:
        says = join(["these sizes pass the installed guards and break ", tag("code", readable)])
    cells = table(
        ["input size", "value"], ([tag("code", name), value] for name, value in sizes.items()), class_="counterexample"
    )
    return join([cells, tag("p", says, class_="note")])


def _confirmed(confirmed: bool | None, refuted: bool) -> Markup | None:
    if refuted:
        return badge("refuted: the real guards reject these sizes (a guard pt2kit could not read)", "none")
    if confirmed is None:
        return None
    return (
        badge("yes: eager and the compiled entry disagree", "bad")
        if confirmed
        else badge("no: eager and the compiled entry agreed here", "none")
    )


def _verdict_cell(status: object) -> Markup:
    """A verdict as a stage-table cell: sound as a pass, unsound as a failure, anything else muted."""
    text = str(status or "-")
    return status_cell({"sound": "pass", "ok": "pass", "complete": "pass", "unsound": "fail"}.get(text, "-"), text)


def _compile_label(c: dict[str, Any]) -> str:
    """A compile id as tlparse writes it: ``[frame/compile]``."""
    return f"[{c.get('compile_id') or '?'}]"


def _compile_anchor(c: dict[str, Any]) -> str:
    """``compile-0-0`` for compile ``0/0``: an id that needs no escaping in a link."""
    return "compile-" + "".join(ch if ch.isalnum() else "-" for ch in str(c.get("compile_id") or "unknown"))


def _function(c: dict[str, Any]) -> str:
    """``parity (script.py:14)``: the function, the file's name and the line it starts on."""
    file = str(c.get("file") or "?").replace("\\", "/").rsplit("/", 1)[-1]
    return f"{c.get('function') or '?'} ({file}:{c.get('line', '?')})"


def _seconds(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "-"


# -- sizes -------------------------------------------------------------------------------


def _sizes_summary(data: dict[str, Any]) -> Markup:
    status = str(data.get("status") or "unknown")
    classes = data.get("classes") or []
    box = data.get("box") or ["?", "?"]
    ok = sum(1 for c in classes if c.get("outcome") == "ok")
    rows: list[tuple[str, object]] = [
        ("status", badge(status, _KIND.get(status, "none"))),
        ("incomplete because", data.get("reason")),
        ("function", data.get("target")),
        ("ranks", ", ".join(map(str, data.get("ranks") or [])) or "-"),
        ("box", f"every dimension in {box[0]}..{box[1]}"),
        ("classes", f"{len(classes)} ({ok} ok, {len(classes) - ok} raising)"),
        (
            "traced as",
            "torch.compile(dynamic=True): 0/1 specialized, equal sizes duck-sized"
            if data.get("specialize")
            else "without 0/1 specialization or duck sizing",
        ),
        ("merged", "yes: classes with the same outcome joined" if data.get("merged") else None),
        ("specializes on", ", ".join(data["specializes_on"]) if data.get("specializes_on") else None),
        ("traces", data.get("traces")),
        ("seconds", data.get("seconds")),
    ]
    return facts(rows)


def _classes(data: dict[str, Any]) -> Markup:
    classes = data.get("classes") or []
    if not classes:
        return tag("p", "No class was found.", class_="note")
    rows = [
        [
            index,
            status_cell("pass" if c.get("outcome") == "ok" else "fail", str(c.get("outcome"))),
            _shapes(c.get("representative") or []),
            tag("code", c.get("condition")),
            "yes" if c.get("value_dependent") else "",
            c.get("decided_by") or "",
            c.get("message") or "",
        ]
        for index, c in enumerate(classes)
    ]
    note = tag(
        "p",
        "The representative is the class's minimal sizes, one shape per input (least total size first). A point belongs to the first class found whose condition holds there.",
        class_="note",
    )
    return join(
        [
            table(
                ["#", "outcome", "representative", "condition", "value-dependent", "decided by", "message"],
                rows,
                class_="classes",
            ),
            note,
        ]
    )


def _brute_force(bf: dict[str, Any]) -> Markup:
    disagreements = bf.get("disagreements") or 0
    body = facts(
        [
            ("points run", bf.get("points")),
            ("disagreements", badge(disagreements, "bad" if disagreements else "ok")),
            ("not reached by the enumeration", bf.get("uncovered") or None),
            ("in value-dependent classes, not compared", bf.get("value_dependent") or None),
        ]
    )
    examples = bf.get("examples") or []
    return join([body, tag("ul", *(tag("li", e) for e in examples))]) if examples else body


def _recompiles(rc: dict[str, Any], *, merged: bool) -> Markup:
    """The cache entries against the limit. Entries are counted before ``--merge`` (one per class
    that compiles), so with it the class numbers are not those of the merged table above."""
    fits = bool(rc.get("fits"))
    return facts(
        [
            ("cache entries", rc.get("entries")),
            ("recompile limit", rc.get("limit")),
            ("verdict", badge("fits" if fits else "exceeds the limit", "ok" if fits else "bad")),
            (
                "classes that compile" + (" (numbered before merging)" if merged else ""),
                ", ".join(f"#{i}" for i in rc.get("classes") or []) or "-",
            ),
            ("assumes", rc.get("assumes")),
            (
                "complete",
                None
                if rc.get("complete") is None
                else "yes"
                if rc.get("complete")
                else "no: the enumeration was incomplete",
            ),
        ]
    )


def _shapes(shapes: Iterable[Iterable[object]]) -> str:
    """``[3, 4] [4, 2]``: one shape per input, as the terminal table prints them."""
    return " ".join("[" + ", ".join(map(str, shape)) + "]" for shape in shapes)


__all__ = ["render_guards_page", "render_sizes_page"]
