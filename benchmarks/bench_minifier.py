"""pt2kit's ``minify run`` against torch 2.13's own minifier, on the bundled failing programs.

For each case, in one run and on the same machine:

- **pt2kit**: ``minify run --json`` end to end (capture, bisection, minification, repro);
- **torch, isolated**: the program under ``TORCHDYNAMO_REPRO_AFTER`` (it dumps
  ``minifier_launcher.py``), then ``python minifier_launcher.py`` (torch's default, one fresh
  process per query);
- **torch, --no-isolate**: the same launcher with ``--no-isolate`` (queries in-process).

With ``--jobs``, also pt2kit with ``--jobs 1`` (one query at a time) and with ``--no-subsystem``
(the repro only), and the program alone (its own time to fail); each pt2kit row says when
its repro was verified elsewhere ("repro ready"), below the stage coming after.

torch runs with ``PT2KIT_AUTOLOAD=0``, so its own minifier is in charge. Every tool starts
from its own copy of one Inductor cache, primed by running the program once and pt2kit's
warm-up once (three small kernels pt2kit compiles once per machine): all three find the
same warm start (precompiled headers, the program's kernels) and none profits from the
kernels another tool compiled while minifying. ``--cold`` skips pt2kit's warm-up in the
priming, to show what a first use on a machine costs. Reported per tool:
seconds (both torch steps summed), queries, op nodes left in the repro, and whether the repro
fails the same way when run with plain torch. Ratios are torch's seconds over pt2kit's.

    python benchmarks/bench_minifier.py [--cases relu_compile_error,...] [--jobs] [--json FILE]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# case: (pt2kit flags, torch's TORCHDYNAMO_REPRO_AFTER, torch's level, the error text a repro must print)
CASES = {
    "relu_compile_error": ([], "aot", 2, "CppCompileError"),
    "relu_runtime_error": (
        [],
        "aot",
        3,
        None,
    ),  # an abort: torch needs level 3 to dump before it; the repro must die of SIGABRT
    "relu_accuracy": (["--accuracy"], "aot", 4, "AccuracyError"),
    "backward_only": (
        [],
        "dynamo",
        2,
        "bw_tanh_bug: cannot lower aten.tanh_backward",
    ),  # torch's after-aot hook is Inductor-only
    "custom_op_bad_fake": ([], "dynamo", 2, "Attempting to broadcast a dimension of length 4"),
}


#: The rows, in the order printed.
TOOLS = ("pt2kit", "pt2kit_jobs_1", "pt2kit_no_subsystem", "torch_isolated", "torch_no_isolate", "program")
CACHE = {"dir": ""}  # the Inductor cache of the tool being measured


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    return {**base, "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": CACHE["dir"], **extra}


def primed_cache(case: str, pt2kit_warm_up: bool) -> Path:
    """An Inductor cache warmed by one plain run of the program (its failure included)."""
    return primed_cache_for(case, [], pt2kit_warm_up)


def primed_cache_for(case: str, args: list[str], pt2kit_warm_up: bool = True) -> Path:
    """:func:`primed_cache` for ``case`` (``name`` or ``name@variant``) run with ``args``."""
    where = workdir(case)
    CACHE["dir"] = str(where / "inductor-cache")
    subprocess.run(
        [sys.executable, f"{case.split('@')[0]}.py", *args], capture_output=True, cwd=where, env=env(), timeout=3600
    )
    if pt2kit_warm_up:
        warm = "from minifier.isolation.worker import Worker; Worker().warm_up(wait=True)"
        subprocess.run([sys.executable, "-c", warm], capture_output=True, cwd=where, env=env(), timeout=3600)
    return Path(CACHE["dir"])


def use_copy_of(cache: Path, tool: str) -> None:
    copy = cache.parent / f"inductor-cache-{tool}"
    shutil.copytree(cache, copy)
    CACHE["dir"] = str(copy)


def op_nodes(repro: Path) -> int | None:
    """Op nodes in a repro's ``Repro.forward``: each assignment of a call."""
    try:
        tree = ast.parse(repro.read_text())
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Repro":
            forward = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
            return sum(
                1
                for s in forward.body
                if isinstance(s, ast.Assign) and isinstance(s.value, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript))
            )
    return None


def reproduces(repro: Path, expected: str | None) -> bool:
    done = subprocess.run(
        [sys.executable, str(repro)], capture_output=True, text=True, cwd=repro.parent, env=env(), timeout=900
    )
    if expected is None:
        return done.returncode == -6  # SIGABRT
    return done.returncode != 0 and expected in done.stderr


def workdir(case: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix=f"bench-{case}-"))
    shutil.copy(EXAMPLES / f"{case}.py", where)
    shutil.copy(EXAMPLES / "buggy_backends.py", where)
    return where


def last_error(stderr: str, code: int) -> str:
    """The line of a failed run's stderr that says what went wrong."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith(" ")]
    errors = [line for line in lines if "Error" in line or "error" in line or line.startswith("minify:")]
    return (errors or lines or [f"exit {code}"])[-1][:200]


def run_pt2kit(case: str, flags: list[str], expected: str | None) -> dict:
    where = workdir(case)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--json", *flags, "--out", "runs", f"{case}.py"],
        capture_output=True,
        text=True,
        cwd=where,
        env=env(),
        timeout=3600,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return {"seconds": seconds, "error": last_error(done.stderr, done.returncode)}
    report = json.loads(done.stdout)
    repro = Path(report["repro"])
    return {
        "seconds": seconds,
        "background_done": background_done(report, start),
        "repro_ready": repro_ready(report),
        "queries": report["queries"],
        "reduction_queries": report["reduction_queries"],
        "nodes": op_nodes(repro),
        "reproduces": reproduces(repro, expected),
        "repro": str(repro),
    }


def background_done(report: dict, start: float) -> float | None:
    """Seconds from ``start`` until the program's run with the workaround, left to the background when
    ``minify run`` exited, added its answer to ``report.json`` (None: nothing was left to it).

    Waited for here, so that the next tool measured does not share the cores with it.
    """
    if "the workaround on the program" not in (report.get("pending") or ()):
        return None
    written = Path(report["repro"]).parent / "report.json"
    while "the workaround on the program" in (json.loads(written.read_text()).get("pending") or ()):
        if time.perf_counter() - start > 3600:
            return None
        time.sleep(0.2)
    return time.perf_counter() - start


def repro_ready(report: dict) -> float | None:
    """Seconds into the run when the repro was verified elsewhere (below the stage and release checks come after)."""
    ends = [t["ended"] for t in report.get("timeline") or () if t.get("ended") is not None and "elsewhere" in t["step"]]
    return max(ends) if ends else None


def run_program(case: str) -> dict:
    """The program alone, as its user runs it: its own time to fail."""
    where = workdir(case)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, f"{case}.py"], capture_output=True, cwd=where, env=env(), timeout=3600)
    return {"seconds": time.perf_counter() - start, "exit": done.returncode}


def run_torch(case: str, after: str, level: int, expected: str | None, isolate: bool) -> dict:
    where = workdir(case)
    start = time.perf_counter()
    dump = subprocess.run(
        [sys.executable, f"{case}.py"],
        capture_output=True,
        text=True,
        cwd=where,
        env=env(TORCHDYNAMO_REPRO_AFTER=after, TORCHDYNAMO_REPRO_LEVEL=str(level)),
        timeout=3600,
    )
    launchers = sorted(where.glob("torch_compile_debug/run_*/minifier/minifier_launcher.py"))
    if not launchers:
        return {
            "seconds": time.perf_counter() - start,
            "error": "torch wrote no minifier_launcher.py"
            + (" (the failure happens before the backend)" if dump.returncode else ""),
        }
    command = [sys.executable, str(launchers[0])] + ([] if isolate else ["minify", "--no-isolate"])
    done = subprocess.run(command, capture_output=True, text=True, cwd=where, env=env(), timeout=3600)
    seconds = time.perf_counter() - start
    queries = re.findall(r"Made (\d+) queries", done.stderr)
    repro = where / "repro.py"
    if done.returncode != 0 or not repro.exists():
        return {
            "seconds": seconds,
            "queries": int(queries[-1]) if queries else None,
            "error": last_error(done.stderr, done.returncode),
        }
    return {
        "seconds": seconds,
        "queries": int(queries[-1]) if queries else None,
        "nodes": op_nodes(repro),
        "reproduces": reproduces(repro, expected),
        "repro": str(repro),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--cold", action="store_true", help="leave pt2kit's one-time warm-up kernels out of the primed cache"
    )
    parser.add_argument(
        "--jobs", action="store_true",
        help="also pt2kit with --jobs 1 and with --no-subsystem, and the program alone (repro-ready times beside)",
    )  # fmt: skip
    options = parser.parse_args()
    results = {}
    for case in options.cases.split(","):
        flags, after, level, expected = CASES[case]
        cache = primed_cache(case, pt2kit_warm_up=not options.cold)
        row = results[case] = {}
        use_copy_of(cache, "pt2kit")
        row["pt2kit"] = run_pt2kit(case, flags, expected)
        if options.jobs:
            for tool, more in (("pt2kit_jobs_1", ["--jobs", "1"]), ("pt2kit_no_subsystem", ["--no-subsystem"])):
                use_copy_of(cache, tool)
                row[tool] = run_pt2kit(case, flags + more, expected)
            use_copy_of(cache, "program")
            row["program"] = run_program(case)
        use_copy_of(cache, "torch_isolated")
        row["torch_isolated"] = run_torch(case, after, level, expected, isolate=True)
        use_copy_of(cache, "torch_no_isolate")
        row["torch_no_isolate"] = run_torch(case, after, level, expected, isolate=False)
        ours = row["pt2kit"]["seconds"]
        for tool in ("torch_isolated", "torch_no_isolate"):
            row[f"{tool}_over_pt2kit"] = round(row[tool]["seconds"] / ours, 2)
        print(f"\n{case}")
        for tool in [t for t in TOOLS if t in row]:
            r = row[tool]
            ready = f"repro ready at {r['repro_ready']:.1f} s, " if r.get("repro_ready") else ""
            if r.get("background_done"):
                ready += f"the program's run with the workaround done at {r['background_done']:.1f} s, "
            detail = (
                r.get("error")
                or (f"exit {r['exit']}" if "exit" in r else "")
                or f"{ready}{r.get('queries')} queries, {r.get('nodes')} op nodes left, reproduces: {r.get('reproduces')}"
            )
            print(f"  {tool:20s} {r['seconds']:7.1f} s  {detail}")
        print(
            f"  ratios: torch isolated / pt2kit = {row['torch_isolated_over_pt2kit']}x, torch --no-isolate / pt2kit = {row['torch_no_isolate_over_pt2kit']}x"
        )
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
