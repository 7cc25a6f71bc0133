"""pt2kit on genuine torch bugs: each ends in a repro a compiler engineer would accept, or a precise exit 5.

Every program in ``tests/minifier/real_bugs/`` is a user program that fails on its own under
torch 2.13 (CPU), taken from an open PyTorch issue or found by trying unusual but legal
programs (tests/minifier/real_bugs/README.md lists them). Its ``CASE`` literal, read with
``ast.literal_eval``, says what a person saw: the kind of failure and the first stage
that fails (``eager``, ``aot_eager``, ``aot_eager_decomp_partition``, ``inductor``),
and, where pt2kit cannot carry what the failure needs, ``"exit5"``: the words exit 5
must say.

For each one, as a user would: ``minify run --json`` (``--accuracy`` for a wrong
answer) on a copy of the program, run once per session. Then:

- ``test_verdict_is_the_programs``: the report's failure kind and first failing stage
  are the program's, and the reduction's queries stay within ``2·log2(n)·k + c`` for a
  graph of ``n`` nodes reduced to ``k`` (one binary search per op the bug needs);
- ``test_repro_fails_alone_on_an_empty_cache``: ``repro.py``, copied alone into another
  directory, run with pt2kit unimportable and a ``TORCHINDUCTOR_CACHE_DIR`` no minify run
  wrote to, fails with the report's signature (a warm cache once made a repro "fail" nowhere
  else). That cache is the worker's, shared by these repro runs alone: it holds other bugs'
  kernels, never this one's, and a cold start's one-time compiles (the CPU's ISA probe, the
  C++ prelude: 12 of a fresh cache's 22 s, measured) are paid once per worker, not per bug;
- ``test_repro_is_one_minimal``: dropping any one op of the repro (its value becomes an
  input, fed with what the graph computed there), or replacing it by a same-shaped
  operand or input that its readers read instead, makes the failure go away;
- ``test_subsystem_and_workaround_are_the_bugs`` (where ``CASE`` names a ``subsystem``:
  those runs go below the stage): the subsystem and its guilty application are the
  bug's, and the program, which fails on its own in a fresh process on an empty
  Inductor cache, runs to the end there with the workaround pasted before it.

pt2kit's own check that the repro fails on another machine is left off these runs
(``PT2KIT_VERIFY_ELSEWHERE=0``, tests/conftest.py): ``test_repro_fails_alone_on_an_empty_cache``
is that check, made by the test itself. tests/minifier/test_real_bug_shapes.py and
tests/minifier/test_state_outside_graph.py run pt2kit's.

Real Inductor, cold kernels: every test here is ``slow`` and ``scenarios`` (``make
scenarios``, which CI runs after ``make test``).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import replace
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.running import RUN_REPRO, run_program

BUGS_DIR = Path(__file__).resolve().parent / "real_bugs"
BUGS = sorted(p.stem for p in BUGS_DIR.glob("*.py"))
STAGES = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")

#: The query bound's constant: the first consider, the finishing passes (random inputs, sizes, config).
QUERY_SLACK = 8

pytestmark = [pytest.mark.slow, pytest.mark.scenarios]


def case_of(name: str) -> dict[str, Any]:
    """A bug program's ``CASE`` literal."""
    tree = ast.parse((BUGS_DIR / f"{name}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CASE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name}.py has no CASE literal")


@dataclass
class Run:
    name: str
    case: dict[str, Any]
    workdir: Path
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    report: dict[str, Any] | None

    def context(self) -> str:
        return f"exit {self.returncode}; report: {json.dumps(self.report)[:2000] if self.report else None}; stderr ends: {self.stderr[-2000:]}"


_RUNS: dict[str, Run] = {}


@pytest.fixture(scope="session")
def bugs_base() -> Any:
    keep = os.environ.get("PT2KIT_REAL_BUGS_DIR")
    base = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="pt2kit-real-bugs-"))
    base.mkdir(parents=True, exist_ok=True)
    yield base
    if not keep:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def repros_cache(bugs_base: Path) -> Path:
    """The Inductor cache of the repros' runs: no minify run writes to it (see the module)."""
    return Path(tempfile.mkdtemp(prefix="repros-inductor-cache-", dir=bugs_base))


def run_of(name: str, base: Path) -> Run:
    """``minify run --json`` on a copy of the bug program (once per session)."""
    if name in _RUNS:
        return _RUNS[name]
    case = case_of(name)
    workdir = base / name
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / f"{name}.py"
    shutil.copy(BUGS_DIR / script.name, script)
    flags = ["--accuracy"] if case["kind"] == "accuracy" else []
    command = [sys.executable, "-P", "-m", "minifier", "run", "--json", "--out", str(workdir / "runs"), *flags, str(script)]
    env = {**os.environ, "PT2KIT_SUBSYSTEM": "1" if "subsystem" in case else "0"}
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env, timeout=1800)
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        returncode, stderr = -999, f"minify run did not finish in {e.timeout} s"
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        report = None
    run = _RUNS[name] = Run(name, case, workdir, returncode, stdout, stderr, time.monotonic() - start, report)
    summary = os.environ.get("PT2KIT_REAL_BUGS_SUMMARY")
    if summary:
        Path(summary).write_text(json.dumps({n: {"returncode": r.returncode, "seconds": round(r.seconds, 1), "report": r.report, "stderr": r.stderr[-1500:]} for n, r in _RUNS.items()}, indent=2))
    return run


def minified(name: str, base: Path) -> Run:
    run = run_of(name, base)
    if "exit5" in run.case:
        pytest.skip(f"{name}: pt2kit cannot carry what it needs ({run.case['exit5']})")
    assert run.returncode == 0 and run.report and run.report["status"] == "minified", run.context()
    return run


@pytest.mark.parametrize("name", BUGS)
def test_verdict_is_the_programs(name, bugs_base):
    run = run_of(name, bugs_base)
    case = run.case
    if "exit5" in case:
        assert run.returncode == 5, run.context()
        assert case["exit5"] in (run.report or {}).get("message", ""), run.context()
        if "the bug is dynamo's, outside its graphs" in case["exit5"]:
            assert run.report["program_fails_at"] == "eager", run.context()  # (dynamo alone: backend="eager")
        return
    assert run.returncode == 0 and run.report, run.context()
    report = run.report
    assert report["failure"]["kind"] == case["kind"], run.context()
    assert report["verified"] is True, run.context()
    first = next((s for s in STAGES if report["stages"].get(s) == "fail"), report["failure"]["stage"])
    assert first == case["stage"], run.context()
    nodes, ops = max(report["nodes_before"], 2), max(report["nodes_after"], 1)
    assert report["reduction_queries"] <= 2 * math.ceil(math.log2(nodes)) * ops + QUERY_SLACK, run.context()


@pytest.mark.parametrize("name", BUGS)
def test_repro_fails_alone_on_an_empty_cache(name, bugs_base, repros_cache):
    run = minified(name, bugs_base)
    repro = Path(run.report["repro"])
    elsewhere = Path(tempfile.mkdtemp(prefix="pt2kit-real-bug-repro-"))
    try:
        for sibling in repro.parent.iterdir():  # repro.py and its data file, nothing of the run
            if sibling.is_file() and (sibling.name == "repro.py" or sibling.name.startswith("inputs-")):
                shutil.copy(sibling, elsewhere)
        env = {**os.environ, "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": str(repros_cache)}
        done = subprocess.run([sys.executable, "-c", RUN_REPRO, str(elsewhere / "repro.py")], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=900)
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    failure = run.report["failure"]
    assert done.returncode != 0, f"the repro passed: {done.stdout[-500:]} {done.stderr[-1500:]}"
    if failure["kind"] == "crash":
        assert done.returncode < 0, done.stderr[-1500:]
    else:
        assert failure["exception"] in done.stderr, done.stderr[-1500:]


@pytest.fixture(scope="session")
def minimality_session(bugs_base: Path) -> Any:
    """One warm worker for every bug's minimality questions in this process: each question is a forked child
    all the same, and a session of its own per bug paid a fresh interpreter's ``import torch`` and first compile
    again, for a handful of questions."""
    from minifier.isolation.session import Session

    session = Session("one-minimal", out=bugs_base / "one-minimal", timeout=600, quiet=True)
    session.warm_up(inductor=True, preload=("minifier.stages.profile", "minifier.stages.run"))
    yield session
    session.close()


@pytest.mark.parametrize("name", BUGS)
def test_repro_is_one_minimal(name, bugs_base, minimality_session):
    from minifier.unit.case import GraphCase, leaves_a_mode_on
    from minifier.stages.profile import profile_case, realize
    from minifier.reduce.engine import Reducer
    from minifier.repro.files import load_repro
    from minifier.stages.run import Outcome, run_case

    run = minified(name, bugs_base)
    loaded = load_repro(Path(run.report["repro"]))
    case: GraphCase = loaded.case
    nodes = {node.name: node for node in case.gm.graph.nodes}
    session = minimality_session
    profiled = session.query(functools.partial(profile_case, case), "profiling the repro's graph")
    assert profiled.value is not None, profiled.failure
    reducer = Reducer(case, profiled.value, loaded.failure, query=lambda candidates: [])
    still_failing = []
    best = reducer.best
    # each op dropped (its value fed in), and each replaced by a same-shaped operand or input
    smaller = [(f"without {node.name}", reducer.without([node.name], best)) for node in case.op_nodes]
    smaller += [
        (f"{node.name} replaced by {stand_in}", replace(best, substituted=frozenset({(node.name, stand_in)})))
        for node in case.op_nodes
        for stand_in in reducer.stand_ins(node.name, best)[:1]
    ]
    for label, candidate in smaller:
        candidate = reducer.normalize(candidate)
        if not candidate.kept or leaves_a_mode_on(nodes, candidate.kept):
            continue  # nothing left (an empty graph fails nowhere), or a mode entered and never left
        built = realize(reducer.build(candidate), case)
        asked = session.query(functools.partial(run_case, built, loaded.stage, accuracy=loaded.accuracy, strict=loaded.strict), label)
        outcome = asked.value if asked.value is not None else Outcome(loaded.stage, asked.failure, asked.seconds)
        if outcome.failure is not None and outcome.failure.signature == loaded.failure:
            still_failing.append(label)
    assert still_failing == [], f"{name}: the repro still fails {still_failing}"


@pytest.mark.parametrize("name", [name for name in BUGS if "subsystem" in case_of(name)])
def test_subsystem_and_workaround_are_the_bugs(name, bugs_base):
    run = minified(name, bugs_base)
    expected_name, expected_detail = run.case["subsystem"]
    found = run.report.get("subsystem") or {}
    assert (found.get("name"), found.get("detail")) == (expected_name, expected_detail), run.context()
    workaround = run.report.get("workaround") or {}
    assert workaround.get("verified_on") == "program", run.context()
    script = run.workdir / f"{name}.py"
    assert run_program(script).returncode != 0
    assert run_program(script, workaround["code"]).returncode == 0
