"""report.html: the run's page says what report.json says, and user text on it is only ever text."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pt2kit.pages.document import ours
from minifier.pages.minify_page import REPORT_HTML, render_report_page, timeline_bars

HOSTILE = "<script>alert(1)</script>"


class Parsed(HTMLParser):
    """The parts of a page the tests read: tags seen, section ids, each section's text, code blocks' text, table cells."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.sections: dict[str, str] = {}
        self.codes: dict[str, str] = {}
        self.cells: list[str] = []
        self.rects = 0
        self.text = ""
        self._section: str | None = None
        self._code: str | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id")
            self.sections[self._section] = ""
        elif tag == "code" and a.get("id"):
            self._code = a["id"]
            self.codes[self._code] = ""
        elif tag == "td":
            self._cell = []
        elif tag == "rect":
            self.rects += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "code":
            self._code = None
        elif tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text += data
        if self._section is not None:
            self.sections[self._section] += data
        if self._code is not None:
            self.codes[self._code] += data
        if self._cell is not None:
            self._cell.append(data)


def hostile_run(tmp_path: Path) -> tuple[dict, Path]:
    run = tmp_path / f"run-x-{HOSTILE.replace('/', '_')}"
    (run / "work" / "origin").mkdir(parents=True)
    graph = "class Repro(torch.nn.Module):\n    def forward(self, x):\n        relu = torch.ops.aten.relu.default(x);  x = None  # {h}\n        return (relu,)\n"
    (run / "repro.py").write_text(f"# {HOSTILE}\nimport torch\n\n" + graph.format(h=HOSTILE))
    (run / "work" / "origin" / "repro.py").write_text("class Repro(torch.nn.Module):\n    def forward(self, x):\n        sin = torch.ops.aten.sin.default(x)\n        relu = torch.ops.aten.relu.default(sin);  sin = None\n        return (relu,)\n")
    report = {
        "status": "minified",
        "script": "/home/me/evil<script>alert(1).py",
        "failure": {"kind": "compile_error", "stage": "inductor", "exception": "RuntimeError", "message": f"bad {HOSTILE} & \"quotes\""},
        "stages": {"eager": "pass", "inductor": "fail"},
        "graph": {"boundary": "aot", "index": 0, "kind": "forward", "label": "g0.forward"},
        "graphs": [{"label": "g0.forward", "kind": "forward", "nodes": 2, "frame": {"filename": HOSTILE, "lineno": 3, "name": HOSTILE}, "stages": {"eager": "pass", "inductor": "fail"}, "first_failure": "inductor"}],
        "nodes_before": 2, "nodes_after": 1, "ops_after": ["aten.relu.default"],
        "inputs_after": [{"name": f"x{HOSTILE}", "shape": [2, 3], "stride": [3, 1], "dtype": "float32", "dynamic_dims": []}],
        "queries": 3, "seconds": 1.5, "repro": str(run / "repro.py"), "verified": True,
        "subsystem": {"backend": "inductor", "name": "lowerings", "application": 0, "detail": HOSTILE},
        "workaround": {"code": f"import torch  # {HOSTILE}\n", "what": HOSTILE, "verified": False},
        "notes": [HOSTILE],
        "timeline": [{"step": "warm-up", "seconds": 1.0}, {"step": f"g0 (2 nodes) through inductor {HOSTILE}", "seconds": 0.5, "ended": 1.2}, {"step": "remove_prefix · 2 nodes left · 1 queries · 1 nodes", "seconds": 0.2, "ended": 1.5}],
    }  # fmt: skip
    return report, run


def test_every_piece_of_user_text_on_the_page_is_escaped(tmp_path):
    report, run = hostile_run(tmp_path)
    text = render_report_page(report, run)
    parsed = Parsed(text)
    assert parsed.tags.count("script") == 1  # the page's own, nothing a user wrote
    assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert HOSTILE in parsed.sections["summary"]  # shown as text: the message, the notes
    assert HOSTILE in parsed.codes["repro-code"] and HOSTILE in parsed.codes["workaround-code"]
    assert "pt2kit: evil<script>alert(1).py" in parsed.text  # the title and the heading
    assert HOSTILE in parsed.sections["stages"] and HOSTILE in parsed.sections["inputs"] and HOSTILE in parsed.sections["below"]
    assert 'http-equiv="Content-Security-Policy"' in text and "default-src 'none'" in text


def test_the_page_is_one_file_with_nothing_to_fetch(tmp_path):
    report, run = hostile_run(tmp_path)
    text = render_report_page(report, run)
    for fetching in ("src=", "<link", "@import", "url(", "http://", "https://"):
        assert fetching not in text.replace('xmlns="http://www.w3.org/2000/svg"', ""), fetching


def test_the_kept_ops_are_highlighted_in_the_original_graph(tmp_path):
    report, run = hostile_run(tmp_path)
    text = render_report_page(report, run)
    marked = [line for line in text.split('<span class="line mark">')[1:]]
    assert len(marked) == 1 and "relu = torch.ops.aten.relu.default(sin)" in marked[0].split("</span>")[0]


def test_timeline_steps_become_bars_in_their_lanes():
    bars = timeline_bars([
        {"step": "warm-up", "seconds": 2.0},
        {"step": "running m.py with capture armed", "seconds": 5.0, "ended": 5.5},
        {"step": "g0 (9 nodes) through inductor", "seconds": 1.0, "ended": 6.0},
        {"step": "remove_prefix · 9 nodes left · 4 queries · 1 nodes", "seconds": 0.5, "ended": 7.0},
        {"step": "running repro.py elsewhere: torch alone", "seconds": 3.0, "ended": 10.0},
    ])  # fmt: skip
    assert [(b.phase, b.lane) for b in bars] == [("warm-up", "warm-up"), ("program", "program"), ("stages", "stages"), ("reduction", "remove_prefix"), ("checks", "checks")]
    assert [b.start for b in bars] == [0.0, 0.5, 5.0, 6.5, 7.0]


def test_a_users_file_is_never_taken_for_a_page(tmp_path):
    mine = tmp_path / "notes.html"
    mine.write_text("<!DOCTYPE html><p>my notes</p>")
    assert not ours(mine)
    assert ours(tmp_path / "absent.html")
    report, run = hostile_run(tmp_path)
    page = run / REPORT_HTML
    page.write_text(render_report_page(report, run))
    assert ours(page)


@pytest.mark.e2e
def test_a_run_leaves_a_report_html_that_says_what_report_json_says(model_script, tmp_path):
    script = model_script("planted_compile_error", name="evil<b>'&.py")
    out = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "minifier", "run", "--out", str(out), str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = next(out.glob("run-*"))
    assert f"report: {run / REPORT_HTML}" in done.stdout + done.stderr  # the terminal summary points at the page
    report = json.loads((run / "report.json").read_text())
    parsed = Parsed((run / REPORT_HTML).read_text())
    assert list(parsed.sections) == ["summary", "stages", "graph", "inputs", "timeline", "repro"]
    assert report["failure"]["message"] in parsed.sections["summary"]
    assert f"{report['nodes_before']} → {report['nodes_after']}" in parsed.sections["summary"]
    for row in report["graphs"]:
        assert row["label"] in parsed.cells
    statuses = [status for row in report["graphs"] for status in row["stages"].values()]
    assert sum(c == "fail" for c in parsed.cells) == statuses.count("fail")
    for i in report["inputs_after"]:
        assert i["name"] in parsed.cells and "[" + ", ".join(map(str, i["shape"])) + "]" in parsed.cells
    assert parsed.codes["repro-code"] == Path(report["repro"]).read_text()
    assert parsed.rects == len(report["timeline"])
    assert "pt2kit: evil<b>'&.py" in parsed.text and "<b>'" not in (run / REPORT_HTML).read_text()
