"""What the ``TORCHDYNAMO_REPRO_AFTER`` hook costs a healthy program.

One healthy program (a small MLP training step compiled with ``aot_eager``, and an
inference function compiled with Inductor), run in fresh processes:

- **off**: ``PT2KIT_AUTOLOAD=0``, torch alone;
- **installed**: pt2kit installed, no ``TORCHDYNAMO_REPRO_*`` set (its ``.pth`` finder only);
- **armed**: ``TORCHDYNAMO_REPRO_AFTER=aot`` (level 2) and ``=dynamo``, pt2kit in charge;
- **level 4**: ``TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4`` (every graph's first
  call checked against an fp64 reference).

Each process reports its compile phase (first calls) and its steady state (per call,
cache hits), best of several batches. Runs are interleaved (off, armed, off, armed...) so
the machine's drift hits both alike. Reported: the ratios against "off"; the goal is
below 1.1x for the armed steady state and the installed compile.

    python benchmarks/bench_hook.py [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = r"""
import json, sys, time
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
step = torch.compile(net, backend="aot_eager")
infer = torch.compile(lambda x: (x.sin() * 2 + x.cos()).sum(-1))
x = torch.randn(16, 32)

start = time.perf_counter()
step(x).square().mean().backward()
infer(x)
compile_seconds = time.perf_counter() - start

def batch(n=200):
    start = time.perf_counter()
    for _ in range(n):
        opt.zero_grad()
        step(x).square().mean().backward()
        opt.step()
        infer(x)
    return (time.perf_counter() - start) / n

steady = min(batch() for _ in range(5))
print(json.dumps({"compile": compile_seconds, "steady": steady}))
"""

SETTINGS = {
    "off": {"PT2KIT_AUTOLOAD": "0"},
    "installed": {"PT2KIT_AUTOLOAD": "1"},
    "armed_aot": {"PT2KIT_AUTOLOAD": "1", "TORCHDYNAMO_REPRO_AFTER": "aot"},
    "armed_dynamo": {"PT2KIT_AUTOLOAD": "1", "TORCHDYNAMO_REPRO_AFTER": "dynamo"},
    "level4": {"PT2KIT_AUTOLOAD": "1", "TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "4"},
}


def run(script: Path, setting: str, cache: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    env.update(
        {"TORCHINDUCTOR_CACHE_DIR": cache, "TORCHDYNAMO_REPRO_DIR": str(script.parent / "repros"), **SETTINGS[setting]}
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=script.parent, timeout=1200
    )
    if done.returncode != 0:
        raise SystemExit(f"{setting}: the healthy program failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    script = where / "healthy.py"
    script.write_text(PROGRAM)
    cache = str(where / "inductor-cache")
    run(script, "off", cache)  # prime Inductor's cache: every setting then finds it warm
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    for _ in range(options.rounds):
        for name in SETTINGS:
            samples[name].append(run(script, name, cache))
    summary = {}
    base_compile = statistics.median(s["compile"] for s in samples["off"])
    base_steady = statistics.median(s["steady"] for s in samples["off"])
    for name, rows in samples.items():
        compile_s = statistics.median(s["compile"] for s in rows)
        steady = statistics.median(s["steady"] for s in rows)
        summary[name] = {
            "compile_seconds": round(compile_s, 3),
            "steady_ms_per_step": round(steady * 1000, 3),
            "compile_ratio": round(compile_s / base_compile, 3),
            "steady_ratio": round(steady / base_steady, 3),
        }
        print(
            f"{name:13s} compile {compile_s:6.2f} s ({summary[name]['compile_ratio']:.2f}x)   steady {steady * 1000:7.3f} ms/step ({summary[name]['steady_ratio']:.2f}x)"
        )
    leftovers = list((where / "repros").glob("run-*")) if (where / "repros").exists() else []
    print(f"run directories left by a healthy program: {len(leftovers)}")
    if options.json:
        options.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
