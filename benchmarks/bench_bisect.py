"""``minify bisect`` against torch's ``CompilerBisector.do_bisect`` on ``relu_compile_error.py``.

Both start from a fresh process and their own copy of one primed Inductor cache, in
the same run:

- **pt2kit**: ``minify bisect --json relu_compile_error.py`` (capture, each graph through
  the four stages in isolated workers, flakiness re-run, aot graphs);
- **torch**: a fresh process that runs ``CompilerBisector.do_bisect(fn)`` in-process on
  the same function, ``fn`` returning whether ``torch.compile(f)(x, w)`` succeeds.

Printed: seconds, what each found, and the ratio torch / pt2kit.

    python benchmarks/bench_bisect.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE = REPO / "examples" / "relu_compile_error.py"

TORCH_BISECT = r"""
import json, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import relu_compile_error as case  # sets the planted-bug config
from torch._inductor.compiler_bisector import CompilerBisector

torch.manual_seed(0)
x, w = torch.randn(8, 16), torch.randn(16, 16)
calls = 0

def fn():
    global calls
    calls += 1
    torch._dynamo.reset()
    try:
        torch.compile(case.f)(x, w)
        return True
    except Exception:
        return False

start = time.perf_counter()
result = CompilerBisector.do_bisect(fn)
print(json.dumps({"seconds_in_process": time.perf_counter() - start, "calls": calls,
                  "result": None if result is None else {"backend": result.backend, "subsystem": result.subsystem,
                                                         "bisect_number": result.bisect_number, "debug_info": str(result.debug_info)}}))
"""


def env(cache: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    return {**base, "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": str(cache)}


def main() -> None:
    where = Path(tempfile.mkdtemp(prefix="bench-bisect-"))
    shutil.copy(CASE, where)
    primed = where / "cache"
    subprocess.run([sys.executable, CASE.name], capture_output=True, cwd=where, env=env(primed), timeout=3600)

    shutil.copytree(primed, where / "cache-pt2kit")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "bisect", "--json", "--out", "runs", CASE.name],
        capture_output=True,
        text=True,
        cwd=where,
        env=env(where / "cache-pt2kit"),
        timeout=3600,
    )
    ours = time.perf_counter() - start
    report = json.loads(done.stdout)

    shutil.copytree(primed, where / "cache-torch")
    start = time.perf_counter()
    torch_run = subprocess.run(
        [sys.executable, "-c", TORCH_BISECT, str(where)],
        capture_output=True,
        text=True,
        cwd=where,
        env=env(where / "cache-torch"),
        timeout=3600,
    )
    theirs = time.perf_counter() - start
    found = json.loads(next(line for line in torch_run.stdout.splitlines() if line.startswith("{")))

    print(
        f"pt2kit minify bisect:        {ours:6.1f} s, {report['queries']} queries: first failure {report['failure']['stage']} "
        f"({report['failure']['kind']}: {report['failure']['exception']}) on {report['graph']['label']}"
    )
    print(
        f"torch CompilerBisector:      {theirs:6.1f} s ({found['seconds_in_process']:.1f} s bisecting), {found['calls']} calls: {found['result']}"
    )
    print(f"ratio torch / pt2kit: {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
