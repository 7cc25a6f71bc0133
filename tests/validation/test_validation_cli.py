"""``python -m validation guards|sizes`` as a user runs them, on examples/validation/.

Two runs are real subprocesses (``-P``, ``PT2KIT_AUTOLOAD=0``), started together in one
module fixture: they check that ``--json`` leaves exactly one JSON document on stdout even
when the script prints, the exit codes a shell sees, and that a usage error is one line. The rest goes through the same
click commands in-process, which saves a torch import per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from support.paths import EXAMPLES, REPO
from validation.__main__ import main

SCRIPTS = EXAMPLES / "validation"
SHAPES = SCRIPTS / "shapes.py"


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess[str]]:
    commands = {
        "planted": ["guards", "--json", "--confirm", str(SCRIPTS / "planted_static_decision.py")],
    }

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-P", "-m", "validation", *args],
            cwd=REPO,
            env={**os.environ, "PT2KIT_AUTOLOAD": "0", "COLUMNS": "120"},
            capture_output=True,
            text=True,
            timeout=300,
        )

    with ThreadPoolExecutor(len(commands)) as pool:
        futures = {name: pool.submit(run, args) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.e2e
@pytest.mark.matrix
def test_guards_json_is_one_document_and_exit_1_for_an_unsound_compile(runs):
    result = runs["planted"]
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)  # the script's own print went to stderr
    assert "eager" in result.stderr
    assert report["status"] == "unsound"
    (compile_,) = report["compiles"]
    (finding,) = [f for f in compile_["findings"] if f["kind"] == "static-decision"]
    assert finding["counterexample"] == {"L['x'].size()[0]": 3}
    assert finding["confirmed"] is True


def test_sizes_json_and_exit_0():
    result = _invoke(
        "sizes", "--json", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "0:12", "--check-brute-force"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "complete" and len(report["classes"]) == 4
    assert report["brute_force"] == {
        "points": 13,
        "disagreements": 0,
        "uncovered": 0,
        "value_dependent": 0,
        "examples": [],
    }
    assert report["specializes_on"] == []


def test_a_box_without_upper_bound_is_one_line_and_exit_2():
    result = CliRunner().invoke(main, ["sizes", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "3:"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == ["validation: the box '3:' has no upper bound: give LO:HI, e.g. 0:12"]


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_guards_sound_script_exits_0():
    result = _invoke("guards", str(SHAPES))
    assert result.exit_code == 0, result.output
    assert "guard validation: sound" in result.output


def test_guards_float_guard_is_incomplete_exit_7():
    result = _invoke("guards", "--json", "--timeout-ms", "500", str(SCRIPTS / "float_guard.py"))
    assert result.exit_code == 7, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "incomplete"
    assert any(f["kind"] == "untranslatable" for c in report["compiles"] for f in c["findings"])


def test_guards_script_raising_before_compiling_exits_3(tmp_path):
    script = tmp_path / "early.py"
    script.write_text("raise ValueError('broken before any compile')\n")
    result = _invoke("guards", str(script))
    assert result.exit_code == 3
    assert "raised before compiling anything: ValueError: broken before any compile" in result.output


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["guards", "no_such_script.py"], 2, "script not found: no_such_script.py"),
        (["guards", "EARLY"], 3, "the script raised before compiling anything: ValueError: broken"),
        (["sizes", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "3:"], 2, "has no upper bound"),
        (
            ["sizes", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "0:3", "--max-classes", "0"],
            2,
            "'--max-classes'",
        ),
        (["sizes", "--fn", f"{SHAPES}:view4", "--box", "0:3"], 2, "Missing option '--ranks'"),
        (
            ["sizes", "--fn", f"{SHAPES}:view4", "--ranks", "1", "--box", "0:3", "--bogus"],
            2,
            "No such option '--bogus'",
        ),
    ],
    ids=[
        "missing-script",
        "raises-before-compiling",
        "no-upper-bound",
        "bad-option-value",
        "missing-option",
        "unknown-option",
    ],
)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_every_error_door_is_one_line_and_its_json_twin_one_document(tmp_path, args, code, says, as_json):
    early = tmp_path / "early.py"
    early.write_text("raise ValueError('broken before any compile')\n")
    args = [str(early) if arg == "EARLY" else arg for arg in args]
    args = [args[0], *(["--json"] if as_json else []), *args[1:]]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("validation: ") and says in lines[-1], result.stderr
    if code == 2:
        assert len(lines) == 1, result.stderr  # click's own usage errors too: no usage block
    if as_json:
        document = json.loads(result.stdout)
        assert document["status"] == "error" and document["exit_code"] == code and says in document["message"]
    else:
        assert result.stdout == ""


def test_sizes_whose_brute_force_disagrees_exits_1_and_is_incomplete(tmp_path):
    module = tmp_path / "eager_only.py"
    module.write_text(
        "import torch\n\n\ndef f(x):\n"
        "    if type(x) is torch.Tensor and x.shape[0] in (7, 9, 11):  # fake tensors never run this check\n"
        "        raise ValueError('eager only')\n"
        "    return x\n"
    )
    result = _invoke("sizes", "--json", "--fn", f"{module}:f", "--ranks", "1", "--box", "0:12", "--check-brute-force")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "incomplete" and report["brute_force"]["disagreements"] > 0
    assert "brute force found" in report["reason"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["guards", "no_such_script.py"], "script not found"),
        (["sizes", "--fn", "nocolon", "--ranks", "1", "--box", "0:3"], "is not MODULE:FUNCTION"),
        (["sizes", "--fn", f"{SHAPES}:missing", "--ranks", "1", "--box", "0:3"], "has no missing"),
        (["sizes", "--fn", f"{SHAPES}:view4", "--ranks", "x", "--box", "0:3"], "--ranks"),
    ],
)
def test_usage_errors_exit_2(args, message):
    result = _invoke(*args)
    assert result.exit_code == 2
    assert message in result.output


def test_sizes_rich_output_merge_and_recompiles():
    result = _invoke("sizes", "--fn", f"{SHAPES}:view_by", "--ranks", "1,1", "--box", "0:4", "--merge", "--recompiles")
    assert result.exit_code == 0, result.output
    assert "complete" in result.output
    assert "recompiles:" in result.output
    lines = [line for line in result.output.splitlines() if line.lstrip().startswith(("0 ", "1 "))]
    assert len(lines) == 2  # merged: ok and RuntimeError


def test_sizes_loop_reports_specialization_and_max_classes_exits_7():
    result = _invoke("sizes", "--json", "--fn", f"{SHAPES}:loop", "--ranks", "1", "--box", "0:50", "--max-classes", "4")
    assert result.exit_code == 7
    report = json.loads(result.stdout)
    assert report["status"] == "incomplete"
    assert report["specializes_on"] == ["L['x'].size()[0]"]


@pytest.mark.parametrize("how", ["mark_dynamic", "dynamic=True", "automatic dynamic"])
def test_a_dropped_parity_guard_is_unsound_whatever_made_the_size_dynamic(tmp_path, how):
    # The installed guards include the range guard 2 <= x.size(0) (0/1 specialization):
    # the counterexample must respect it, an odd size of 3 or more, and be confirmed.
    script = tmp_path / "parity.py"
    compile_it = {
        "mark_dynamic": "x = torch.randn(4)\n    torch._dynamo.mark_dynamic(x, 0)\n    torch.compile(parity, backend='eager')(x)",
        "dynamic=True": "torch.compile(parity, backend='eager', dynamic=True)(torch.randn(4))",
        "automatic dynamic": "f = torch.compile(parity, backend='eager')\n    f(torch.randn(4))\n    f(torch.randn(6))",
    }[how]
    script.write_text(
        "import torch\nfrom pt2kit.seams import shape_env_faults as faults\n\n"
        "def parity(x):\n    if x.shape[0] % 2 == 0:\n        return x * 2\n    return x + 1\n\n"
        f"with faults.dropped_guards(lambda code: '% 2' in code):\n    {compile_it}\n"
    )
    result = CliRunner().invoke(main, ["guards", "--json", "--confirm", str(script)])
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["status"] == "unsound", result.output
    (finding,) = [f for c in report["compiles"] for f in c["findings"] if f["kind"] == "unsound-guard"]
    size = finding["counterexample"]["L['x'].size()[0]"]
    assert size >= 3 and size % 2 == 1 and finding["confirmed"] is True, finding
