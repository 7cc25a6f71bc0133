"""The pages in a real browser: headless Chromium loads each one offline and we look at what it did.

Skipped where Chromium is absent (``make browser`` installs Debian's package; CI runs it).
``PT2KIT_SCREENSHOTS=DIR`` keeps the screenshots there (``make screenshots`` refreshes
the ones in docs/images).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.browser import CHROMIUM, Loaded, open_page
from minifier.pages.minify_page import REPORT_HTML

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make browser)")]

from support.paths import EXAMPLES
PNG = b"\x89PNG\r\n\x1a\n"


def looked_at(page: Path, name: str, sections: list[str]) -> Loaded:
    """Open ``page``; it loads with no error and no request, shows ``sections``, and gives a screenshot."""
    loaded = open_page(page)
    assert loaded.errors == [], loaded.errors
    assert loaded.requests == [], loaded.requests
    assert [s for s in sections if s not in loaded.section_ids] == [], loaded.section_ids
    assert loaded.screenshot.startswith(PNG) and len(loaded.screenshot) > 10_000
    assert set(loaded.clicked) <= {"copied"}  # every copy button copies
    keep = os.environ.get("PT2KIT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.png").write_bytes(loaded.screenshot)
    return loaded


def test_the_minify_page_of_a_run_loads_offline_with_no_error(model_script, tmp_path):
    script = model_script("planted_compile_error", train=True, name="model<script>.py")
    out = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "minifier", "run", "--json", "--out", str(out), str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = next(out.glob("run-*"))
    loaded = looked_at(run / REPORT_HTML, "minify", ["summary", "stages", "graph", "inputs", "timeline", "repro"])
    assert loaded.title == "pt2kit: model<script>.py"
    assert loaded.clicked == ["copied"]  # repro.py's copy button
    assert loaded.load_ms < 2000


def test_the_validation_guards_page_loads_offline_with_no_error(tmp_path):
    page = tmp_path / "guards.html"
    done = subprocess.run([sys.executable, "-m", "validation", "guards", "--html", str(page), str(EXAMPLES / "validation" / "planted_static_decision.py")], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]  # unsound
    loaded = looked_at(page, "validation", ["summary", "compiles"])
    assert loaded.load_ms < 2000


EXPLAINED = """
import torch


@torch.compile
def step(x, scale):
    y = torch.sin(x) * scale
    print("logging breaks the graph")  # <script>alert(1)</script>
    return torch.cos(y).sum()


for batch in (2, 3, 4):
    step(torch.randn(batch, 8), 2.0)
"""


def test_the_explain_page_loads_offline_with_no_error(tmp_path):
    script, page = tmp_path / "train<script>.py", tmp_path / "explain.html"
    script.write_text(EXPLAINED)
    done = subprocess.run([sys.executable, "-m", "explain", "--html", str(page), str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = looked_at(page, "explain", ["summary", "timeline", "compiles", "breaks", "recompiles"])
    assert loaded.load_ms < 2000
