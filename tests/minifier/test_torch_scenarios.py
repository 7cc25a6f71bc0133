"""PyTorch's own minifier test scenarios (the ones that run on CPU), run through ``minify run``.

Each script in ``tests/minifier/scenarios/`` is a plain user program that fails the way an
upstream test plants it (its header names the test it ports): torch's
``*_TESTING_ONLY`` backends, Inductor's injected C++ bugs, non-leaf inputs, accuracy
bugs, custom passes and backends defined in the program, monkeypatched
decompositions. Like upstream's generated programs, most set
``torch._dynamo.config.repro_after`` / ``repro_level`` / ``debug_dir_root`` in code and
have no ``if __name__ == "__main__":``.

For every scenario, ``minify run --json`` runs once (with ``--after`` and
``--accuracy`` where the upstream test implies them; the runs are cached for the
session), and four tests look at the result:

- ``test_outcome_is_upstreams``: what the upstream test asserts: the op the minified
  graph must hold (exactly, where upstream checks the whole module), the error it
  greps for, or "no failure" where upstream expects none;
- ``test_repro_fails_the_same_way_with_torch_alone``: the repro, copied to another
  directory while the scenario's directory is moved away (another machine), run
  with ``PT2KIT_AUTOLOAD=0`` and pt2kit's packages blocked, fails the same way;
- ``test_repro_has_no_machine_paths``: no absolute path of this machine, no
  ``__mp_main__``, no import of pt2kit;
- ``test_torchs_own_minifier_stays_out``: a script that turns torch's minifier on in
  code gets pt2kit's minifier only (torch writes no launcher, checkpoint or repro).

Not ported (no CPU minifier scenario in them): test_after_aot.py's unit tests of
torch's repro writer (``InputWriter``, ``save_graph_repro``, symint serialization),
GPU/Triton-only tests, the bisector's CUDA-graph, precision-cast and
``bisect_pre_grad_graph`` GPU variants (ported to CPU here where the bug exists on
CPU).

Real Inductor: every test here is ``slow`` and ``scenarios``, so ``make test`` leaves them to
``make slow`` (CI runs both). A scenario's tests read one run, cached per
process: ``make slow`` hands them to one pytest-xdist worker together (tests/conftest.py's ``program_scope``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO
from support.running import RUN_REPRO

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
pytestmark = [pytest.mark.slow, pytest.mark.scenarios]

Ops = tuple[Any, ...]  # each item: an op name, or a tuple of acceptable spellings


@dataclass(frozen=True)
class Scenario:
    """What upstream asserts about one scenario, in pt2kit's terms."""

    name: str
    flags: tuple[str, ...] = ()
    expect: str = "minified"  # minified | no-failure | not-a-compiler-bug
    declines: str | None = None  # also accepted: exit 5 whose message names this (a patch the repro cannot carry)
    ops: Ops = ()  # ops the minified graph must hold
    exact: bool = False  # ... and nothing else (upstream checks the whole module)
    kind: str | None = None  # failure.kind
    text: str | None = None  # what upstream greps for in the failure (and the repro's output)
    stage: str | None = None  # failure.stage
    torch_minifier_armed: bool = True  # the script turns torch's minifier on in code
    subsystem: tuple[str, str] | None = None  # upstream's bisector: the subsystem, and a word of its debug info


RELU_DYNAMO = "torch.relu"
RELU_AOT = "aten.relu.default"
ADD = ("operator.add", "aten.add.Tensor")

SCENARIOS = [
    # test/dynamo/test_minifier.py
    Scenario("dynamo_compile_error", ("--after", "dynamo"), ops=(RELU_DYNAMO,), kind="compile_error", text="ReluCompileError", stage="relu_compile_error_TESTING_ONLY"),
    Scenario("dynamo_runtime_error", ("--after", "dynamo"), ops=(RELU_DYNAMO,), kind="runtime_error", text="ReluRuntimeError", stage="relu_runtime_error_TESTING_ONLY"),
    Scenario("dynamo_accuracy_error", ("--after", "dynamo", "--accuracy"), ops=(RELU_DYNAMO,), kind="accuracy", text="AccuracyError", stage="relu_accuracy_error_TESTING_ONLY"),
    Scenario("dynamo_non_leaf_compile_error", ("--after", "dynamo"), ops=(("operator.add",),), kind="compile_error", text="TestingOnlyCompileError", stage="non_leaf_compile_error_TESTING_ONLY"),
    Scenario("dynamo_compile_backend_passes", expect="no-failure", torch_minifier_armed=False),
    Scenario("dynamo_runtime_backend_passes", expect="no-failure", torch_minifier_armed=False),
    Scenario("dynamo_accuracy_backend_passes", ("--accuracy",), expect="no-failure", torch_minifier_armed=False),
    Scenario("dynamo_cpu_device_module", ("--after", "dynamo"), ops=(RELU_DYNAMO,), kind="compile_error", text="ReluCompileError", stage="relu_compile_error_TESTING_ONLY"),
    Scenario("dynamo_if_graph_minified", ("--after", "dynamo"), ops=(RELU_DYNAMO,), exact=True, kind="compile_error", text="ReluCompileError", stage="relu_compile_error_TESTING_ONLY"),
    # test/inductor/test_minifier.py
    Scenario("aot_cpu_compile_error", ("--after", "aot"), ops=(RELU_AOT,), kind="compile_error", text="CppCompileError", stage="inductor"),
    Scenario("aot_cpu_accuracy_error", ("--after", "aot", "--accuracy"), ops=(RELU_AOT,), kind="accuracy", text="AccuracyError", stage="inductor"),
    Scenario("aot_constant_in_graph", ("--after", "aot", "--accuracy"), ops=(RELU_AOT,), kind="accuracy", text="AccuracyError", stage="inductor"),
    Scenario("aot_rmse_fp16_constant", ("--after", "aot", "--accuracy"), expect="no-failure"),
    Scenario("aot_rmse_fp16_constant_strict", ("--after", "aot", "--accuracy", "--strict-accuracy"), kind="accuracy", text="AccuracyError", stage="inductor"),
    Scenario("aot_accuracy_vs_strict_accuracy", ("--after", "aot", "--accuracy"), ops=(RELU_AOT,), exact=True, kind="accuracy", text="AccuracyError", stage="inductor"),
    Scenario("aot_accuracy_vs_strict_accuracy_strict", ("--after", "aot", "--accuracy", "--strict-accuracy"), ops=("aten.log1p.default",), exact=True, kind="accuracy", text="AccuracyError", stage="inductor"),
    Scenario("aot_offload_to_disk", ("--after", "aot", "--accuracy"), ops=(RELU_AOT,), kind="accuracy", text="AccuracyError", stage="inductor"),
    # test/inductor/test_minifier_isolate.py
    Scenario("aot_cpu_runtime_error", ("--after", "aot"), ops=(RELU_AOT,), stage="inductor"),  # upstream expects any error
    # test/dynamo/test_after_aot.py
    Scenario("after_aot_accuracy_input_mutation", ("--accuracy",), expect="no-failure", torch_minifier_armed=False),
    # test/dynamo/test_compiler_bisector.py (and its run helper)
    # The patch is made in a `with` block of a script without `if __name__`: the minifier accepts
    # "exit 5 says so plainly" when the repro cannot carry it.
    Scenario("bisect_bad_decomp", ("--accuracy",), ops=(("aten.exponential.default", "Tensor.exponential_"),), stage="aot_eager_decomp_partition", declines="select_decomp_table", torch_minifier_armed=False),
    Scenario("bisect_run_helper", ("--accuracy",), ops=(("aten.exponential.default", "Tensor.exponential_"),), stage="aot_eager_decomp_partition", torch_minifier_armed=False, subsystem=("decomposition", "exponential")),
    Scenario("bisect_pre_grad", ("--accuracy",), ops=(ADD,), exact=True, kind="accuracy", stage="inductor", torch_minifier_armed=False, subsystem=("pre_grad_passes", "pre_grad_custom_pass")),
    Scenario("bisect_joint_graph", ("--accuracy",), ops=(ADD,), exact=True, kind="accuracy", stage="inductor", torch_minifier_armed=False, subsystem=("joint_graph_passes", "joint_custom_post_pass")),
    Scenario("bisect_rng", ("--accuracy",), ops=(("torch.rand", "aten.rand.default"),), kind="accuracy", stage="inductor", torch_minifier_armed=False, subsystem=("inductor_fallback_random", "fallback_random")),
    Scenario("bisect_bad_lowering", ("--accuracy",), ops=(("Tensor.relu", "aten.relu.default"),), kind="accuracy", stage="inductor", torch_minifier_armed=False, subsystem=("lowerings", "relu")),
    Scenario("bisect_eager_backend", expect="not-a-compiler-bug", torch_minifier_armed=False),
    Scenario("bisect_crossref", ops=(("_test_bisector.foo.default",),), exact=True, text="MetadataMismatchError", stage="aot_eager_decomp_partition_crossref", torch_minifier_armed=False),
    Scenario("bisect_pre_grad_graph", ("--accuracy",), ops=(("Tensor.relu", "aten.relu.default"),), kind="accuracy", torch_minifier_armed=False),
]
BY_NAME = {s.name: s for s in SCENARIOS}
MINIFIED = [s.name for s in SCENARIOS if s.expect == "minified"]


@dataclass
class Run:
    """One ``minify run --json`` of a scenario, kept for the session."""

    scenario: Scenario
    workdir: Path  # the scenario's own directory (script, cwd, torch_debug)
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    report: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def context(self) -> str:
        return f"exit {self.returncode}; report: {json.dumps(self.report)[:1500] if self.report else None}; stderr ends: {self.stderr[-1500:]}"


_RUNS: dict[str, Run] = {}


def _scenario_run(name: str, base: Path) -> Run:
    """Run ``minify run --json`` on a copy of the scenario (cached: one Inductor run per scenario)."""
    if name in _RUNS:
        return _RUNS[name]
    import time

    scenario = BY_NAME[name]
    workdir = base / name
    workdir.mkdir(parents=True)
    script = workdir / f"{name}.py"
    shutil.copy(SCENARIOS_DIR / script.name, script)
    command = [sys.executable, "-P", "-m", "minifier", "run", "--json", "--out", str(workdir / "runs"), *scenario.flags, str(script)]
    start = time.monotonic()
    try:
        env = {**os.environ, "PT2KIT_SUBSYSTEM": "1" if scenario.subsystem else "0"}  # (below the stage: where upstream's bisector says)
        done = subprocess.run(command, capture_output=True, text=True, cwd=workdir, timeout=1800, env=env)
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        returncode, stdout, stderr = -999, e.stdout or "", f"minify run did not finish in {e.timeout} s"
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
    run = Run(scenario, workdir, returncode, stdout, stderr, time.monotonic() - start)
    try:
        run.report = json.loads(stdout)
    except json.JSONDecodeError:
        run.report = None
    _RUNS[name] = run
    _summary_write()
    return run


def _summary_write() -> None:
    path = os.environ.get("PT2KIT_SCENARIO_SUMMARY")
    if not path:
        return
    data = {
        name: {
            "returncode": run.returncode,
            "seconds": round(run.seconds, 1),
            "report": {k: (run.report or {}).get(k) for k in ("status", "message", "failure", "stages", "graph", "nodes_before", "ops_after", "queries", "repro", "config", "notes")},
            "stderr_tail": run.stderr[-2500:],
        }
        for name, run in _RUNS.items()
    }
    Path(path).write_text(json.dumps(data, indent=2))


@pytest.fixture(scope="session")
def scenario_base() -> Any:
    """Where the scenarios run: ``PT2KIT_SCENARIO_DIR`` (kept), else a temporary directory.

    Not pytest's ``tmp_path``: pytest deletes old numbered temp directories when
    another session starts, and the cores here are shared with other developers.
    """
    keep = os.environ.get("PT2KIT_SCENARIO_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix="scenarios-", dir=keep))
        return
    base = Path(tempfile.mkdtemp(prefix="pt2kit-scenarios-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _holds(ops_after: list[str], wanted: Any) -> bool:
    spellings = wanted if isinstance(wanted, tuple) else (wanted,)
    return any(op in spellings for op in ops_after)


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_outcome_is_upstreams(name: str, scenario_base: Path) -> None:
    run = _scenario_run(name, scenario_base)
    scenario, report = run.scenario, run.report
    assert report is not None, f"no JSON report on stdout: {run.context()}"
    if scenario.expect == "no-failure":
        assert (run.returncode, report.get("status")) == (1, "no-failure"), run.context()
        return
    if scenario.expect == "not-a-compiler-bug":
        blamed = (report.get("failure") or {}).get("stage")
        assert run.returncode == 5 or (report.get("status") == "minified" and blamed == "eager"), f"a compiler stage is blamed: {run.context()}"
        return
    if scenario.declines and run.returncode == 5:
        assert scenario.declines in str(report.get("message")), f"exit 5 without naming {scenario.declines!r}: {run.context()}"
        return
    assert (run.returncode, report.get("status")) == (0, "minified"), run.context()
    failure = report.get("failure") or {}
    if scenario.stage:
        assert failure.get("stage") == scenario.stage, run.context()
    if scenario.kind:
        assert failure.get("kind") == scenario.kind, run.context()
    if scenario.text:
        assert scenario.text in f"{failure.get('exception')}: {failure.get('message')}", run.context()
    if "--after" in scenario.flags:
        after = scenario.flags[scenario.flags.index("--after") + 1]
        assert (report.get("graph") or {}).get("boundary") == after, run.context()
    ops = list(report.get("ops_after") or [])
    for wanted in scenario.ops:
        assert _holds(ops, wanted), f"ops_after {ops} lacks {wanted}: {run.context()}"
    if scenario.exact:
        assert len(ops) == len(scenario.ops), f"ops_after {ops}, upstream expects exactly {list(scenario.ops)}"


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS if s.subsystem])
def test_subsystem_is_upstreams(name: str, scenario_base: Path) -> None:
    """Below the stage: the subsystem torch's own bisector names for the program, and a workaround the program runs with."""
    run = _minified_run(name, scenario_base)
    expected, word = run.scenario.subsystem  # type: ignore[misc]
    found = run.report.get("subsystem") or {}  # type: ignore[union-attr]
    assert found.get("name") == expected, f"subsystem {found}, upstream's bisector finds {expected}: {run.context()}"
    assert word in str(found.get("detail")), f"subsystem detail {found.get('detail')!r} lacks {word!r}: {run.context()}"
    assert found.get("confirmed_on_original") is True, run.context()
    workaround = run.report.get("workaround") or {}  # type: ignore[union-attr]
    assert workaround.get("verified_on") == "program", f"no workaround the program runs with: {run.context()}"
    assert "# Workaround" in Path(run.report["repro"]).read_text()  # type: ignore[index]


def _minified_run(name: str, base: Path) -> Run:
    run = _scenario_run(name, base)
    if run.scenario.declines and run.returncode == 5 and run.scenario.declines in str((run.report or {}).get("message")):
        pytest.skip(f"pt2kit declined plainly ({run.scenario.declines} cannot be carried), as pt2kit may")
    if not (run.report and run.report.get("status") == "minified" and run.report.get("repro")):
        pytest.fail(f"no repro was written (see test_outcome_is_upstreams[{name}]): exit {run.returncode}, status {(run.report or {}).get('status')}")
    return run


@pytest.mark.parametrize("name", MINIFIED)
def test_repro_fails_the_same_way_with_torch_alone(name: str, scenario_base: Path) -> None:
    run = _minified_run(name, scenario_base)
    report = run.report
    assert report is not None
    run_dir = Path(report["repro"]).parent
    with tempfile.TemporaryDirectory(prefix="pt2kit-elsewhere-") as other:
        copy = Path(other) / "bug-report"
        shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("work", "logs", "captured*", "checkpoint*"))
        moved = run.workdir.with_name(run.workdir.name + "-moved")
        run.workdir.rename(moved)  # the user's machine is not here any more
        try:
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL")}
            env["PT2KIT_AUTOLOAD"] = "0"
            ran = subprocess.run([sys.executable, "-P", "-c", RUN_REPRO, str(copy / "repro.py")], capture_output=True, text=True, cwd=other, env=env, timeout=900)
        finally:
            moved.rename(run.workdir)
    failure = report["failure"]
    output = ran.stdout + ran.stderr
    tail = output[-2000:]
    if failure["kind"] == "crash":
        signum = getattr(signal, failure["exception"], None)
        assert signum is not None and ran.returncode == -signum, f"repro exit {ran.returncode}, planted {failure['exception']}: {tail}"
        return
    assert ran.returncode != 0, f"the repro passes: {tail}"
    if failure["kind"] == "accuracy":
        assert "AccuracyError" in output, tail
    else:
        assert f"{failure['exception']}: " in output, f"repro does not raise {failure['exception']}: {tail}"
    if run.scenario.text:
        assert run.scenario.text in output, f"repro output lacks {run.scenario.text!r}: {tail}"


@pytest.mark.parametrize("name", MINIFIED)
def test_repro_has_no_machine_paths(name: str, scenario_base: Path) -> None:
    run = _minified_run(name, scenario_base)
    assert run.report is not None
    text = Path(run.report["repro"]).read_text()
    machine = {
        "the scenario's directory": str(run.workdir),
        "the home directory": str(Path.home()),
        "pt2kit's checkout": str(REPO),
        "the temp directory": tempfile.gettempdir() + os.sep,
        "this Python's prefix": sys.prefix,
    }
    found = [f"{what} ({path})" for what, path in machine.items() if path in text]
    assert not found, f"repro.py holds {', '.join(found)}"
    for junk in ("__mp_main__", "import minifier", "from minifier", "sys.path.insert(0, '/"):
        assert junk not in text, f"repro.py holds {junk!r}"


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS if s.torch_minifier_armed])
def test_torchs_own_minifier_stays_out(name: str, scenario_base: Path) -> None:
    run = _scenario_run(name, scenario_base)
    out = run.workdir / "runs"
    torchs = [
        p.relative_to(run.workdir)
        for p in run.workdir.rglob("*")
        if not p.is_relative_to(out) and (p.name in ("minifier_launcher.py", "repro.py", "checkpoints") or p.name.startswith("minifier"))
    ]
    assert not torchs, f"torch's own minifier wrote {torchs}"
