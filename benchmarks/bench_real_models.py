"""pt2kit on real models, side by side with torch's own minifier, and the cost curve.

Real models nobody here wrote (transformers models built from configs, random weights,
no download), each with torch's own planted Inductor relu bug
(``inject_relu_bug_TESTING_ONLY``): ``benchmarks/models/*.py``. For each, in one run:

- **the program's own time to fail** (a plain ``python model.py``), the yardstick;
- **pt2kit**: ``minify run --json`` end to end, with where its time went (the report's
  timeline grouped by step);
- **pt2kit warm**: the same again on the cache the first run left (a warm start);
- **torch --no-isolate** and, with ``--isolated``, **torch isolated**: the program under
  ``TORCHDYNAMO_REPRO_AFTER``, then ``python minifier_launcher.py``.

Every tool starts from its own copy of one Inductor cache primed by a plain run of the
program (see ``bench_minifier.py``). Ratios: torch's seconds over pt2kit's, pt2kit's over
the program's own time to fail.

``--curve`` measures pt2kit on GPT-2 training steps of growing depth (aot graphs of
about 500 to 5,000 op nodes) and writes ``benchmarks/cost_curve.png`` (matplotlib, when
installed) and the numbers as JSON.

    python benchmarks/bench_real_models.py [--cases gpt2_train,...] [--isolated] [--curve] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_minifier as common  # noqa: E402

MODELS = HERE / "models"

# case: (script arguments, pt2kit flags, torch's TORCHDYNAMO_REPRO_AFTER, torch's level, the error a repro prints)
CASES = {
    "gpt2_train": ([], [], "aot", 2, "CppCompileError"),
    "llama_accuracy": ([], ["--accuracy"], "aot", 4, "AccuracyError"),
    "bert_abort": ([], [], "aot", 3, None),
    "resnet_train": ([], [], "aot", 2, "CppCompileError"),
    "gpt2_graph_breaks": ([], [], "aot", 2, "CppCompileError"),
}
CURVE_LAYERS = (4, 8, 16, 32, 40)


def workdir(case: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix=f"bench-{case}-"))
    shutil.copy(MODELS / f"{case.split('@')[0]}.py", where)
    return where


common.workdir = workdir  # the shared helpers copy from benchmarks/models/


def program_time(case: str, args: list[str]) -> float:
    """The program's own time to fail, from the primed cache."""
    where = workdir(case)
    start = time.perf_counter()
    subprocess.run([sys.executable, f"{case.split('@')[0]}.py", *args], capture_output=True, cwd=where, env=common.env(), timeout=3600)
    return time.perf_counter() - start


def where_time_went(repro: str | None) -> dict[str, float]:
    """pt2kit's timeline, grouped: warm-up, capture, stages, lowering, reduction, checks."""
    if not repro:
        return {}
    report = json.loads((Path(repro).parent / "report.json").read_text())
    groups: dict[str, float] = {}
    for step in report.get("timeline", []):
        name = step["step"]
        key = (
            "warm-up" if name.startswith("warm-up")
            else "capture" if "capture armed" in name or "again" in name
            else "reduction" if " · " in name
            else "lowering" if "lowering" in name
            else "profile" if "profiling" in name
            else "stages"
        )
        groups[key] = round(groups.get(key, 0.0) + step["seconds"], 1)
    groups["nodes_before"] = report.get("nodes_before")
    return groups


def run_pt2kit(case: str, args: list[str], flags: list[str], expected: str | None) -> dict:
    where = workdir(case)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--json", *flags, "--out", "runs", f"{case.split('@')[0]}.py", *args],
        capture_output=True, text=True, cwd=where, env=common.env(), timeout=7200,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return {"seconds": seconds, "error": common.last_error(done.stderr, done.returncode)}
    report = json.loads(done.stdout)
    repro = Path(report["repro"])
    return {
        "seconds": seconds,
        "queries": report["queries"],
        "reduction_queries": report["reduction_queries"],
        "nodes_before": report["nodes_before"],
        "nodes": report["nodes_after"],
        "ops": report["ops_after"],
        "reproduces": common.reproduces(repro, expected),
        "repro": str(repro),
        "where": where_time_went(str(repro)),
    }


def curve(layers: tuple[int, ...]) -> list[dict]:
    points = []
    for n in layers:
        case = f"gpt2_train@{n}"
        cache = common.primed_cache_for(case, [str(n)])
        common.use_copy_of(cache, "pt2kit")
        own = program_time(case, [str(n)])
        result = run_pt2kit(case, [str(n)], [], "CppCompileError")
        points.append({"layers": n, "program_seconds": round(own, 1), **{k: result.get(k) for k in ("seconds", "queries", "reduction_queries", "nodes_before", "nodes", "where", "error")}})
        print(f"  {n:3d} layers: {result.get('nodes_before')} nodes, {result['seconds']:.1f} s, {result.get('queries')} queries (program fails in {own:.1f} s) {result.get('error') or ''}")
    return points


def plot(points: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    good = [p for p in points if p.get("nodes_before")]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p["nodes_before"] for p in good], [p["seconds"] for p in good], "o-", label="pt2kit minify run (end to end)")
    ax.plot([p["nodes_before"] for p in good], [p["program_seconds"] for p in good], "s--", label="the program's own time to fail")
    for p in good:
        ax.annotate(f"{p['queries']} q", (p["nodes_before"], p["seconds"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("op nodes in the failing aot graph (GPT-2 training step)")
    ax.set_ylabel("seconds (2-core CPU)")
    ax.set_title("Cost of minifying a planted Inductor bug")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--isolated", action="store_true", help="also run torch's isolated minifier (slow: minutes per case)")
    parser.add_argument("--curve", action="store_true", help="measure the cost curve and plot it")
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    results: dict = {}
    for case in [c for c in options.cases.split(",") if c]:
        args, flags, after, level, expected = CASES[case]
        cache = common.primed_cache_for(case, args)
        row = results[case] = {}
        common.use_copy_of(cache, "program")
        row["program_seconds"] = round(program_time(case, args), 1)
        common.use_copy_of(cache, "pt2kit")
        row["pt2kit"] = run_pt2kit(case, args, flags, expected)
        # A warm start: the same run again on the cache the first one left (torch's FX
        # graph and kernel caches, which pt2kit's queries share with the program).
        row["pt2kit_warm"] = run_pt2kit(case, args, flags, expected)
        common.use_copy_of(cache, "torch_no_isolate")
        row["torch_no_isolate"] = common.run_torch(case, after, level, expected, isolate=False)
        if options.isolated:
            common.use_copy_of(cache, "torch_isolated")
            row["torch_isolated"] = common.run_torch(case, after, level, expected, isolate=True)
        ours = row["pt2kit"]["seconds"]
        row["pt2kit_over_program"] = round(ours / row["program_seconds"], 2)
        for tool in ("torch_no_isolate", "torch_isolated"):
            if tool in row:
                row[f"{tool}_over_pt2kit"] = round(row[tool]["seconds"] / ours, 2)
        print(f"\n{case}: the program fails in {row['program_seconds']} s")
        for tool in ("pt2kit", "pt2kit_warm", "torch_no_isolate", "torch_isolated"):
            if tool in row:
                r = row[tool]
                detail = r.get("error") or f"{r.get('queries')} queries, {r.get('nodes')} op nodes left, reproduces: {r.get('reproduces')}"
                print(f"  {tool:17s} {r['seconds']:7.1f} s  {detail}")
        print(f"  pt2kit / program = {row['pt2kit_over_program']}x; " + ", ".join(f"{t} / pt2kit = {row[f'{t}_over_pt2kit']}x" for t in ("torch_no_isolate", "torch_isolated") if t in row))
        print(f"  pt2kit's time went to: {row['pt2kit'].get('where')}")
    if options.curve:
        print("\ncost curve (GPT-2 training steps)")
        results["curve"] = curve(CURVE_LAYERS)
        if plot(results["curve"], HERE / "cost_curve.png"):
            print(f"  plotted: {HERE / 'cost_curve.png'}")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
