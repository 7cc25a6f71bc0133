"""The run's page beside tlparse's, on one program, in one run.

The program is a GPT-2 training step whose forward graph (463 aot nodes) Inductor fails
to compile (``models/gpt2_train.py``). Each tool runs on an empty Inductor cache of its own:

- **tlparse**: ``TORCH_TRACE=DIR python gpt2_train.py``, then ``tlparse`` on the trace
  (what PT2 users open today): its output directory, its ``index.html``;
- **pt2kit**: ``minify run`` on the same program, then its ``report.html``.

For each page: bytes on disk (the whole directory for tlparse, which links out to
per-compile files), files, the load time of the first page in headless Chromium (the
browser test's driver, ``tests/browser.py``), console errors and network requests, and
the time to draw pt2kit's page again from ``report.json``. The bars it holds the page to:
under 1 MB, under 2 s.

    python benchmarks/bench_pages.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from support.browser import CHROMIUM, open_page


def size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files), len(files)


def loaded(page: Path) -> dict:
    best = None
    for _ in range(3):
        seen = open_page(page)
        best = seen if best is None or seen.load_ms < best.load_ms else best
    return {"load_ms": round(best.load_ms), "errors": len(best.errors), "requests": len(best.requests)}


def tlparse_page(work: Path) -> dict:
    trace = work / "trace"
    env = {
        **os.environ,
        "TORCH_TRACE": str(trace),
        "TORCHINDUCTOR_CACHE_DIR": str(work / "cache-tlparse"),
        "PT2KIT_AUTOLOAD": "0",
    }
    started = time.perf_counter()
    subprocess.run([sys.executable, "gpt2_train.py"], cwd=work, env=env, capture_output=True, timeout=1800)
    logs = sorted(trace.glob("*.log"))
    out = work / "tlparse"
    tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    subprocess.run(
        [tlparse, str(logs[0]), "-o", str(out), "--no-browser", "--overwrite"],
        cwd=work,
        capture_output=True,
        timeout=600,
        check=True,
    )
    seconds = time.perf_counter() - started
    total, files = size(out)
    return {
        "tool": "tlparse",
        "bytes": total,
        "files": files,
        "seconds_to_page": round(seconds, 1),
        **loaded(out / "index.html"),
    }


def pt2kit_page(work: Path) -> dict:
    from minifier.pages.minify_page import REPORT_HTML, render_report_page

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(work / "cache-pt2kit")}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--wait", "--json", "--out", "runs", "gpt2_train.py"],
        cwd=work,
        env=env,
        capture_output=True,
        timeout=1800,
    )
    seconds = time.perf_counter() - started
    run = next((work / "runs").glob("run-*"))
    report = json.loads((run / "report.json").read_text())
    drawn = time.perf_counter()
    render_report_page(report, run)
    draw_ms = (time.perf_counter() - drawn) * 1000
    total, files = size(run / REPORT_HTML)
    return {
        "tool": "pt2kit",
        "bytes": total,
        "files": files,
        "seconds_to_page": round(seconds, 1),
        "draw_ms": round(draw_ms, 1),
        "nodes_before": report.get("nodes_before"),
        **loaded(run / REPORT_HTML),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if CHROMIUM is None:
        print("chromium is not installed (make browser)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    shutil.copy(HERE / "models" / "gpt2_train.py", work)
    rows = [tlparse_page(work), pt2kit_page(work)]
    tl, ours = rows
    print(f"{'tool':8} {'bytes':>10} {'files':>6} {'load ms':>8} {'errors':>6} {'requests':>8} {'s to page':>9}")
    for r in rows:
        print(
            f"{r['tool']:8} {r['bytes']:>10,} {r['files']:>6} {r['load_ms']:>8} {r['errors']:>6} {r['requests']:>8} {r['seconds_to_page']:>9}"
        )
    print(
        f"pt2kit's page: {ours['bytes'] / tl['bytes']:.2f}x tlparse's bytes, {ours['load_ms'] / max(tl['load_ms'], 1):.2f}x its load time; drawn again from report.json in {ours['draw_ms']} ms"
    )
    print(f"bars: under 1 MB: {ours['bytes'] < 1_000_000}; under 2 s: {ours['load_ms'] < 2000}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
