"""Below the stage: pt2kit's subsystem drill-down beside torch's own ``CompilerBisector``, in one run.

For each program (upstream's bisector scenarios ported to CPU, a real model under a
wrong post-grad pass, genuine torch bugs from ``tests/minifier/real_bugs/``), on an empty Inductor
cache of each tool's own:

- **torch**: ``python -m torch._inductor.compiler_bisector run python runner.py PROGRAM``,
  as torch's docs say: it reruns the whole program once per test, the backend it asks for
  passed in ``TORCH_COMPILE_BACKEND`` (the runner makes every ``torch.compile`` use it,
  as a user's script would have to);
- **pt2kit**: ``minify run --json`` (``--accuracy`` where the failure is a wrong answer),
  which writes the repro first and then drills on the minimized graph. Its drill-down's
  share is the time of the steps that ask the bisector's questions (``which part of``
  and ``confirming``); the workaround it verifies (the program run again with it) is
  counted apart.

Per program: the subsystem each finds, the tests (torch: program runs; pt2kit: isolated
queries), the seconds, and two ratios: torch's bisector over pt2kit's drill-down alone,
and over pt2kit's whole run (capture, bisection, minimization, repro checked, drill-down,
workaround verified on the program), which answers more than torch's bisector does.

    python benchmarks/bench_subsystem.py [--programs name,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TESTS = REPO / "tests" / "minifier"  # the programs minifier's tests run

#: name -> (program, pt2kit flags)
PROGRAMS = {
    "bisect_rng": (TESTS / "scenarios" / "bisect_rng.py", ["--accuracy"]),
    "bisect_bad_lowering": (TESTS / "scenarios" / "bisect_bad_lowering.py", ["--accuracy"]),
    "bisect_joint_graph": (TESTS / "scenarios" / "bisect_joint_graph.py", ["--accuracy"]),
    "transformer_post_grad_pass": (TESTS / "subsystem_programs" / "transformer_post_grad_pass.py", ["--accuracy"]),
    "inductor_mul_by_zero_folding_drops_nan": (
        TESTS / "real_bugs" / "inductor_mul_by_zero_folding_drops_nan.py",
        ["--accuracy"],
    ),
    "inductor_cpp_duplicate_half_reduction": (TESTS / "real_bugs" / "inductor_cpp_duplicate_half_reduction.py", []),
}

RUNNER = """\
import functools, os, runpy, sys
open("runs.log", "a").write("run\\n")
import torch
_compile = torch.compile
@functools.wraps(_compile)
def compile_as_asked(*args, **kwargs):
    if os.environ.get("TORCH_COMPILE_BACKEND"):
        kwargs["backend"] = os.environ["TORCH_COMPILE_BACKEND"]
    return _compile(*args, **kwargs)
torch.compile = compile_as_asked
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def fresh(program: Path, tool: str) -> tuple[Path, dict[str, str]]:
    """A scratch directory holding a copy of the program, and an environment with an empty Inductor cache."""
    where = Path(tempfile.mkdtemp(prefix=f"bench-subsystem-{tool}-"))
    shutil.copy(program, where)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHDYNAMO_REPRO", "TORCH_BISECT", "PT2KIT"))}
    return where, {**base, "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": str(where / "inductor-cache")}


def run_torch(program: Path, timeout: float) -> dict:
    where, env = fresh(program, "torch")
    (where / "runner.py").write_text(RUNNER)
    env["TORCH_BISECT_DIR"] = str(where / "bisect")
    command = [
        sys.executable,
        "-m",
        "torch._inductor.compiler_bisector",
        "run",
        sys.executable,
        "runner.py",
        program.name,
    ]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=where, env=env, timeout=timeout)
        out = done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        return {"found": "timeout", "tests": None, "seconds": round(time.perf_counter() - start, 1)}
    seconds = time.perf_counter() - start
    result = re.search(r"Bisection complete: (.+)", out)
    found = "no issue found" if result is None else result.group(1)
    fields = dict(re.findall(r"(\w+)=('[^']*'|\"[^\"]*\"|\w+)", found))
    if fields:
        found = " · ".join(
            str(fields.get(k, "")).strip("'\"")
            for k in ("backend", "subsystem", "bisect_number", "debug_info")
            if fields.get(k) not in (None, "None")
        )
    runs = (where / "runs.log").read_text().count("run") if (where / "runs.log").exists() else None
    shutil.rmtree(where, ignore_errors=True)
    return {"found": found[:90], "tests": runs, "seconds": round(seconds, 1)}


DRILL_STEPS = ("which part of", "confirming")


def run_pt2kit(program: Path, flags: list[str], timeout: float) -> dict:
    where, env = fresh(program, "pt2kit")
    env.pop("PT2KIT_AUTOLOAD")
    command = [
        sys.executable,
        "-m",
        "minifier",
        "run",
        "--json",
        "--subsystem",
        "--wait",  # (the workaround's run of the program is part of what is measured here)
        *flags,
        "--out",
        str(where / "runs"),
        program.name,
    ]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=where, env={**env, "PYTHONPATH": str(REPO)}, timeout=timeout
        )
        report = json.loads(done.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return {"found": "no report", "tests": None, "seconds": round(time.perf_counter() - start, 1)}
    total = time.perf_counter() - start
    timeline = report.get("timeline") or []
    drill = [t for t in timeline if any(s in t["step"] for s in DRILL_STEPS)]
    workaround = [t for t in timeline if "workaround" in t["step"]]
    sub = report.get("subsystem") or {}
    shutil.rmtree(where, ignore_errors=True)
    return {
        "found": " · ".join(
            str(x) for x in (sub.get("backend"), sub.get("name"), f"#{sub.get('application')}", sub.get("detail")) if x
        )
        if sub
        else "none",
        "tests": len(drill),
        "drill_seconds": round(sum(t["seconds"] for t in drill), 1),
        "workaround": (report.get("workaround") or {}).get("what"),
        "workaround_seconds": round(sum(t["seconds"] for t in workaround), 1),
        "seconds": round(total, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    rows = {}
    for name in options.programs.split(","):
        program, flags = PROGRAMS[name]
        torch_result = run_torch(program, options.timeout)
        ours = run_pt2kit(program, flags, options.timeout)
        ratio = torch_result["seconds"] / ours["drill_seconds"] if ours.get("drill_seconds") else None
        whole = torch_result["seconds"] / ours["seconds"] if ours.get("seconds") else None
        rows[name] = {
            "torch": torch_result,
            "pt2kit": ours,
            "ratio_torch_over_pt2kit_drill": None if ratio is None else round(ratio, 1),
            "ratio_torch_over_pt2kit_whole_run": None if whole is None else round(whole, 2),
        }
        print(json.dumps({name: rows[name]}), flush=True)

    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="Below the stage: torch's CompilerBisector (whole program per test) vs pt2kit (minimized graph)"
    )
    for column in (
        "program",
        "torch finds",
        "runs",
        "s",
        "pt2kit finds",
        "queries",
        "drill s",
        "ratio",
        "workaround (verified)",
        "whole run s",
        "ratio",
    ):
        table.add_column(column)
    for name, row in rows.items():
        t, p = row["torch"], row["pt2kit"]
        table.add_row(
            name,
            t["found"],
            str(t["tests"]),
            str(t["seconds"]),
            p["found"],
            str(p["tests"]),
            str(p.get("drill_seconds")),
            f"{row['ratio_torch_over_pt2kit_drill']}×",
            f"{p.get('workaround')} ({p.get('workaround_seconds')} s)",
            str(p["seconds"]),
            f"{row['ratio_torch_over_pt2kit_whole_run']}×",
        )
    Console(width=240).print(table)
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
