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
about 500 to 5,000 op nodes) and draws the cost curve (pt2kit's time per step as stacked
bars, the program's own time to fail as a marker): ``benchmarks/cost_curve.png`` with
matplotlib (``pip install -e '.[bench]'``; ``make bench`` does), and always
``benchmarks/cost_curve.svg``, drawn by hand so the curve needs no dependency.
``--replot FILE`` redraws both from an earlier ``--json FILE`` without measuring again.

    python benchmarks/bench_real_models.py [--cases gpt2_train,...] [--isolated] [--curve] [--json FILE]
    python benchmarks/bench_real_models.py --replot FILE
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

import bench_minifier as common

MODELS = HERE / "models"

# case: (script arguments, pt2kit flags, torch's TORCHDYNAMO_REPRO_AFTER, torch's level, the error a repro prints)
CASES = {
    "gpt2_train": ([], [], "aot", 2, "CppCompileError"),
    "llama_accuracy": ([], ["--accuracy"], "aot", 4, "AccuracyError"),
    "bert_abort": ([], [], "aot", 3, None),
    "resnet_train": ([], [], "aot", 2, "CppCompileError"),
    "gpt2_graph_breaks": ([], [], "aot", 2, "CppCompileError"),
    "mlp30_train": ([], [], "aot", 2, "CppCompileError"),
}
CURVE_LAYERS = (4, 16, 44)  # about 460, 1,760 and 4,800 aot nodes


def workdir(case: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix=f"bench-{case}-"))
    shutil.copy(MODELS / f"{case.split('@')[0]}.py", where)
    return where


common.workdir = workdir  # the shared helpers copy from benchmarks/models/


#: Runs of the program alone per case; the median is its time to fail.
PROGRAM_RUNS = 3


def program_time(case: str, args: list[str]) -> float:
    """The program's own time to fail, from the primed cache."""
    where = workdir(case)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, f"{case.split('@')[0]}.py", *args],
        capture_output=True,
        cwd=where,
        env=common.env(),
        timeout=3600,
    )
    return time.perf_counter() - start


def where_time_went(repro: str | None, total: float | None = None) -> dict[str, float]:
    """pt2kit's timeline, grouped, as wall-clock seconds: capture, stages, lowering (to aot graphs), profile,
    reduction, verification (the written repro, here and elsewhere), below the stage.

    Each group is the union of its steps' spans (a step ran from ``ended - seconds`` to
    ``ended``), so queries that ran side by side count once, less what an earlier group
    in :data:`PARTS` already covers: stages asked while the program still ran count as
    capture, so the groups add up to the run's wall clock. ``warm-up`` runs in the
    background beside the capture and is reported, not stacked. ``pt2kit's own`` is the
    rest of ``total`` (the end-to-end seconds): process start, reading and writing
    graphs, the final check of the repro.
    """
    if not repro:
        return {}
    report = json.loads((Path(repro).parent / "report.json").read_text())
    spans: dict[str, list[tuple[float, float]]] = {}
    groups: dict[str, float] = {}
    for step in report.get("timeline", []):
        name = step["step"]
        key = (
            "warm-up"
            if name.startswith("warm-up")
            else "capture"
            if "capture armed" in name or "again" in name
            else "reduction"
            if " · " in name
            else "lowering"
            if "lowering to aot" in name
            else "verification"
            if "repro" in name and "workaround" not in name
            else "below the stage"
            if any(word in name for word in ("which part of", "confirming", "workaround"))
            else "profile"
            if "profiling" in name
            else "stages"
        )
        if step.get("ended") is None:
            groups[key] = round(groups.get(key, 0.0) + step["seconds"], 1)
        else:
            spans.setdefault(key, []).append((step["ended"] - step["seconds"], step["ended"]))
    covered: list[tuple[float, float]] = []
    for key in [*[part for part in PARTS if part in spans], *[key for key in spans if key not in PARTS]]:
        groups[key] = round(_union([*covered, *spans[key]]) - _union(covered), 1)
        covered += spans[key]
    if total is not None:
        every = [span for intervals in spans.values() for span in intervals]
        groups["pt2kit's own"] = round(max(0.0, total - _union(every)), 1)
    groups["nodes_before"] = report.get("nodes_before")
    return groups


def work_after_program(report: dict, ready: float | None) -> dict[str, float]:
    """Between the program's end under capture and the repro's verification elsewhere: the wall
    seconds, and the seconds pt2kit's queries and checks ran in that window, added up (two side
    by side count twice). Their ratio says how full the cores were; on a machine whose cores are
    full, ready can come no sooner than the query-seconds divided by the cores (the interpreter
    readied for the run elsewhere and pt2kit's own process come on top, unmeasured)."""
    steps = [t for t in report.get("timeline", []) if t.get("ended") is not None]
    ends = [t["ended"] for t in steps if "capture armed" in t["step"]]
    if not ends or ready is None:
        return {}
    program_end = max(ends)
    busy = 0.0
    for t in steps:
        start, end = max(t["ended"] - t["seconds"], program_end), min(t["ended"], ready)
        busy += max(0.0, end - start)
    return {"wall": round(ready - program_end, 1), "query_seconds": round(busy, 1)}


def _union(intervals: list[tuple[float, float]]) -> float:
    """The length of a union of intervals."""
    length, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            length += end - max(start, reach)
            reach = end
    return length


def run_pt2kit(case: str, args: list[str], flags: list[str], expected: str | None) -> dict:
    where = workdir(case)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--json", *flags, "--out", "runs", f"{case.split('@')[0]}.py", *args],
        capture_output=True,
        text=True,
        cwd=where,
        env=common.env(),
        timeout=7200,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return {"seconds": seconds, "error": common.last_error(done.stderr, done.returncode)}
    report = json.loads(done.stdout)
    repro = Path(report["repro"])
    return {
        "seconds": seconds,
        "background_done": common.background_done(report, start),
        "repro_ready": common.repro_ready(report),
        "queries": report["queries"],
        "reduction_queries": report["reduction_queries"],
        "nodes_before": report["nodes_before"],
        "nodes": report["nodes_after"],
        "ops": report["ops_after"],
        "reproduces": common.reproduces(repro, expected),
        "repro": str(repro),
        "where": where_time_went(str(repro), seconds),
        "after_program": work_after_program(report, common.repro_ready(report)),
    }


def curve(layers: tuple[int, ...]) -> list[dict]:
    points = []
    for n in layers:
        case = f"gpt2_train@{n}"
        cache = common.primed_cache_for(case, [str(n)])
        common.use_copy_of(cache, "pt2kit")
        own = program_time(case, [str(n)])
        result = run_pt2kit(case, [str(n)], [], "CppCompileError")
        points.append(
            {
                "layers": n,
                "program_seconds": round(own, 1),
                **{
                    k: result.get(k)
                    for k in ("seconds", "queries", "reduction_queries", "nodes_before", "nodes", "where", "error")
                },
            }
        )
        print(
            f"  {n:3d} layers: {result.get('nodes_before')} nodes, {result['seconds']:.1f} s, {result.get('queries')} queries (program fails in {own:.1f} s) {result.get('error') or ''}"
        )
    return points


PARTS = (
    "capture",
    "stages",
    "lowering",
    "profile",
    "reduction",
    "verification",
    "below the stage",
    "pt2kit's own",
)  # wall-clock parts of a run (warm-up overlaps capture)
COLOURS = ("#4e79a7", "#f28e2b", "#76b7b2", "#edc948", "#e15759", "#59a14f", "#b07aa1", "#9e9e9e")


def plot(points: list[dict], path: Path) -> bool:
    """The curve as an SVG (no plotting dependency): per graph size, pt2kit's time as a
    stack of where it went, the program's own time to fail as a marker, queries on top."""
    good = [p for p in points if p.get("nodes_before") and p.get("where")]
    if not good:
        return False
    width, height, left, bottom, top = 640, 380, 60, 60, 40
    plot_h = height - bottom - top
    ymax = max(max(p["seconds"], p["program_seconds"]) for p in good) * 1.1
    step = (width - left - 170) / len(good)
    y = lambda v: top + plot_h * (1 - v / ymax)  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="20" y="22" font-size="13">Minifying a planted Inductor bug in a GPT-2 training step (2-core CPU)</text>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 170}" y2="{top + plot_h}" stroke="black"/>',
        f'<text x="12" y="{top + plot_h / 2}" transform="rotate(-90 12 {top + plot_h / 2})">seconds</text>',
        f'<text x="{left + 40}" y="{height - 12}">op nodes in the failing aot graph (layers)</text>',
    ]
    for tick in range(0, int(ymax) + 1, max(1, int(ymax / 5) // 10 * 10 or 1)):
        out.append(f'<text x="{left - 8}" y="{y(tick) + 4}" text-anchor="end">{tick}</text>')
        out.append(f'<line x1="{left}" y1="{y(tick)}" x2="{width - 170}" y2="{y(tick)}" stroke="#eee"/>')
    for i, p in enumerate(good):
        x0 = left + i * step + step * 0.2
        base = 0.0
        for part, colour in zip(PARTS, COLOURS):
            value = float(p["where"].get(part) or 0.0)
            if value:
                out.append(
                    f'<rect x="{x0:.1f}" y="{y(base + value):.1f}" width="{step * 0.6:.1f}" height="{y(base) - y(base + value):.1f}" fill="{colour}"><title>{part}: {value} s</title></rect>'
                )
                base += value
        cx = x0 + step * 0.3
        out.append(
            f'<text x="{cx:.1f}" y="{y(p["seconds"]) - 6:.1f}" text-anchor="middle">{p["seconds"]:.0f} s, {p["queries"]} q</text>'
        )
        out.append(f'<path d="M{cx - 6:.1f},{y(p["program_seconds"]):.1f} h12" stroke="black" stroke-width="3"/>')
        out.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{p["nodes_before"]} ({p["layers"]})</text>'
        )
    legend = [*zip(PARTS, COLOURS)]
    for j, (part, colour) in enumerate(legend):
        out.append(
            f'<rect x="{width - 160}" y="{top + j * 18}" width="12" height="12" fill="{colour}"/><text x="{width - 142}" y="{top + j * 18 + 10}">{part}</text>'
        )
    j = len(legend)
    out.append(
        f'<path d="M{width - 160},{top + j * 18 + 6} h12" stroke="black" stroke-width="3"/><text x="{width - 142}" y="{top + j * 18 + 10}">the program fails</text>'
    )
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")
    return True


def plot_png(points: list[dict], path: Path) -> bool:
    """The same picture as :func:`plot`, as a PNG for the README, when matplotlib is installed."""
    good = [p for p in points if p.get("nodes_before") and p.get("where")]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not good:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.4), dpi=120)
    xs = range(len(good))
    base = [0.0] * len(good)
    for part, colour in zip(PARTS, COLOURS):
        values = [float(p["where"].get(part) or 0.0) for p in good]
        if any(values):
            ax.bar(xs, values, 0.55, bottom=base, color=colour, label=part)
            base = [b + v for b, v in zip(base, values)]
    ax.scatter(
        xs,
        [p["program_seconds"] for p in good],
        marker="_",
        s=500,
        linewidths=3,
        color="black",
        label="the program fails",
        zorder=3,
    )
    for x, p, top in zip(xs, good, base):
        ax.annotate(
            f"{p['seconds']:.0f} s end to end, {p['queries']} queries",
            (x, max(top, p["seconds"])),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize=9,
        )
    ax.set_xticks(list(xs), [f"{p['nodes_before']:,} ({p['layers']})" for p in good])
    ax.set_xlabel("op nodes in the failing aot graph (GPT-2 layers)")
    ax.set_ylabel("seconds")
    ax.set_ylim(0, max(max(p["seconds"], p["program_seconds"], top) for p, top in zip(good, base)) * 1.12)
    ax.set_title("Minifying a planted Inductor bug in a GPT-2 training step (2-core CPU)", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.grid(axis="y", color="#eeeeee")
    ax.set_axisbelow(True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def draw(points: list[dict]) -> None:
    for drawer, path in ((plot_png, HERE / "cost_curve.png"), (plot, HERE / "cost_curve.svg")):
        if drawer(points, path):
            print(f"  plotted: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument(
        "--isolated", action="store_true", help="also run torch's isolated minifier (slow: minutes per case)"
    )
    parser.add_argument("--curve", action="store_true", help="measure the cost curve and plot it")
    parser.add_argument("--jobs", action="store_true", help="also pt2kit with --jobs 1 (one query at a time)")
    parser.add_argument("--layers", default=",".join(map(str, CURVE_LAYERS)), help="the curve's GPT-2 depths")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--replot", type=Path, default=None, help="redraw the curve from an earlier --json file, measuring nothing"
    )
    options = parser.parse_args()
    if options.replot:
        draw(json.loads(options.replot.read_text())["curve"])
        return
    results: dict = {}
    for case in [c for c in options.cases.split(",") if c]:
        args, flags, after, level, expected = CASES[case]
        cache = common.primed_cache_for(case, args)
        row = results[case] = {}
        # The program's own time to fail varies by 20% from run to run here (12.6 to 16.1 s for one case):
        # the median of three runs, each on a fresh copy of the primed cache, is the ratios' denominator.
        runs = []
        for k in range(PROGRAM_RUNS):
            common.use_copy_of(cache, f"program-{k}")
            runs.append(round(program_time(case, args), 1))
        row["program_runs"] = runs
        row["program_seconds"] = sorted(runs)[len(runs) // 2]
        common.use_copy_of(cache, "pt2kit")
        row["pt2kit"] = run_pt2kit(case, args, flags, expected)
        # A warm start: the same run again on the cache the first one left (torch's FX
        # graph and kernel caches, which pt2kit's queries share with the program).
        row["pt2kit_warm"] = run_pt2kit(case, args, flags, expected)
        if options.jobs:
            common.use_copy_of(cache, "pt2kit_jobs_1")
            row["pt2kit_jobs_1"] = run_pt2kit(case, args, flags + ["--jobs", "1"], expected)
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
        for tool in ("pt2kit", "pt2kit_warm", "pt2kit_jobs_1", "torch_no_isolate", "torch_isolated"):
            if tool in row:
                r = row[tool]
                ready = f"repro ready at {r['repro_ready']:.1f} s, " if r.get("repro_ready") else ""
                if r.get("background_done"):
                    ready += f"its program check done at {r['background_done']:.1f} s, "
                detail = (
                    r.get("error")
                    or f"{ready}{r.get('queries')} queries, {r.get('nodes')} op nodes left, reproduces: {r.get('reproduces')}"
                )
                print(f"  {tool:17s} {r['seconds']:7.1f} s  {detail}")
        print(
            f"  pt2kit / program = {row['pt2kit_over_program']}x; "
            + ", ".join(
                f"{t} / pt2kit = {row[f'{t}_over_pt2kit']}x" for t in ("torch_no_isolate", "torch_isolated") if t in row
            )
        )
        print(f"  pt2kit's time went to: {row['pt2kit'].get('where')}")
        if after := row["pt2kit"].get("after_program"):
            print(
                f"  from the program's end to the repro ready: {after['wall']} s, {after['query_seconds']} query-seconds"
            )
    if options.curve:
        print("\ncost curve (GPT-2 training steps)")
        results["curve"] = curve(tuple(int(n) for n in options.layers.split(",")))
        draw(results["curve"])
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
