"""The ``minify`` command and the ``TORCHDYNAMO_REPRO_AFTER`` hook, run as a user runs them."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.paths import EXAMPLES
from support.programs import minified
from pt2kit.signature import DIAGNOSTIC_SEPARATOR, compiler_diagnostic

MINIFY = [sys.executable, "-m", "minifier"]


def minify(*args, cwd=None, env=None, timeout=600):
    return subprocess.run([*MINIFY, *map(str, args)], capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.mark.e2e
def test_run_writes_a_repro_and_json_report(model_script, tmp_path):
    done = minify("run", "--json", "--out", tmp_path / "runs", model_script("planted_runtime_error"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout holds the JSON and nothing else
    assert report["status"] == "minified"
    assert report["ops_after"] == ["aten.cos.default"]
    assert report["failure"]["kind"] == "runtime_error"
    run_dir = Path(report["run_dir"])
    assert json.loads((run_dir / "report.json").read_text()) == report
    assert (run_dir / "repro.py").is_file() and Path(report["repro"]) == run_dir / "repro.py"
    # drawn again from report.json alone: the same JSON, the same table
    again = minify("show", "--json", run_dir)
    assert again.returncode == 0 and json.loads(again.stdout) == report
    table = minify("show", run_dir / "report.json")
    assert table.returncode == 0 and "Minified" in table.stdout and "aten.cos.default" in table.stdout
    assert "runtime_error at" in table.stdout and str(run_dir / "repro.py") in table.stdout.replace("\n", "")


@pytest.mark.e2e
def test_a_sticky_device_error_minifies_as_one_crash_though_it_surfaces_in_the_compile_then_at_run_time(model_script, tmp_path):
    """The program's large graph meets the illegal access in its compile; the cos alone meets it at run time.
    Named by the error itself, it stays one failure while the graph shrinks, and the repro shows it."""
    done = minify("run", "--json", "--out", tmp_path / "runs", model_script("planted_device_error"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    failure = report["failure"]
    assert (failure["kind"], failure["exception"]) == ("crash", "DeviceError")
    assert failure["message"] == "CUDA error: an illegal memory access was encountered"
    assert report["ops_after"] == ["aten.cos.default"]
    alone = subprocess.run([sys.executable, report["repro"]], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert alone.returncode != 0 and "AcceleratorError: CUDA error: an illegal memory access" in alone.stderr


@pytest.mark.parametrize(
    ("script", "code", "message"),
    [
        ("missing.py", 2, "minify: script not found: {path}"),
        # (these two run the program under capture, end to end)
        pytest.param("fine.py", 1, "ran to the end without failing", marks=[pytest.mark.e2e, pytest.mark.matrix]),
        pytest.param(
            "early.py",
            3,
            "raised before torch.compile compiled anything: ValueError: bad input",
            marks=[pytest.mark.e2e, pytest.mark.matrix],
        ),
    ],
)
def test_bad_input_gets_one_line_and_its_exit_code(tmp_path, script, code, message):
    (tmp_path / "fine.py").write_text("import torch\nprint(torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)))\n")
    (tmp_path / "early.py").write_text("import torch\nraise ValueError('bad input')\n")
    path = tmp_path / script
    done = minify("run", "--out", tmp_path / "runs", path)
    assert done.returncode == code
    assert message.format(path=path) in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.e2e
def test_a_failure_in_dynamos_tracing_files_the_program_as_its_repro(tmp_path):
    # (pytorch#197718: dynamo asserts on sym_ite's int branch; there is no graph, and exit 5's issue.md holds the program)
    script = tmp_path / "sym_ite.py"
    script.write_text(
        "import torch\n\ndef f(x):\n    n = x.shape[0]\n    return torch.ones(torch.sym_ite(n > 2, n, 1))\n\n"
        "torch.compile(f, backend='eager', dynamic=True, fullgraph=True)(torch.randn(4, 3))\n"
    )
    done = minify("run", "--out", tmp_path / "runs", script)
    assert done.returncode == 5 and "dynamo's own tracing of frame f" in done.stderr, done.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "report.json").read_text())["exit_code"] == 5
    issue = (run_dir / "issue.md").read_text().partition("### Versions")[0]
    assert "Repro: the program itself, `python sym_ite.py`:" in issue and "torch.sym_ite(n > 2, n, 1)" in issue, issue


ALIASING_OP = """
import torch

lib = torch.library.Library("pt2kit_ci", "FRAGMENT")  # noqa: TOR901
lib.define("same(Tensor x) -> Tensor")
lib.impl("same", lambda x: x, "CompositeExplicitAutograd")  # returns its input: an alias


def f(x):
    return torch.ops.pt2kit_ci.same(x) + 1


torch.compile(f, backend="aot_eager")(torch.ones(3))
"""


@pytest.mark.e2e
def test_a_repro_made_on_a_ci_machine_fails_the_same_way_elsewhere(tmp_path, in_process, monkeypatch):
    """torch turns a custom op's aliasing into an error only when ``$CI`` is set; the repro pins it.

    The program runs under capture in its own process, on the "CI machine" (``$CI`` set, so torch's
    config defaults differ there); the queries are asked in this one."""
    script = tmp_path / "alias.py"
    script.write_text(ALIASING_OP)
    monkeypatch.setenv("CI", "1")
    report = minified(in_process, script)
    monkeypatch.delenv("CI")
    assert report["config"] == {"torch._functorch.config": {"error_on_custom_op_aliasing": True}}
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    ran = subprocess.run([sys.executable, report["repro"]], capture_output=True, text=True, env=env, timeout=600)
    assert ran.returncode != 0 and "RuntimeError: pt2kit_ci::same" in ran.stderr, ran.stderr[-1500:]


@pytest.mark.e2e
def test_unknown_backend_exit_code(model_script, tmp_path):
    done = minify("bisect", "--backend", "no_such_backend", "--out", tmp_path / "runs", model_script("planted_compile_error"))
    assert done.returncode == 4
    assert "unknown backend 'no_such_backend'" in done.stderr


@pytest.mark.e2e
@pytest.mark.matrix
def test_bisect_json(model_script, tmp_path):
    done = minify("bisect", "--json", "--out", tmp_path / "runs", model_script("planted_backward_error", train=True))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    shown = minify("show", report["run_dir"])  # the stage table again, from report.json alone
    assert shown.returncode == 0 and "Stage bisection of" in shown.stdout and "First failure" in shown.stdout
    assert "✗ compile_error" in shown.stdout and json.loads(minify("show", "--json", report["run_dir"]).stdout) == report
    report = json.loads(done.stdout)
    assert report["failure"]["stage"] == "planted_backward_error"
    assert report["graph"]["kind"] == "backward"
    rows = {row["label"]: row for row in report["graphs"]}
    assert rows["g0"]["stages"]["eager"] == "pass"
    assert rows["g0.forward"]["stages"]["planted_backward_error"] == "pass"
    assert rows["g0.backward"]["first_failure"] == "planted_backward_error"
    (written,) = (tmp_path / "runs").glob("run-*/report.json")
    assert json.loads(written.read_text()) == report  # --json prints the run's report.json


@pytest.mark.e2e
def test_ctrl_c_leaves_a_repro_and_rerun_resumes(model_script, tmp_path):
    script = model_script("planted_compile_error")
    out = tmp_path / "runs"
    slow = {**os.environ, "PLANTED_DELAY": "0.5"}  # each query takes half a second or more
    # A shell starts background jobs with SIGINT ignored, and Python keeps an inherited
    # SIG_IGN: give the command the terminal's default, as a user's Ctrl-C would find it.
    restore_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    process = subprocess.Popen([*MINIFY, "run", "--out", str(out), str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=slow, preexec_fn=restore_sigint)
    deadline = time.monotonic() + 300
    while not list(out.glob("run-*/checkpoint.json")):  # the reduction has started
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "run the same command again to resume" in stderr
    first = next(out.glob("run-*"))
    assert json.loads((first / "checkpoint.json").read_text())["status"] == "interrupted"
    assert (first / "repro.py").is_file()

    done = minify("run", "--json", "--out", out, script)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["resumed_from"] == str(first)
    assert report["ops_after"] == ["aten.cos.default"]
    assert Path(report["run_dir"]) != first


@pytest.mark.e2e
def test_sigterm_is_an_interrupt_that_keeps_the_best_repro_and_says_so_in_report_json(model_script, tmp_path):
    # torchrun stopping a rank, a batch system's time limit and `kill` all send SIGTERM.
    script = model_script("planted_compile_error")
    out = tmp_path / "runs"
    slow = {**os.environ, "PLANTED_DELAY": "0.5"}
    process = subprocess.Popen([*MINIFY, "run", "--out", str(out), str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=slow)
    deadline = time.monotonic() + 300
    while not list(out.glob("run-*/checkpoint.json")):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    run = next(out.glob("run-*"))
    assert json.loads((run / "report.json").read_text())["status"] == "interrupted"
    assert json.loads((run / "checkpoint.json").read_text())["status"] == "interrupted"
    assert (run / "repro.py").is_file()


@pytest.mark.e2e
def test_repro_after_aot_env_var_arms_pt2kit(model_script, tmp_path):
    script = model_script("planted_compile_error")
    repro_dir = tmp_path / "repros"
    env = {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_DIR": str(repro_dir), "PT2KIT_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=600)
    assert done.returncode != 0  # the program still fails as it would have
    assert "planted: cannot compile aten.cos" in done.stderr
    (run_dir,) = repro_dir.glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "minified" and report["ops_after"] == ["aten.cos.default"]
    assert report["graph"]["boundary"] == "aot"
    # torch's own minifier stayed out, in every thread (it writes run_* dirs, checkpoints/ and repro.py)
    assert not list(repro_dir.glob("run_*")) and not (tmp_path / "checkpoints").exists() and not (tmp_path / "repro.py").exists()


@pytest.mark.e2e
def test_repro_level_4_catches_a_wrong_answer_and_minifies_it(model_script, tmp_path):
    script = model_script("planted_accuracy")
    env = {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "4", "TORCHDYNAMO_REPRO_DIR": str(tmp_path / "repros"), "PT2KIT_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=600)
    assert done.returncode != 0 and "AccuracyError" in done.stderr  # the wrong answer now stops the program
    (run_dir,) = (tmp_path / "repros").glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["failure"]["kind"] == "accuracy" and report["verified"]
    assert "aten.cos.default" in report["ops_after"]


@pytest.mark.e2e
def test_repro_level_1_dumps_without_minifying(model_script, tmp_path):
    script = model_script("planted_compile_error")
    env = {"TORCHDYNAMO_REPRO_AFTER": "dynamo", "TORCHDYNAMO_REPRO_LEVEL": "1", "TORCHDYNAMO_REPRO_DIR": str(tmp_path / "repros"), "PT2KIT_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=600)
    assert done.returncode != 0
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "repro.py").exists()  # torch's minifier stayed out
    (run_dir,) = (tmp_path / "repros").glob("run-*")
    source = (run_dir / "repro.py").read_text()
    assert "not minified" in source and "torch.ops.aten" not in source  # the whole dynamo graph
    assert "not known to fail" not in source  # the header names what failed
    assert re.search(r"^#   compile_error: \w+", source, re.MULTILINE), source[:600]
    assert not (run_dir / "report.json").exists()


@pytest.mark.e2e
def test_minify_repro_reads_torchs_launcher_format(tmp_path):
    """A repro in the format torch's after_aot minifier writes (repro.py / minifier_launcher.py)."""
    launcher = tmp_path / "minifier_launcher.py"
    launcher.write_text(
        "import torch\n"
        "from torch import tensor, device\n"
        "import torch._inductor.config\n"
        "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'\n"
        "torch._inductor.config.comprehensive_padding = True\n"
        "from torch.nn import *\n"
        "class Repro(torch.nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "    def forward(self, arg0_1, arg1_1):\n"
        "        mm = torch.ops.aten.mm.default(arg0_1, arg1_1);  arg0_1 = arg1_1 = None\n"
        "        sin = torch.ops.aten.sin.default(mm);  mm = None\n"
        "        relu = torch.ops.aten.relu.default(sin);  sin = None\n"
        "        exp = torch.ops.aten.exp.default(relu);  relu = None\n"
        "        return (exp,)\n"
        "def load_args(reader):\n"
        "    buf0 = reader.storage(None, 512)\n"
        "    reader.tensor(buf0, (8, 16), is_leaf=True)  # arg0_1\n"
        "    buf1 = reader.storage(None, 1024)\n"
        "    reader.tensor(buf1, (16, 16), is_leaf=True)  # arg1_1\n"
        "load_args._version = 0\n"
        "mod = Repro()\n"
        "if __name__ == '__main__':\n"
        "    from torch._dynamo.repro.after_aot import run_repro\n"
        "    with torch.no_grad():\n"
        "        run_repro(mod, load_args, accuracy=False, command='minify', save_dir=None, tracing_mode='real', check_str=None)\n"
    )
    done = minify("repro", "--json", "--out", tmp_path / "runs", launcher)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ops_after"] == ["aten.relu.default"]
    assert report["failure"]["exception"] == "CppCompileError"
    # of torch's two config lines, only the one the failure needs is kept
    assert report["config"] == {"torch._inductor.config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}}


def test_corrupt_repro_is_a_clear_error(tmp_path):
    broken = tmp_path / "repro.py"
    broken.write_text("# pt2kit repro\nPT2KIT = {'version': 1, 'inputs': [\n")
    done = minify("repro", "--out", tmp_path / "runs", broken)
    assert done.returncode == 6
    assert "not valid Python" in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- #
# Real Inductor, end to end, on the bundled examples (slow)
# --------------------------------------------------------------------------- #

EXPECTED = {
    # example: (extra flags, first failing stage, failure kind, culprit graph kind)
    "relu_compile_error.py": ([], "inductor", "compile_error", "inference"),
    "relu_runtime_error.py": ([], "inductor", "crash", "forward"),
    "relu_accuracy.py": (["--accuracy"], "inductor", "accuracy", "inference"),
    "backward_only.py": ([], "bw_tanh_bug", "compile_error", "backward"),
    "custom_op_bad_fake.py": ([], "eager", "compile_error", "dynamo"),
}


#: The examples with a planted Inductor codegen bug in ``aten.relu``: ``minify run`` (whose report carries
#: bisect's stage table) is asked of them, and their repro is one relu failing alone with torch only.
RELU_EXAMPLES = {"relu_compile_error.py": ["aten.relu.default"], "relu_runtime_error.py": ["aten.relu.default"], "relu_accuracy.py": ["aten.relu.default"]}


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_each_example_fails_at_its_first_failing_stage_and_a_relu_bug_minifies_to_relu(example, tmp_path):
    flags, stage, kind, graph_kind = EXPECTED[example]
    command = "run" if example in RELU_EXAMPLES else "bisect"
    done = minify(command, "--json", *flags, "--out", tmp_path / "runs", EXAMPLES / example, cwd=EXAMPLES)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["failure"]["stage"], report["failure"]["kind"], report["graph"]["kind"]) == (stage, kind, graph_kind)
    label = report["graph"].get("label")  # (bisect's; run's culprit is the row of its kind that fails)
    culprit = next(row for row in report["graphs"] if (row["label"] == label if label else row["kind"] == graph_kind and row["first_failure"]))
    assert culprit["first_failure"] == stage
    # stages are listed in pipeline order: every stage before the culprit passed
    # (later ones may be skipped, or fail too when an early stage is the culprit)
    order = list(culprit["stages"])
    # (an aot graph is not run through the dynamo-level stages: those are None)
    assert all(culprit["stages"][s] in ("pass", None) for s in order[: order.index(stage)])
    assert "pass" in [culprit["stages"][s] for s in order[: order.index(stage)]] or stage == "eager"
    assert culprit["stages"][stage] == kind
    if example in RELU_EXAMPLES:
        minified_to_relu(example, report)


def minified_to_relu(example, report):
    assert report["ops_after"] == RELU_EXAMPLES[example] and report["verified"]
    assert report["config"] == {"torch._inductor.config": {"cpp.inject_relu_bug_TESTING_ONLY": example.split("relu_")[1].removesuffix(".py")}}
    # the repro is a bug report: plain torch, runnable on its own, fails the same way
    repro = Path(report["repro"])
    blocker = "import sys, runpy\nsys.modules['minifier'] = None\nrunpy.run_path(sys.argv[1], run_name='__main__')\n"
    ran = subprocess.run([sys.executable, "-c", blocker, str(repro)], capture_output=True, text=True, cwd=repro.parent, timeout=600)
    assert ran.returncode != 0
    if report["failure"]["kind"] == "crash":
        assert ran.returncode == -signal.SIGABRT
    else:  # a C++ error's message carries gcc's diagnostic, printed on a line of its own
        head, _, diagnostic = report["failure"]["message"].partition(DIAGNOSTIC_SEPARATOR)
        assert report["failure"]["exception"] + ": " + head in ran.stderr
        assert not diagnostic or compiler_diagnostic(ran.stderr) == diagnostic


@pytest.mark.slow
def test_env_var_hook_works_after_a_plain_pip_install(model_script, tmp_path):
    """A wheel install (not editable) puts the autoload .pth in site-packages, and it works."""
    import sysconfig

    from support.paths import REPO

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    # torch and the other dependencies come from this environment's site-packages (no download)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    build = tmp_path / "src"
    shutil.copytree(REPO, build, ignore=shutil.ignore_patterns(".venv*", ".cache", ".git", "runs", "torch_compile_debug", "*.egg-info", "build"))
    # build the wheel with this environment's setuptools, install it into the fresh venv
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(build)], check=True, timeout=600)
    (wheel,) = wheels.glob("pt2kit-*.whl")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], check=True, timeout=600)
    assert (site / "pt2kit-autoload.pth").is_file()

    script = model_script("planted_compile_error")
    env = {**os.environ, "TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_DIR": str(tmp_path / "repros"), "PT2KIT_AUTOLOAD": "1"}
    done = subprocess.run([str(python), str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode != 0
    (run_dir,) = (tmp_path / "repros").glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["ops_after"] == ["aten.cos.default"]
    assert str(build) not in (run_dir / "repro.py").read_text()  # nothing of pt2kit's in the repro


def test_a_pt2kit_bug_is_one_line_exit_70_and_keeps_the_run_directory(tmp_path, monkeypatch):
    """pt2kit's own failure: never a traceback, never exit 1 ("nothing failed"); JSON says error."""
    from click.testing import CliRunner

    import minifier.minification
    from minifier.cli import main

    def broken(*args, **kwargs):
        raise KeyError("a bug of ours")

    monkeypatch.setattr(minifier.minification, "minify_script", broken)
    script = tmp_path / "any.py"
    script.write_text("print('hi')\n")
    result = CliRunner().invoke(main, ["run", "--json", "--out", str(tmp_path / "runs"), str(script)])
    assert result.exit_code == 70
    report = json.loads(result.stdout)
    assert report["status"] == "error" and "internal error (KeyError" in report["message"]
    assert "Traceback" not in result.output
    (run_dir,) = (tmp_path / "runs").glob("run-*")
    assert json.loads((run_dir / "report.json").read_text())["status"] == "error"
    assert "a bug of ours" in (run_dir / "logs" / "internal-error.txt").read_text()


def test_help_lists_every_exit_code_a_command_can_end_with():
    # a user who meets exit 5 reads --help first: every code pt2kit's errors end with is there, and nothing else
    import inspect

    from click.testing import CliRunner

    import pt2kit.errors
    from minifier.cli import main
    from pt2kit.errors import EXIT_CODES, MINIFY_EXIT_HELP
    from pt2kit.seams import SeamBroken

    codes = {
        cls.exit_code
        for _, cls in inspect.getmembers(pt2kit.errors, inspect.isclass)
        if issubclass(cls, pt2kit.errors.UserFacingError) and cls is not pt2kit.errors.UserFacingError
    } | {0, SeamBroken.exit_code}  # (0: a repro was written)
    listed = {int(code) for code in re.findall(r"(?:^|[:;] ?|\n)(\d+) ", MINIFY_EXIT_HELP.replace("\b\n", ""))}
    assert listed == codes and listed <= set(EXIT_CODES), (listed, codes)
    for command in ("run", "bisect", "repro"):
        shown = CliRunner().invoke(main, [command, "--help"]).output
        assert "Exit codes: 0 a repro was written" in shown and "70 pt2kit's own bug" in shown, command
