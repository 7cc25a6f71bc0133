"""``python -m explain --html FILE`` and ``RecompileProfiler.report(html=...)``: the page says what ``--json`` says.

One explain run (in-process, through the click command, as tests/explain/test_explain_cli.py
drives it) of a script with a graph break and recompiles writes the page every test of
content reads; the page is parsed with the stdlib ``html.parser`` and checked against
the ``--json`` document of the same run. The script's graph-break line and a triggering
line carry hostile comments, which the page must show as text. The other tests need no
script run (a refusal happens before the script runs) or drive the profiler directly.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner, Result

from explain import RecompileProfiler
from explain.__main__ import main
from explain.page import compile_tree, render_explain_page

HOSTILE = "<script>alert(1)</script>"
SCRIPT = f"""\
import torch


def normalize(x, n):
    x = x - x.mean() + n
    print("normalized")  # {HOSTILE}
    return x / x.std()


if __name__ == "__main__":
    compiled = torch.compile(normalize, backend="eager")
    compiled(torch.randn(8), 1)
    compiled(torch.randn(8), 2)  # <img src=x onerror=alert(1)>
    compiled(torch.randn(6, dtype=torch.float64), 2)
"""
VOID = {"meta", "br", "hr", "img", "input", "link"}


class Page(HTMLParser):
    """What the tests read of a page: every tag, section ids in order, the text under each id, dt/dd pairs."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.sections: list[str] = []
        self.text_of: dict[str, str] = {}
        self.facts: dict[str, list[tuple[str, str]]] = {}
        self.rects = 0
        self._open: list[tuple[str, str | None, list[str]]] = []
        self._dt: str | None = None
        self.feed(text)
        self.close()

    @property
    def text(self) -> str:
        return self.text_of["page"]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "section":
            self.sections.append(found["id"])
        self.rects += tag == "rect"
        if tag not in VOID:
            self._open.append((tag, "page" if tag == "html" else found.get("id"), []))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)  # <line .../> in the chart: nothing opens

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, id_, chunks = self._open.pop()
            text = "".join(chunks)
            if id_ is not None:
                self.text_of[id_] = text
            if name == "dt":
                self._dt = text
            elif name == "dd" and self._dt is not None:
                section = next((s for _, s, _ in reversed(self._open) if s in self.sections), None)
                self.facts.setdefault(section, []).append((self._dt, text))
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, _, chunks in self._open:
            chunks.append(data)


def slug(compile_id: str) -> str:
    return compile_id.replace("/", "-")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict, str, Result, Path]:
    """``python -m explain --json --html PAGE SCRIPT``: its JSON, its page's text, the run, the page's path."""
    folder = tmp_path_factory.mktemp("explain-page")
    script, html = folder / "normalize.py", folder / "page.html"
    script.write_text(SCRIPT)
    result = invoke("--json", "--html", str(html), str(script))
    assert result.exit_code == 0, result.stderr[-3000:]
    return json.loads(result.stdout), html.read_text(encoding="utf-8"), result, html


def test_the_page_shows_every_break_and_every_failing_guard_of_the_json(run):
    data, text, result, html = run
    page = Page(text)

    assert page.sections == ["summary", "timeline", "compiles", "breaks", "recompiles"]
    summary = dict(page.facts["summary"])
    assert summary["graph breaks"] == str(data["break_count"]) == "1"
    assert summary["recompiles"] == str(data["recompiles"]["recompile_count"])
    assert summary["compiles"] == str(data["recompiles"]["compile_count"])
    for index, brk in enumerate(data["breaks"]):
        shown = page.text_of[f"break-{index}"]
        assert brk["reason"] in shown and brk["remedy"] in shown and brk["source"] in shown
        assert f"{Path(brk['filename']).name}:{brk['lineno']}" in shown
        assert all(f"[{c}]" in shown for c in brk["compile_ids"])
    records = [r for f in data["recompiles"]["functions"] for r in f["records"]]
    recompiled = [r for r in records if r["cause"] != "first compile"]
    assert len(recompiled) == data["recompiles"]["recompile_count"] >= 3
    for record in recompiled:
        failures = [f["text"] for entry in record["failed_guards"] for f in entry["failures"]]
        assert failures  # every recompile here failed some guard; the page must list them all
        for where in (page.text_of[f"compile-{slug(record['compile_id'])}"], page.text_of["recompiles"]):
            assert all(failure in where for failure in failures), (record["compile_id"], failures)
    for graph in data["graphs"]:  # the compile tree: every compile, with its graph's guards
        compile_entry = page.text_of[f"compile-{slug(graph['compile_id'])}"]
        assert all(guard["text"] in compile_entry for guard in graph["guards"])
    assert page.rects == len(records)  # the timeline: one bar per timed compile
    assert result.stderr.splitlines()[-1] == f"page: {html}"  # stdout stays pure JSON


def test_the_compile_tree_lists_frames_in_the_order_they_first_compiled(run):
    data, text, _, _ = run
    ids = [g["compile_id"] for g in data["graphs"]]  # graphs: in the order compiles began
    frames = list(dict.fromkeys(c.rpartition("/")[0] for c in ids))  # frame ids are per process: not typed in
    tree = [name for frame in frames for name in (f"frame-{frame}", *(f"compile-{slug(c)}" for c in ids if c.startswith(f"{frame}/")))]
    where = {name: text.index(f'id="{name}"') for name in tree}

    assert len(frames) == 2 and [c.rpartition("/")[0] for c in ids] == [frames[0], frames[1], frames[0], frames[0], frames[1]]
    assert sorted(tree, key=where.get) == tree  # grouped per frame, each frame's compiles in order


def test_user_text_on_the_page_is_only_ever_text(run):
    data, text, _, _ = run
    page = Page(text)

    assert data["breaks"][0]["source"].endswith(HOSTILE)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert" not in text
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert page.tags.count("script") == 1 and page.tags.count("img") == 0  # the page's own script alone
    assert text.index("<script>") > text.rindex("</main>")  # at the end of the body
    assert HOSTILE in page.text_of["break-0"]  # shown, as text


def test_the_rich_report_names_the_page_on_its_own_line(tmp_path):
    script, html = tmp_path / "plain.py", tmp_path / "plain.html"
    script.write_text("import torch\ntorch.compile(lambda x: x.sin(), backend='eager')(torch.randn(2))\n")

    result = invoke("--html", str(html), str(script))

    assert result.exit_code == 0, result.stderr[-3000:]
    assert f"page: {html}" in result.stdout.splitlines()
    assert Page(html.read_text()).sections == ["summary", "timeline", "compiles", "breaks", "recompiles"]


def test_a_users_file_is_never_overwritten(tmp_path):
    mine, script = tmp_path / "mine.html", tmp_path / "side_effect.py"
    mine.write_text("<!DOCTYPE html><p>my notes, which mention pt2kit</p>")
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")

    for args in (["--html", str(mine)], ["--json", "--html", str(mine)]):
        result = invoke(*args, str(script))
        assert result.exit_code == 2
        assert result.stderr == f"explain: --html {mine} exists and is not a page pt2kit wrote: not overwriting it\n"
        assert result.stdout == ""
    assert mine.read_text() == "<!DOCTYPE html><p>my notes, which mention pt2kit</p>"
    assert not (tmp_path / "ran").exists()  # refused before the script ran
    nowhere = invoke("--html", str(tmp_path / "no" / "such" / "dir.html"), str(script))
    assert nowhere.exit_code == 2 and "no such directory" in nowhere.stderr and len(nowhere.stderr.splitlines()) == 1
    folder = invoke("--html", str(tmp_path), str(script))
    assert folder.exit_code == 2 and "is a directory" in folder.stderr


def test_a_page_pt2kit_wrote_is_replaced(tmp_path, run):
    _, text, _, _ = run
    old = tmp_path / "old.html"
    old.write_text(text)

    RecompileProfiler().report(html=old)

    assert Page(old.read_text()).sections == ["summary", "compiles", "recompiles"]


def double(x):
    return x * 2


def test_recompile_profiler_report_writes_a_page_with_every_failing_guard(tmp_path):
    compiled = torch.compile(double, backend="eager", recompile_limit=2)
    with RecompileProfiler() as prof:
        for dtype in (torch.float32, torch.float64, torch.float16):
            compiled(torch.ones(4, dtype=dtype))  # the float16 call hits the limit
    html = tmp_path / "prof.html"

    text = prof.report(html=html)

    assert text == prof.report()  # the text report is unchanged
    data, page = json.loads(prof.to_json()), Page(html.read_text())
    assert page.sections == ["summary", "timeline", "compiles", "recompiles"]
    function = next(f for f in data["functions"] if f["function"] == "double")
    assert [r["cause"] for r in function["records"]] == ["first compile", "recompile", "recompile refused"]
    for record in function["records"][1:]:
        entries = record["failed_guards"]
        failures = [f["text"] for entry in entries for f in entry["failures"]]
        assert failures and all(failure in page.text_of[f"compile-{slug(record['compile_id'])}"] for failure in failures)
        assert all(failure in page.text_of["recompiles"] for failure in failures)
    assert "recompile limit hit" in page.text_of["recompiles"] and function["limit_hit"]["lost_to_eager"] in page.text
    mine = tmp_path / "mine.html"
    mine.write_text("my own page")
    with pytest.raises(FileExistsError, match="not a page pt2kit wrote"):
        prof.report(html=mine)
    assert mine.read_text() == "my own page"


def test_a_compile_without_a_graph_is_placed_after_its_frames_previous_compile():
    def graph(compile_id: str, function: str) -> dict:
        return {"compile_id": compile_id, "function": function, "filename": "m.py", "firstlineno": 1, "resumed_at": None, "guards": []}

    def record(compile_id: str, cause: str) -> dict:
        return {"compile_id": compile_id, "cause": cause, "seconds": 0.1, "failed_guards": []}

    data = {
        "graphs": [graph("0/0", "f"), graph("1/0", "g"), graph("0/1", "f"), graph("1/1", "g")],
        "breaks": [],
        "recompiles": {"functions": [
            {"function": "f", "filename": "m.py", "firstlineno": 1, "resumed_at": None, "records": [record("0/0", "first compile"), record("0/1", "recompile"), record("0/2", "recompile refused")]},
            {"function": "g", "filename": "m.py", "firstlineno": 1, "resumed_at": None, "records": [record("1/0", "first compile"), record("1/1", "recompile")]},
        ]},
    }  # fmt: skip

    tree = compile_tree(data)

    assert [c.compile_id for c in tree.compiles] == ["0/0", "1/0", "0/1", "0/2", "1/1"]
    assert [[c.compile_id for c in frame.compiles] for frame in tree.frames] == [["0/0", "0/1", "0/2"], ["1/0", "1/1"]]
    assert Page(render_explain_page(data, "t")).rects == 5
