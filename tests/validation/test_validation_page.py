"""``python -m validation guards|sizes --html FILE``: the page says what ``--json`` says, and user text on it is only text.

The runs go through the click commands in-process (as most of test_validation_cli.py
does), with ``--json`` and ``--html`` together: the JSON document on stdout is the
reference the written page is read back against, with the stdlib ``html.parser``. The
unsound program is test_validation_cli.py's planted static decision (pytorch#169602's
kind), with ``# <script>alert(1)</script>`` on the very line the finding points at.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.paths import EXAMPLES
from pt2kit.pages.document import ours, write_page
from validation.__main__ import main
from validation.page import render_guards_page, render_sizes_page

SHAPES = EXAMPLES / "validation" / "shapes.py"
HOSTILE = "<script>alert(1)</script>"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}

#: planted_static_decision.py's program, the hostile comment on the line the finding points at.
PLANTED = f"""\
import torch
from pt2kit.seams.shape_env_faults import wrong_mod_bounds


def parity(x):
    if x.shape[0] % 2 == 0:  # {HOSTILE}
        return x * 2
    return x + 1


compiled = torch.compile(parity, dynamic=True, backend="eager")
with wrong_mod_bounds(2):
    compiled(torch.randn(4))
print("the script's own print")
"""


class Parsed(HTMLParser):
    """What a reader of the page sees: the tags, each element id's text, facts as (label, value), table rows as (text, class) cells."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.ids: dict[str, str] = {}
        self.sections: list[str] = []
        self.facts: dict[str, dict[str, str]] = {}  # section id -> label -> value
        self.tables: dict[str, list[list[tuple[str, str]]]] = {}  # table class -> body rows
        self.text = ""
        self._open: list[tuple[str, str | None]] = []
        self._section: str | None = None
        self._label: list[str] | None = None
        self._pending = ""
        self._value: list[str] | None = None
        self._cell: list[str] | None = None
        self._cell_class = ""
        self._rows: list[list[tuple[str, str]]] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if tag in VOID:
            return
        self._open.append((tag, a.get("id")))
        if a.get("id"):
            self.ids.setdefault(a["id"], "")
        if tag == "section":
            self._section = a.get("id")
            self.sections.append(str(self._section))
        elif tag == "dt":
            self._label = []
        elif tag == "dd" and self._value is None:
            self._value = []
        elif tag == "table" and self._rows is None:
            self._rows = self.tables.setdefault(a.get("class") or "", [])
        elif tag == "tr" and self._rows is not None and self._cell is None:
            self._rows.append([])
        elif tag == "td" and self._cell is None:
            self._cell, self._cell_class = [], a.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, _ = self._open.pop()
            if name == tag:
                break
        if tag == "dt" and self._label is not None:
            self._pending = "".join(self._label).strip()
            self._label = None
        elif tag == "dd" and self._value is not None and not any(name == "dd" for name, _ in self._open):
            self.facts.setdefault(str(self._section), {})[self._pending] = "".join(self._value).strip()
            self._value = None
        elif tag == "td" and self._cell is not None and not any(name == "td" for name, _ in self._open):
            assert self._rows is not None
            self._rows[-1].append(("".join(self._cell), self._cell_class))
            self._cell = None
        elif tag == "table" and not any(name == "table" for name, _ in self._open):
            assert self._rows is not None
            self._rows[:] = [row for row in self._rows if row]  # the header row has no td
            self._rows = None

    def handle_data(self, data: str) -> None:
        self.text += data
        for _, id_ in self._open:
            if id_:
                self.ids[id_] += data
        for part in (self._label, self._value, self._cell):
            if part is not None:
                part.append(data)

    def rows(self, class_: str) -> list[list[str]]:
        return [[text for text, _ in row] for row in self.tables.get(class_, [])]


def _invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _anchor(compile_id: str) -> str:
    return "compile-" + compile_id.replace("/", "-")


@pytest.fixture(scope="module")
def unsound(tmp_path_factory):
    """``guards --json --confirm --html`` on the planted program: (its JSON document, the page, the run)."""
    where = tmp_path_factory.mktemp("planted")
    script, page = where / "evil<b>'&.py", where / "guards.html"
    script.write_text(PLANTED)
    result = _invoke("guards", "--json", "--confirm", "--html", page, script)
    return json.loads(result.stdout), page, result


def test_an_unsound_compile_on_the_page_is_the_json_verdict_with_its_counterexample(unsound):
    report, page, result = unsound
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == f"page: {page}"  # stdout is the JSON document alone
    parsed = Parsed(page.read_text())
    assert parsed.sections == ["summary", "compiles"]
    assert parsed.facts["summary"]["status"] == report["status"] == "unsound"
    assert parsed.facts["summary"]["compiles checked"] == str(len(report["compiles"])) == "1"
    assert (parsed.facts["summary"]["unsound"], parsed.facts["summary"]["sound"]) == ("1", "0")
    (compile_,) = report["compiles"]
    (overview,) = parsed.tables["compiles"]
    assert overview[0][0] == f"[{compile_['compile_id']}]"  # tlparse's [frame/compile]
    assert overview[2] == ("unsound", "status bad")
    assert [overview[3][0], overview[4][0]] == [str(compile_["guards"]), str(compile_["assumptions"])]
    (finding,) = [f for f in compile_["findings"] if f["kind"] == "static-decision"]
    block = parsed.ids[_anchor(compile_["compile_id"])]
    assert finding["readable"] in block and finding["assumption"] in block and "yes: eager and the compiled entry disagree" in block
    assert f"break {finding['readable']}" in block  # which assumption the counterexample breaks
    assert parsed.rows("counterexample") == [[name, str(value)] for name, value in finding["counterexample"].items()] == [["L['x'].size()[0]", "3"]]


def test_a_sound_run_prints_the_page_path_after_the_report(tmp_path):
    page = tmp_path / "sound.html"
    result = _invoke("guards", "--html", page, SHAPES)
    assert result.exit_code == 0, result.output
    assert "guard validation: sound" in result.stdout and result.stdout.splitlines()[-1] == f"page: {page}"
    parsed = Parsed(page.read_text())
    assert parsed.facts["summary"]["status"] == "sound" and parsed.facts["summary"]["sound"] == "2"
    verdicts = [row[2] for row in parsed.tables["compiles"]]
    assert verdicts == [("sound", "status ok")] * 2
    for row in parsed.tables["compiles"]:
        compile_id = row[0][0].strip("[]")
        assert "Every assumption is implied by the installed guards." in parsed.ids[_anchor(compile_id)]


def test_user_text_from_a_run_is_text_and_the_only_script_is_the_pages_own(unsound):
    report, page, _ = unsound
    text = page.read_text()
    parsed = Parsed(text)
    (finding,) = [f for c in report["compiles"] for f in c["findings"]]
    assert HOSTILE in finding["where"]  # the user's line, comment and all
    assert parsed.tags.count("script") == 1 and text.lower().count("<script") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert HOSTILE in parsed.ids[_anchor(report["compiles"][0]["compile_id"])]
    assert "pt2kit guards: evil<b>'&.py" in parsed.text and "<b>'" not in text


def test_every_field_of_the_json_is_escaped_on_both_pages():
    guards = {
        "status": "unsound", "target": HOSTILE, "confirm": False, "seconds": 0.1, "compile_seconds": 1.0, "error": HOSTILE,
        "compiles": [{
            "function": HOSTILE, "compile_id": f"0/0{HOSTILE}", "file": f"/x/{HOSTILE}.py", "line": 3, "status": HOSTILE,
            "guards": 1, "assumptions": 1, "seconds": 0.1, "compile_seconds": 1.0, "installed": False, "refused": HOSTILE,
            "findings": [{"kind": HOSTILE, "assumption": HOSTILE, "readable": HOSTILE, "origin": HOSTILE, "counterexample": {HOSTILE: 3},
                          "confirmed": None, "detail": HOSTILE, "where": HOSTILE}],
        }],
    }  # fmt: skip
    sizes = {
        "status": "incomplete", "target": HOSTILE, "ranks": [1], "box": [0, 4], "specialize": True, "merged": False, "reason": HOSTILE,
        "classes": [{"outcome": HOSTILE, "condition": HOSTILE, "representative": [[0]], "value_dependent": False, "decided_by": HOSTILE, "message": HOSTILE}],
        "brute_force": {"points": 5, "disagreements": 1, "uncovered": 0, "value_dependent": 0, "examples": [HOSTILE]},
        "specializes_on": [HOSTILE], "traces": 1, "seconds": 0.1,
        "recompiles": {"entries": 1, "limit": 8, "fits": True, "classes": [0], "assumes": HOSTILE, "complete": False},
    }  # fmt: skip
    for text in (render_guards_page(guards, f"pt2kit {HOSTILE}"), render_sizes_page(sizes, f"pt2kit {HOSTILE}")):
        parsed = Parsed(text)
        assert parsed.tags.count("script") == 1 and text.lower().count("<script") == 1
        assert "<script>alert" not in text and parsed.text.count(HOSTILE) >= 8
        assert all(id_.replace("-", "").isalnum() for id_ in parsed.ids)  # ids (and links to them) stay plain
        assert 'http-equiv="Content-Security-Policy"' in text and '<meta name="generator" content="pt2kit">' in text[:2000]


@pytest.mark.parametrize("command", ["guards", "sizes"])
def test_a_users_file_is_never_overwritten_and_nothing_runs(tmp_path, command):
    mine, marker = tmp_path / "notes.html", tmp_path / "ran"
    mine.write_text("<!DOCTYPE html><p>my notes, not a pt2kit page</p>")
    script = tmp_path / "marks.py"
    script.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n\ndef f(x):\n    return x\n")
    args = ["guards", "--html", mine, script] if command == "guards" else ["sizes", "--fn", f"{script}:f", "--ranks", "1", "--box", "0:2", "--html", mine]
    result = _invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"validation: --html {mine} exists and is not a page pt2kit wrote: not overwriting it"]
    assert mine.read_text() == "<!DOCTYPE html><p>my notes, not a pt2kit page</p>" and not marker.exists()


def test_sizes_page_holds_the_classes_and_replaces_an_old_page(tmp_path):
    page = write_page(tmp_path / "sizes.html", render_guards_page({"status": "sound", "compiles": []}, "an older pt2kit page"))
    result = _invoke("sizes", "--json", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "0:12", "--check-brute-force", "--recompiles", "--html", page)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert result.stderr.splitlines()[-1] == f"page: {page}" and ours(page)
    parsed = Parsed(page.read_text())
    assert parsed.sections == ["summary", "classes", "brute-force", "recompiles"]
    assert parsed.facts["summary"]["status"] == report["status"] == "complete"
    rows = parsed.rows("classes")
    assert [row[:4] for row in rows] == [
        [str(i), c["outcome"], " ".join(str(shape) for shape in c["representative"]), c["condition"]] for i, c in enumerate(report["classes"])
    ]
    assert [row[1] for row in rows] == ["ok", "RuntimeError", "RuntimeError", "ok"]  # view(-1, 4) over 0..12
    assert parsed.facts["brute-force"]["points run"] == str(report["brute_force"]["points"]) == "13"
    assert parsed.facts["recompiles"]["classes that compile"] == ", ".join(f"#{i}" for i in report["recompiles"]["classes"])


def test_a_page_that_cannot_be_written_costs_one_line_never_the_verdict(tmp_path, monkeypatch):
    import validation.__main__ as cli

    def refuse(path: Path, text: str) -> Path:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cli, "write_page", refuse)
    page = tmp_path / "sizes.html"
    result = _invoke("sizes", "--json", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "0:5", "--html", page)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "complete"
    assert result.stderr.splitlines()[-1].startswith(f"validation: the page was not written to {page} (PermissionError")
    assert not page.exists()


@pytest.mark.parametrize("where, says", [("missing/dir/page.html", "no such directory"), (".", "is a directory")])
def test_an_html_target_that_cannot_be_a_page_is_a_usage_error(tmp_path, where, says):
    result = _invoke("sizes", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "0:3", "--html", tmp_path / where)
    assert result.exit_code == 2 and says in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_script_that_raised_before_compiling_gets_a_page_saying_so(tmp_path):
    script, page = tmp_path / "early.py", tmp_path / "early.html"
    script.write_text("raise ValueError('broken before any compile')\n")
    result = _invoke("guards", "--json", "--html", page, script)
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert f"page: {page}" in result.stderr.splitlines()
    parsed = Parsed(page.read_text())
    assert parsed.facts["summary"]["status"] == report["status"] == "error"
    assert parsed.facts["summary"]["the program raised"] == report["error"]
    assert "Nothing was compiled." in parsed.ids["compiles"]
