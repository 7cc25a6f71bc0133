"""One self-contained HTML page: the building blocks every pt2kit page is made of.

A page must open from a CI artifact, offline, years later, and must never run what a
user's program printed. So:

- **one file**: CSS and the little script there is (the copy buttons) are inline, charts
  are inline SVG (:mod:`pt2kit.pages.charts`); nothing is fetched, and the page's
  Content-Security-Policy forbids fetching anything, so a mistake shows as a blocked
  request in the browser test rather than a silent network call;
- **escaped by construction**: every function here escapes the ``str`` it is given;
  only :class:`Markup` (HTML this module built from escaped parts) passes through. A
  source line like ``# <script>alert(1)</script>`` is shown as text, not run.

Pages follow tlparse's conventions where PT2 users already know them: compile ids
``[frame/compile]``, one section per concern, collapsible details for long code, the
stage table coloured pass/fail.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


class Markup(str):
    """HTML that is safe to embed: built here, from escaped text."""


def esc(value: object) -> Markup:
    """``value`` as HTML text: escaped unless it already is :class:`Markup`."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    return Markup(esc(sep).join(esc(p) for p in parts))


def tag(name: str, *children: object, **attrs: object) -> Markup:
    """``<name attrs>children</name>``; ``class_`` is ``class``, a ``None`` or ``False`` attribute is left out."""
    rendered = "".join(
        f" {key.rstrip('_').replace('_', '-')}" + ("" if value is True else f'="{esc(value)}"')
        for key, value in attrs.items()
        if value is not None and value is not False
    )
    return Markup(f"<{name}{rendered}>{join(children)}</{name}>")


def table(headers: list[object], rows: Iterable[list[object]], *, class_: str | None = None) -> Markup:
    head = tag("thead", tag("tr", *(tag("th", h) for h in headers)))
    body = tag(
        "tbody",
        *(
            tag(
                "tr",
                *(cell if isinstance(cell, Markup) and cell.startswith("<td") else tag("td", cell) for cell in row),
            )
            for row in rows
        ),
    )
    return tag("table", head, body, class_=class_)


def status_cell(status: str | None, text: str | None = None) -> Markup:
    """A stage-table cell: ``pass``, ``fail`` or not run, coloured as tlparse colours them."""
    kind = (
        "none"
        if not status or status in ("-", "skipped", "not run")
        else "ok"
        if status in ("pass", "sound", "ok")
        else "warn"
        if status in ("incomplete", "other")
        else "bad"
    )
    return tag("td", text if text is not None else (status or "-"), class_=f"status {kind}")


def badge(text: object, kind: str = "none") -> Markup:
    return tag("span", text, class_=f"badge {kind}")


def code_block(text: str, *, marked: Iterable[int] = (), id_: str | None = None) -> Markup:
    """``text`` as numbered lines; lines in ``marked`` (1-based) highlighted."""
    marked = set(marked)
    lines = [
        tag("span", line + "\n", class_="line mark" if number in marked else "line")
        for number, line in enumerate(text.splitlines(), 1)
    ]
    return tag("pre", tag("code", *lines, id=id_), class_="code")


def copy_button(target_id: str, label: str = "copy") -> Markup:
    return tag("button", label, class_="copy", type="button", data_target=target_id)


def details(summary: object, *body: object, open_: bool = False) -> Markup:
    return tag("details", tag("summary", summary), *body, open=open_)


def facts(items: Iterable[tuple[str, object]]) -> Markup:
    """A definition list of short facts (label, value)."""
    return tag(
        "dl",
        *(Markup(tag("dt", label) + tag("dd", value)) for label, value in items if value is not None),
        class_="facts",
    )


@dataclass
class Section:
    id: str
    title: str
    body: Markup


def page(title: str, subtitle: object, sections: list[Section]) -> str:
    """The whole document: head with its inline style and policy, a contents line, the sections."""
    nav = tag("nav", *(tag("a", s.title, href=f"#{s.id}") for s in sections))
    body = [tag("section", tag("h2", s.title), s.body, id=s.id) for s in sections]
    return (
        "<!DOCTYPE html>\n"
        + tag(
            "html",
            tag(
                "head",
                Markup('<meta charset="utf-8">'),
                Markup(f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'),
                Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                Markup(f'<meta name="generator" content="{GENERATOR}">'),
                tag("title", title),
                Markup(f"<style>{STYLE}</style>"),
            ),
            tag(
                "body",
                tag("header", tag("h1", title), tag("p", subtitle, class_="subtitle"), nav),
                tag("main", *body),
                Markup(f"<script>{SCRIPT}</script>"),
            ),
            lang="en",
        )
        + "\n"
    )


def ours(path: Path) -> bool:
    """Is ``path`` absent, or a page pt2kit wrote (and so ours to replace)? A user's file never is."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(2000)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return head.startswith("<!DOCTYPE html>") and f'<meta name="generator" content="{GENERATOR}">' in head


def page_path(given: str | os.PathLike[str]) -> Path:
    """A ``--html FILE`` argument, checked before anything runs: absent, or a page of pt2kit's (else UsageError)."""
    from ..errors import UsageError

    path = Path(given).expanduser().absolute()
    if path.is_dir():
        raise UsageError(f"--html {given} is a directory: give a file name for the page")
    if not path.parent.is_dir():
        raise UsageError(f"--html {given}: no such directory {path.parent}")
    if not ours(path):
        raise UsageError(f"--html {given} exists and is not a page pt2kit wrote: not overwriting it")
    return path


def write_page(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a reader never sees half a page)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path


#: The mark of a page pt2kit wrote (:func:`ours`).
GENERATOR = "pt2kit"

#: Nothing from the network, nothing from files: only the page's own inline style and script.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
:root{--ok:#1a7f37;--okbg:#dafbe1;--bad:#cf222e;--badbg:#ffebe9;--warn:#9a6700;--warnbg:#fff8c5;--mute:#6e7781;--line:#d0d7de;--mark:#fff8c5}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
.subtitle{margin:4px 0 8px;color:#d0d7de}nav a{color:#9ecbff;margin-right:14px;text-decoration:none;font-size:13px}
main{padding:8px 24px 40px;max-width:1400px}section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:12px 16px;margin:14px 0}
h2{font-size:16px;margin:0 0 10px}h3{font-size:14px;margin:12px 0 6px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.status{text-align:center;font-weight:600}td.ok{color:var(--ok);background:var(--okbg)}
td.bad{color:var(--bad);background:var(--badbg)}td.warn{color:var(--warn);background:var(--warnbg)}td.none{color:var(--mute)}
.badge{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:600;background:#eaeef2;color:#1f2328}
.badge.ok{background:var(--okbg);color:var(--ok)}.badge.bad{background:var(--badbg);color:var(--bad)}.badge.warn{background:var(--warnbg);color:var(--warn)}
pre.code{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:8px 0;overflow:auto;max-height:560px;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;counter-reset:line}
.line{display:block;padding:0 10px 0 0;white-space:pre}.line::before{counter-increment:line;content:counter(line);display:inline-block;width:3.5em;padding-right:1em;text-align:right;color:var(--mute)}
.line.mark{background:var(--mark);font-weight:600}
.side{display:grid;grid-template-columns:1fr 1fr;gap:12px}.side>div{min-width:0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}dt{color:var(--mute)}dd{margin:0}
button.copy{float:right;font-size:12px;padding:2px 10px;border:1px solid var(--line);border-radius:6px;background:#fff;cursor:pointer}
.note{color:var(--mute)}.chart{width:100%;height:auto}.legend span{margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
summary{cursor:pointer;font-weight:600}
"""

SCRIPT = """
function pt2kitCopy(text) {
  var area = document.createElement('textarea');
  area.value = text;
  document.body.appendChild(area);
  area.select();
  var copied = false;
  try { copied = document.execCommand('copy'); } catch (e) { copied = false; }
  document.body.removeChild(area);
  return copied;
}
document.querySelectorAll('button.copy').forEach(function (button) {
  button.addEventListener('click', function () {
    var text = document.getElementById(button.dataset.target).innerText;
    var done = function () { button.textContent = 'copied'; };
    var fallback = function () { button.textContent = pt2kitCopy(text) ? 'copied' : 'select and copy'; };
    if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, fallback); } else { fallback(); }
  });
});
"""
