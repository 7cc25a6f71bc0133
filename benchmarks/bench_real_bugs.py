"""pt2kit beside torch's own minifier on genuine torch bugs (``tests/minifier/real_bugs/``), cold caches.

Each program in ``tests/minifier/real_bugs/`` fails on its own under torch 2.13 (CPU), the way an
open PyTorch issue reports it (its ``CASE`` literal names the issue, the kind of failure
and the first stage that fails). For each, in one run, every tool on an empty Inductor
cache of its own:

- **pt2kit**: ``minify run --json`` (``--accuracy`` for a wrong answer);
- **torch**: the program under ``TORCHDYNAMO_REPRO_AFTER`` (``aot`` when Inductor is the
  first stage that fails, else ``dynamo``) and ``TORCHDYNAMO_REPRO_LEVEL`` (4 for a wrong
  answer, 3 for a crash, else 2), then ``python minifier_launcher.py minify``: with
  ``--no-isolate`` (torch's fast mode; a crash kills it) unless ``--isolated``.

Per tool: whether a repro was written and fails again on its own (another empty
cache, pt2kit off), the op nodes left in it, the queries, and the seconds. torch runs
with ``PT2KIT_AUTOLOAD=0``, so its own minifier is in charge.

``--releases ENV,...`` (default: the matrix's ``.venv-2.14`` and ``.venv-2.15`` where built) adds
a column: on which torch releases each program still fails, run as ``python PROGRAM.py``
under each (torch alone, an empty cache). ``--releases-only`` measures that column alone.

    python benchmarks/bench_real_bugs.py [--bugs name,...] [--isolated] [--timeout S] [--json FILE]
                                         [--releases ENV,...] [--releases-only]
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUGS = REPO / "tests" / "minifier" / "real_bugs"
sys.path.insert(0, str(HERE))

from bench_minifier import last_error, op_nodes


def case_of(name: str) -> dict:
    tree = ast.parse((BUGS / f"{name}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CASE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"{name}.py has no CASE literal")


def fresh(name: str, tool: str) -> tuple[Path, dict[str, str]]:
    """A scratch directory holding a copy of the program, and an environment with an empty Inductor cache."""
    where = Path(tempfile.mkdtemp(prefix=f"bench-bug-{tool}-"))
    shutil.copy(BUGS / f"{name}.py", where)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    return where, {**base, "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": str(where / "inductor-cache")}


def fails_alone(repro: Path) -> bool:
    """Does the repro fail when run alone, elsewhere, on an empty cache, with pt2kit off?"""
    elsewhere = Path(tempfile.mkdtemp(prefix="bench-bug-repro-"))
    for sibling in repro.parent.iterdir():
        if (
            sibling.is_file()
            and (sibling.suffix in (".py", ".pt") or sibling.name.startswith("inputs-"))
            and "launcher" not in sibling.name
        ):
            shutil.copy(sibling, elsewhere)
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": str(elsewhere / "inductor-cache")}
    try:
        done = subprocess.run(
            [sys.executable, repro.name], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=900
        )
    except subprocess.TimeoutExpired:
        return False
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    return done.returncode != 0


def run_pt2kit(name: str, case: dict, timeout: float) -> dict:
    where, env = fresh(name, "pt2kit")
    env.pop("PT2KIT_AUTOLOAD")
    flags = ["--accuracy"] if case["kind"] == "accuracy" else []
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "minifier", "run", "--wait", "--json", *flags, "--out", "runs", f"{name}.py"],
            capture_output=True,
            text=True,
            cwd=where,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": timeout, "error": f"no result in {timeout:g} s"}
    seconds = time.perf_counter() - start
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"seconds": seconds, "error": last_error(done.stderr, done.returncode)}
    if report.get("status") != "minified":
        return {
            "seconds": seconds,
            "error": f"exit {done.returncode}: {report.get('message', report.get('status'))}"[:200],
        }
    repro = Path(report["repro"])
    stages = report.get("stages", {})
    first = next(
        (s for s in ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor") if stages.get(s) == "fail"),
        report["failure"]["stage"],
    )
    return {
        "seconds": seconds,
        "queries": report["queries"],
        "nodes_before": report["nodes_before"],
        "nodes": report["nodes_after"],
        "ops": report["ops_after"],
        "stage": first,
        "fails_alone": fails_alone(repro),
        "repro": str(repro),
    }


def run_torch(name: str, case: dict, isolate: bool, timeout: float) -> dict:
    where, env = fresh(name, "torch")
    after = "aot" if case["stage"] == "inductor" else "dynamo"
    level = 4 if case["kind"] == "accuracy" else 3 if case["kind"] == "crash" else 2
    start = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, f"{name}.py"],
            capture_output=True,
            text=True,
            cwd=where,
            timeout=timeout,
            env={**env, "TORCHDYNAMO_REPRO_AFTER": after, "TORCHDYNAMO_REPRO_LEVEL": str(level)},
        )
    except subprocess.TimeoutExpired:
        return {"seconds": timeout, "error": f"the program did not end in {timeout:g} s"}
    launchers = sorted(where.glob("torch_compile_debug/run_*/minifier/minifier_launcher.py"))
    if not launchers:
        return {
            "seconds": time.perf_counter() - start,
            "error": f"torch wrote no minifier_launcher.py (TORCHDYNAMO_REPRO_AFTER={after})",
        }
    command = [sys.executable, str(launchers[0]), "minify"] + ([] if isolate else ["--no-isolate"])
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=where,
            env=env,
            timeout=max(1.0, timeout - (time.perf_counter() - start)),
        )
    except subprocess.TimeoutExpired as e:
        out = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        queries = re.findall(r"Made (\d+) queries", out)
        return {
            "seconds": timeout,
            "queries": int(queries[-1]) if queries else None,
            "error": f"no repro in {timeout:g} s",
        }
    seconds = time.perf_counter() - start
    queries = re.findall(r"Made (\d+) queries", done.stderr)
    repro = where / "repro.py"
    if not repro.exists():
        return {
            "seconds": seconds,
            "queries": int(queries[-1]) if queries else None,
            "error": last_error(done.stderr, done.returncode),
        }
    return {
        "seconds": seconds,
        "queries": int(queries[-1]) if queries else None,
        "nodes": op_nodes(repro),
        "fails_alone": fails_alone(repro),
        "repro": str(repro),
    }


def default_releases() -> list[Path]:
    return [venv for venv in (REPO / ".venv-2.14", REPO / ".venv-2.15") if (venv / "bin" / "python").exists()]


def fails_on(name: str, pythons: list[Path], timeout: float) -> dict[str, bool | None]:
    """torch version -> does the program fail under it (None: it did not end in time)."""
    out: dict[str, bool | None] = {}
    for python in pythons:
        where, env = fresh(name, "release")
        try:
            version = subprocess.run(
                [str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, env=env
            ).stdout.strip()
            done = subprocess.run(
                [str(python), f"{name}.py"], capture_output=True, text=True, cwd=where, env=env, timeout=timeout
            )
            out[version.partition("+")[0]] = done.returncode != 0
        except subprocess.TimeoutExpired:
            out[version.partition("+")[0]] = None
        finally:
            shutil.rmtree(where, ignore_errors=True)
    return out


def cell(result: dict) -> str:
    if "error" in result:
        return f"no repro ({result['error'][:70]})"
    alone = "" if result.get("fails_alone") else ", does not fail alone"
    return f"{result.get('nodes')} ops, {result.get('queries')} queries, {result['seconds']:.0f} s{alone}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bugs", default=",".join(sorted(p.stem for p in BUGS.glob("*.py"))))
    parser.add_argument(
        "--isolated", action="store_true", help="torch's default isolated mode (a process per query; minutes per bug)"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per tool per bug")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--releases", default=None, help="environments of other torch releases (comma-separated)")
    parser.add_argument("--releases-only", action="store_true", help="only which releases each program fails on")
    options = parser.parse_args()
    others = [Path(p) for p in options.releases.split(",")] if options.releases else default_releases()
    pythons = [Path(sys.executable), *(p / "bin" / "python" if p.is_dir() else p for p in others)]
    results = {}
    for name in options.bugs.split(","):
        case = case_of(name)
        row = results[name] = {"upstream": case.get("upstream"), "kind": case["kind"], "stage": case["stage"]}
        row["fails_on"] = fails_on(name, pythons, options.timeout)
        releases = ", ".join(
            f"{v} {'fails' if f else 'passes' if f is False else 'hangs'}" for v, f in row["fails_on"].items()
        )
        if not options.releases_only:
            row["pt2kit"] = run_pt2kit(name, case, options.timeout)
            row["torch"] = run_torch(name, case, options.isolated, options.timeout)
            print(f"{name}: pt2kit {cell(row['pt2kit'])}; torch {cell(row['torch'])}; {releases}", flush=True)
        else:
            print(f"{name}: {releases}", flush=True)
        if options.json:
            options.json.write_text(json.dumps(results, indent=2))
    ours = next(iter(results.values()))["fails_on"] if results else {}
    for version in list(ours)[1:]:
        fixed = [
            n for n, r in results.items() if r["fails_on"].get(list(ours)[0]) and r["fails_on"].get(version) is False
        ]
        print(f"fixed by upgrading to torch {version}: {len(fixed)} of {len(results)} ({', '.join(fixed)})")
    if options.releases_only:
        return
    written = {
        tool: sum(1 for r in results.values() if "error" not in r[tool] and r[tool].get("fails_alone"))
        for tool in ("pt2kit", "torch")
    }
    print(
        f"\nrepros that fail alone on an empty cache: pt2kit {written['pt2kit']} of {len(results)}, torch {written['torch']} of {len(results)}"
    )


if __name__ == "__main__":
    main()
