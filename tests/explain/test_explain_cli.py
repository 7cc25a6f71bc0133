"""``python -m explain`` run as a new user would, on the scripts in examples/explain/.

Every script marks the lines a report must name with a trailing comment
(``# graph break: print``); :func:`marked_line` finds them, so no line number is typed in
here. Four runs are real subprocesses (JSON purity at the file-descriptor level, rich
output, the recompile limit, a missing script); they start together in one module
fixture. The other scripts go through the same click command in-process, which saves a
torch import per script.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from support.paths import EXAMPLES, REPO
from explain.__main__ import main

SCRIPTS = EXAMPLES / "explain"
FAILING_SCRIPT = """\
import torch

def step(x):
    return x.tanh() * 2

compiled = torch.compile(step, backend="eager")
compiled(torch.randn(3))
raise RuntimeError("the script's own bug")
"""


def marked_line(path: Path, marker: str) -> int:
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"{marker!r} marks {len(hits)} lines of {path}"
    return hits[0]


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess[str]]:
    commands = {
        "print_break": ["--json", str(SCRIPTS / "print_break.py")],
        "recompile_limit": ["--json", str(SCRIPTS / "recompile_limit.py")],
        "rich": [str(SCRIPTS / "print_break.py")],
        "missing": ["--json", "no_such_script.py"],
    }

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "explain", *args],
            cwd=REPO,
            env={**os.environ, "COLUMNS": "100"},
            capture_output=True,
            text=True,
            timeout=300,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(run, args) for key, args in commands.items()}
        return {key: future.result() for key, future in futures.items()}


def invoke(*args: str) -> Result:
    """The same command, in this process (click's runner keeps stdout and stderr apart)."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def report_of(run: subprocess.CompletedProcess[str] | Result) -> dict:
    exit_code = run.returncode if isinstance(run, subprocess.CompletedProcess) else run.exit_code
    assert exit_code == 0, run.stderr[-3000:]
    return json.loads(run.stdout)  # --json: stdout holds the report and nothing else


def json_report(name: str) -> dict:
    return report_of(invoke("--json", str(SCRIPTS / f"{name}.py")))


def only(items):
    assert len(items) == 1, items
    return items[0]


def function_named(report: dict, name: str) -> dict:
    return only([f for f in report["recompiles"]["functions"] if f["function"] == name and f["resumed_at"] is None])


@pytest.mark.matrix
@pytest.mark.e2e  # the explain command in a process of its own, on real scripts
@pytest.mark.parametrize(
    ("name", "marker", "cause", "remedy_hint"),
    [
        ("print_break", "graph break: print", "Failed to trace builtin operator", "reorderable_logging_functions"),
        ("tensor_if", "graph break: data-dependent branch", "Data-dependent branching", "torch.where"),
        (
            "item_break",
            "graph break: .item()",
            "Unsupported Tensor.item() call with capture_scalar_outputs=False",
            "capture_scalar_outputs",
        ),
    ],
)
def test_each_graph_break_script_is_reported_at_its_line(runs, name, marker, cause, remedy_hint):
    script = SCRIPTS / f"{name}.py"
    report = report_of(runs[name]) if name in runs else json_report(name)

    assert report["break_count"] == 1
    brk = only(report["breaks"])
    assert (brk["filename"], brk["lineno"]) == (str(script), marked_line(script, marker))
    assert brk["source"].endswith(f"# {marker}")
    assert brk["cause"] == cause
    assert remedy_hint in brk["remedy"]
    assert report["graph_count"] == 2
    assert report["isolation"]["strategy"] == "observed"
    assert report["isolation"]["reset_called"] is False


@pytest.mark.matrix
@pytest.mark.e2e  # the explain command in a process of its own, on real scripts
def test_json_mode_keeps_the_scripts_prints_off_stdout(runs):
    run = runs["print_break"]

    assert run.stdout.lstrip().startswith("{") and run.stdout.rstrip().endswith("}")
    assert "normalized\n" in run.stderr


def test_a_changing_python_int_names_n():
    script = SCRIPTS / "changing_int.py"
    function = function_named(json_report("changing_int"), "shift")

    assert (function["compiles"], function["recompiles"]) == (2, 1)
    record = function["records"][1]
    assert record["triggered_by"]["lineno"] == marked_line(script, "recompile: n changes")
    failure = only(record["failed_guards"][0]["failures"])
    assert (failure["name"], failure["kind"], failure["expected"], failure["actual"]) == ("n", "value", "1", "2")


def test_a_growing_batch_names_x_and_suggests_mark_dynamic():
    script = SCRIPTS / "growing_batch.py"
    function = function_named(json_report("growing_batch"), "forward")

    assert (function["compiles"], function["recompiles"]) == (2, 1)
    record = function["records"][1]
    assert record["triggered_by"]["lineno"] == marked_line(script, "recompile: the batch size grows")
    assert [f["text"] for f in record["failed_guards"][0]["failures"]] == ["x: size[0] 2 → 4"]
    assert any("torch._dynamo.mark_dynamic(x, 0)" in remedy for remedy in function["remedies"])


def test_a_dtype_switch_names_x():
    script = SCRIPTS / "dtype_switch.py"
    function = function_named(json_report("dtype_switch"), "gelu_ish")

    record = function["records"][1]
    assert record["triggered_by"]["lineno"] == marked_line(script, "recompile: dtype switch")
    assert [f["text"] for f in record["failed_guards"][0]["failures"]] == ["x: dtype float32 → float64"]


@pytest.mark.matrix
@pytest.mark.e2e  # the explain command in a process of its own, on real scripts
def test_a_recompile_limit_of_2_is_reported_as_hit(runs):
    script = SCRIPTS / "recompile_limit.py"
    report = report_of(runs["recompile_limit"])
    function = function_named(report, "double")

    assert [record["cause"] for record in function["records"]] == ["first compile", "recompile", "recompile refused"]
    assert function["limit_hit"]["limit_type"] == "recompile_limit" and function["limit_hit"]["limit"] == 2
    assert "run eagerly" in function["limit_hit"]["lost_to_eager"]
    refused = function["records"][2]
    assert refused["triggered_by"]["lineno"] == marked_line(script, "the float16 call hits the limit")
    assert [e["failures"][0]["text"] for e in refused["failed_guards"]] == [
        "x: dtype float64 → float16",
        "x: dtype float32 → float16",
    ]
    assert report["recompiles"]["refused_count"] == 1


def test_all_four_failing_guards_of_one_call_are_listed():
    function = function_named(json_report("many_guards"), "affine")

    failures = only(function["records"][1]["failed_guards"])["failures"]
    assert sorted(f["text"] for f in failures) == [
        "bias: size[0] 4 → 1",
        "global OFFSET: 1 → 5",
        "n: 2 → 3",
        "x: dtype float32 → float64",
    ]


@pytest.mark.matrix
@pytest.mark.e2e  # the explain command in a process of its own, on real scripts
def test_rich_output_names_the_line_the_reason_and_the_remedy(runs):
    run = runs["rich"]
    script = SCRIPTS / "print_break.py"

    assert run.returncode == 0, run.stderr[-3000:]
    assert f"examples/explain/print_break.py:{marked_line(script, 'graph break: print')} in normalize" in run.stdout
    assert "why: `print()` does Python I/O" in run.stdout
    assert "fix: Remove the print" in run.stdout
    assert "torch._dynamo.reset() was not called" in run.stdout


@pytest.mark.matrix
@pytest.mark.e2e  # the explain command in a process of its own, on real scripts
def test_a_missing_script_is_one_clear_line_and_exit_2(runs):
    run = runs["missing"]

    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.strip() == "explain: script not found: no_such_script.py"


def test_a_failing_script_still_gets_its_report_and_exit_1(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(FAILING_SCRIPT)

    result = invoke("--json", str(script))

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["error"] == "RuntimeError: the script's own bug"
    assert report["graph_count"] == 1 and report["graphs"][0]["ops"] == ["Tensor.tanh", "operator.mul"]
    assert "Traceback" in result.stderr


def test_outside_the_tested_torch_range_a_broken_seam_is_one_line_and_exit_9(tmp_path, monkeypatch):
    import torch._dynamo.cache_size as cache_size

    from pt2kit import seams

    script = tmp_path / "any.py"
    script.write_text("print('never runs')\n")
    monkeypatch.setattr(seams, "TESTED_TORCH", ((9, 99),))
    monkeypatch.delattr(cache_size, "is_recompilation")
    seams.check.cache_clear()
    try:
        result = CliRunner().invoke(main, ["--json", str(script)])
    finally:
        seams.check.cache_clear()

    assert result.exit_code == seams.SeamBroken.exit_code
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert "is not supported by pt2kit's explain" in line and "is_recompilation" in line and "minify doctor" in line
    assert json.loads(result.stdout) == {"status": "error", "message": line.removeprefix("explain: "), "exit_code": 9}
    assert "never runs" not in result.output


def test_an_internal_error_is_one_line_exit_70_and_a_json_error(tmp_path, monkeypatch):
    from explain.session import ExplainReport

    def broken(*args, **kwargs):
        raise KeyError("a pt2kit bug")

    script = tmp_path / "fine.py"
    script.write_text("x = 1\n")
    monkeypatch.setattr(ExplainReport, "from_frames", broken)

    result = CliRunner().invoke(main, ["--json", str(script)])

    assert result.exit_code == 70
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("explain: internal error (KeyError: 'a pt2kit bug'); this is a pt2kit bug, details in ")
    saved = Path(line.rpartition("details in ")[2])
    assert "Traceback" in saved.read_text() and "Traceback" not in result.stderr
    saved.unlink()
    assert json.loads(result.stdout)["status"] == "error" and json.loads(result.stdout)["exit_code"] == 70


def test_what_changed_after_a_graph_break_is_named_in_the_scripts_words():
    script = SCRIPTS / "item_recompile.py"
    report = json_report("item_recompile")

    line = marked_line(script, "graph break: .item()")
    resumed = only([f for f in report["recompiles"]["functions"] if f["resumed_at"] is not None])
    assert (resumed["function"], resumed["resumed_at"], resumed["recompiles"]) == ("forward", line, 1)
    failures = [f for entry in resumed["records"][1]["failed_guards"] for f in entry["failures"]]
    assert {(f["name"], f["scope"]) for f in failures} == {("h", "computed"), ("h.abs().max().item()", "computed")}
    shown = [f["text"] for f in failures] + resumed["remedies"]
    shown += [guard["text"] for graph in report["graphs"] for guard in graph["guards"]]
    assert not any("___stack" in text or "L[" in text for text in shown)  # dynamo's stack slots and sources
    assert any(f"line {line} (`scale = h.abs().max().item()" in remedy for remedy in resumed["remedies"])
