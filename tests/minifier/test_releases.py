"""Fixed in which torch? ``--torch-versions``, ``minify versions`` and ``issue.md``.

The fast tests run repros under *fake* environments: a ``bin/python`` that runs this
interpreter with a stand-in ``torch`` package first on its path, which says the version
it is told and, when a repro imports it, passes or fails as told. The slow test runs a
genuine corpus bug under the matrix's real torch 2.15 (``make matrix-setup`` builds it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minifier.releases.checks import ReleaseCheck, fixed_in, regressed_in, signature_in_output
from minifier.releases.environments import ReleaseSpec, Unavailable, environment, parse_specs
from minifier.pages.issue import render_issue, scrub

REPO = Path(__file__).resolve().parents[2]
FAKE_TORCH = '''import sys
__version__ = {version!r}
if sys.argv and sys.argv[0].endswith(".py"):  # a repro imports it (the probe runs -c)
    line = {line!r}
    if line:
        print(line, file=sys.stderr)
    sys.exit(1 if line else 0)
'''


@pytest.fixture
def fake_env(tmp_path):
    """``fake_env(version, line)``: an environment whose torch is ``version``; a repro there prints ``line`` and
    exits 1, or, with no line, passes."""

    def make(version: str, line: str = "") -> Path:
        root = tmp_path / f"env-{version}-{'fails' if line else 'passes'}"
        (root / "site" / "torch").mkdir(parents=True)
        (root / "site" / "torch" / "__init__.py").write_text(FAKE_TORCH.format(version=version, line=line))
        (root / "bin").mkdir()
        python = root / "bin" / "python"
        python.write_text(f'#!/bin/sh\nPYTHONPATH={root / "site"} exec {sys.executable} "$@"\n')
        python.chmod(0o755)
        return root

    return make


def check(torch: str, fails: bool | None, same: bool = True, where: str = "elsewhere") -> ReleaseCheck:
    return ReleaseCheck(torch, where, fails, bool(fails) and same)


OURS = check("2.13.0+cpu", True, where="this environment")


def test_a_spec_is_a_version_or_an_environment_and_a_bad_one_is_named(tmp_path):
    specs = parse_specs(["2.15.0, 2.14.1", str(tmp_path), "2.15.0"])
    assert [s.version for s in specs] == ["2.15.0", "2.14.1", None]
    assert specs[2].path == tmp_path
    assert parse_specs(None) == [] and parse_specs("") == []
    with pytest.raises(ValueError, match="'latest' is neither a torch version"):
        parse_specs("2.15.0,latest")


@pytest.mark.parametrize(
    "others, fixed",
    [
        ([check("2.15.0+cu132", False)], "2.15.0"),
        ([check("2.14.1", False), check("2.15.0", False)], "2.14.1"),
        ([check("2.14.1", True), check("2.15.0", False)], "2.15.0"),
        # fixed, then broken again: the newest still fails, so no release fixes it
        ([check("2.14.1", False), check("2.15.0", True)], None),
        # a release that fails another way has not fixed it; one not checked says nothing
        ([check("2.15.0", True, same=False)], None),
        ([check("2.14.1", None), check("2.15.0", False)], "2.15.0"),
        # an older release that passes is not a fix
        ([check("2.12.0", False)], None),
    ],
)
def test_fixed_in_is_the_oldest_newer_release_from_which_every_newer_one_passes(others, fixed):
    assert fixed_in([OURS, *others]) == fixed
    # this environment's repro passes: there is nothing to fix
    assert fixed_in([check("2.13.0", False, where="this environment"), *others]) is None


@pytest.mark.parametrize(
    "others, regressed",
    [
        ([check("2.12.0", False)], "2.13.0"),
        ([check("2.11.0", False), check("2.12.0", True)], "2.12.0"),
        ([check("2.11.0", True), check("2.12.0", True)], None),  # as old as anything listed
        ([check("2.11.0", False), check("2.12.0", True, same=False)], None),  # another failure before it
        ([check("2.15.0", False)], None),
    ],
)
def test_regressed_in_is_where_a_failure_an_older_release_did_not_have_began(others, regressed):
    assert regressed_in([OURS, *others]) == regressed


def test_the_failure_a_repro_printed_is_read_from_its_last_exception_line():
    printed = "Traceback (most recent call last):\n  ...\ntorch._dynamo.exc.BackendCompilerFailed: RuntimeError: x\nRuntimeError: planted at 0x7f3e\n"
    signature = signature_in_output(1, printed)
    assert (signature.exception, signature.kind) == ("RuntimeError", "runtime_error")
    assert signature_in_output(0, printed) is None and signature_in_output(-11, "").kind == "crash"


def test_an_environment_that_is_not_one_is_a_note_not_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    env = environment(parse_specs(str(tmp_path / "empty"))[0])
    assert isinstance(env, Unavailable) and "not a Python environment" in env.why


@pytest.mark.e2e
def test_an_install_that_cannot_reach_an_index_is_one_line_and_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline
    env = environment(ReleaseSpec("2.99.0", version="2.99.0"), log=tmp_path / "pip.log")
    assert isinstance(env, Unavailable)
    assert env.why.startswith("installing torch 2.99.0 failed: ") and "\n" not in env.why, env.why
    assert list((tmp_path / "cache" / "pt2kit" / "torch").iterdir()) == []  # no half-built venv
    assert "torch==2.99.0" in (tmp_path / "pip.log").read_text()


def minify(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "minifier", *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.mark.e2e
def test_minify_versions_tells_which_release_fixed_a_repro_and_which_still_fail_it(tmp_path, fake_env):
    repro = tmp_path / "repro.py"
    repro.write_text("import torch\nraise RuntimeError('the kernel writes 2 lanes twice')\n")
    line = "RuntimeError: the kernel writes 2 lanes twice"
    envs = [
        fake_env("2.98.0", line),  # still fails, the same way
        fake_env("2.99.0"),  # passes
        fake_env("2.97.0", "ImportError: no module named torch._inductor"),  # fails another way
        tmp_path / "missing-env",
    ]
    done = minify("versions", "--json", "--torch-versions", ",".join(map(str, envs)), repro)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    rows = {row["torch"]: row for row in data["versions"]}
    assert rows[next(iter(rows))]["where"] == "this environment" and data["versions"][0]["fails"] is True
    assert rows["2.98.0"]["fails"] and rows["2.98.0"]["same_failure"]
    assert not rows["2.99.0"]["fails"]
    assert rows["2.97.0"]["fails"] and not rows["2.97.0"]["same_failure"] and "ImportError" in rows["2.97.0"]["note"]
    assert rows["?"]["fails"] is None and "not a Python environment" in rows["?"]["note"]
    assert data["fixed_in"] == "2.99.0" and data["regressed_in"] is None
    # the table for people says the same
    shown = minify("versions", "--torch-versions", envs[1], repro)
    assert shown.returncode == 0 and "fixed in torch 2.99.0" in re.sub(r"\s+", " ", shown.stdout)


@pytest.mark.e2e
def test_minify_versions_without_a_release_or_a_repro_is_one_line(tmp_path):
    repro = tmp_path / "repro.py"
    repro.write_text("import torch\n")
    done = minify("versions", repro)
    assert done.returncode == 2 and "--torch-versions" in done.stderr and "Traceback" not in done.stderr
    done = minify("versions", "--torch-versions", "2.15.0", tmp_path / "nope.py")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = minify("versions", "--torch-versions", "newest", repro)
    assert done.returncode == 2 and "'newest'" in done.stderr


@pytest.mark.e2e
def test_minify_run_checks_the_repro_under_each_release_and_offers_the_upgrade(in_process, model_script, fake_env, monkeypatch):
    from minifier.pages import issue
    from support.programs import minified

    monkeypatch.setenv("PT2KIT_COLLECT_ENV", "1")
    monkeypatch.setattr(issue, "_environment", None)

    script = model_script("planted_compile_error")
    fixed, broken = fake_env("2.99.0"), fake_env("2.98.0", "RuntimeError: nothing like it")
    report = minified(in_process, script, releases=parse_specs([f"{fixed},{broken}"]))
    assert [v["torch"] for v in report["versions"]][1:] == ["2.98.0", "2.99.0"]
    assert report["versions"][0] == {
        "torch": __import__("torch").__version__, "where": "this environment", "fails": True, "same_failure": True,
        "seconds": 0.0,
    }  # fmt: skip
    assert report["fixed_in"] == "2.99.0"
    assert report["workaround"]["what"] == "upgrade torch to 2.99.0" and report["workaround"]["verified_on"] == "repro"
    run_dir = Path(report["run_dir"])
    issue = (run_dir / "issue.md").read_text()
    body, _, versions = issue.partition("### Versions")
    assert "Fixed in torch 2.99.0." in body and "| 2.98.0 | fails |  |" in body
    assert Path(report["repro"]).read_text().strip().splitlines()[0] in body  # the repro inline
    assert "PyTorch version:" in versions  # collect_env's block
    assert str(run_dir) not in body and str(Path.home()) not in body and str(REPO) not in body
    assert "Other torch releases" in (run_dir / "report.html").read_text()


def test_issue_md_keeps_no_path_of_this_machine_outside_the_environment_block(tmp_path):
    run_dir = tmp_path / "run-1"
    report = {
        "failure": {"stage": "inductor", "kind": "compile_error", "exception": "CppCompileError", "message": "C++ compile error"},
        "stages": {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "pass", "inductor": "fail"},
        "ops_after": ["aten.sum.dim_IntList"],
        "nodes_before": 9,
        "nodes_after": 1,
        "workaround": {"what": "turn off cpp vectorization", "code": "import torch\ntorch._inductor.config.cpp.simdlen = 1\n", "verified_on": "program"},
    }
    repro = f"# captured from {Path.home()}/proj/train.py\nimport sys\nsys.path.insert(0, '{run_dir}/modules')\nx = 6/3\n"
    text = render_issue(report, repro, run_dir)
    assert text.startswith("# [inductor] compile_error in aten.sum.dim_IntList: CppCompileError")
    body = text.partition("### Versions")[0]
    assert "train.py" in body and str(Path.home()) not in body and str(tmp_path) not in body
    assert "x = 6/3" in body and "simdlen = 1" in body and "| result | pass | pass | pass | fail |" in body
    assert scrub("see /a/b/c.txt and ~/d/e.py, not a/b") == "see c.txt and e.py, not a/b"
    link = "https://github.com/pytorch/pytorch/issues/198081"
    assert scrub(f"upstream: {link}") == f"upstream: {link}"


def test_issue_md_without_a_repro_says_why_and_inlines_the_program_where_it_is_the_repro(tmp_path):
    # (AOTAutograd's runtime wrappers: every graph passes alone, the program fails on aot_eager: exit 5)
    script = tmp_path / "alias.py"
    script.write_text("import torch\nf = torch.compile(lambda x, y: x.mul_(2) + y)\n")
    report = {
        "status": "error",
        "message": "alias.py fails (runtime_error: AssertionError) but none of its 1 graph fails that way in isolation",
        "program_fails_at": "aot_eager",
        "script": str(script),
        "failure": {"stage": "aot_eager", "kind": "runtime_error", "exception": "AssertionError", "message": "not close"},
    }
    body = render_issue(report, None, tmp_path).partition("### Versions")[0]
    assert "pt2kit found no smaller repro: alias.py fails" in body
    assert "`python alias.py`" in body and "backend='aot_eager'" in body and "x.mul_(2) + y" in body
    assert str(tmp_path) not in body
    script.write_text("x = 1\n" * 200)  # (too long to inline: named, to attach)
    body = render_issue(report, None, tmp_path).partition("### Versions")[0]
    assert "x = 1" not in body and "200 lines: attach alias.py" in body
    script.write_text("import torch\n")
    del report["program_fails_at"]  # (exit 5 on no one backend: a compile cache's bug, say; the program still is the repro)
    body = render_issue({**report, "exit_code": 5}, None, tmp_path).partition("### Versions")[0]
    assert "Repro: the program itself, `python alias.py`:" in body and "backend=" not in body
    body = render_issue(report, None, tmp_path).partition("### Versions")[0]  # (another end: the message alone)
    assert "pt2kit found no smaller repro" in body and "Repro: the program itself" not in body
    # a torchrun job that fails in dynamo before any graph: launched as torchrun launches it, no stage claimed
    job = {**report, "exit_code": 5, "launch": "torchrun --nproc-per-node 2", "fails_in": "dynamo", "failure": {**report["failure"], "stage": None}}
    body = render_issue(job, None, tmp_path).partition("### Versions")[0]
    assert "Repro: the program itself, `torchrun --nproc-per-node 2 alias.py`:" in body and "backend=" not in body
    assert "fails in dynamo (no backend compiles yet)" in body and "None" not in body and body.startswith("# [dynamo]")


@pytest.mark.slow
def test_a_genuine_bug_fixed_in_2_15_is_said_fixed_and_one_it_still_has_is_said_to_fail(tmp_path):
    venv = REPO / ".venv-2.15"
    if not (venv / "bin" / "python").exists():
        pytest.skip("torch 2.15's environment is not built (make matrix-setup)")
    bugs = REPO / "tests" / "minifier" / "real_bugs"
    name = "inductor_floor_divide_by_inf"  # fixed in 2.15
    done = minify("run", "--json", "--accuracy", "--no-subsystem", "--torch-versions", venv, "--out", tmp_path, bugs / f"{name}.py")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["fixed_in"] == "2.15.0" and report["versions"][1]["fails"] is False, report["versions"]
    assert "Fixed in torch 2.15.0." in (Path(report["run_dir"]) / "issue.md").read_text()
    assert report["workaround"]["what"] == "upgrade torch to 2.15.0"
    # minify versions gives the same answer on the repro alone
    again = minify("versions", "--json", "--torch-versions", venv, report["repro"], cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["fixed_in"] == "2.15.0", again.stderr[-2000:]
    # a bug 2.15 still has, asked of the user's program itself (any script that fails is a repro to it)
    still = minify("versions", "--json", "--torch-versions", venv, bugs / "inductor_remainder_by_infinity.py", cwd=tmp_path)
    assert still.returncode == 0, still.stderr[-2000:]
    data = json.loads(still.stdout)
    assert [v["fails"] for v in data["versions"]] == [True, True] and data["versions"][1]["same_failure"]
    assert data["fixed_in"] is None


def test_issue_md_quotes_torchs_message_uncut_and_says_an_eager_stage_failure_is_dynamos(tmp_path):
    said = "It seems one of cond's output stride is not a simple accumulative multiplication of sizes. " * 3 + "Hint: call t.contiguous()."
    from pt2kit.signature import normalize_message

    failure = {"stage": "eager", "kind": "compile_error", "exception": "UncapturedHigherOrderOpError", "message": normalize_message(said), "details": said}
    body = render_issue({"status": "error", "message": "there is no graph to minify", "failure": failure}, None, tmp_path)
    assert "fails in dynamo, at the **eager** stage" in body and "Hint: call t.contiguous()." in body
    wrong = {"stage": "inductor", "kind": "accuracy", "exception": "AccuracyError", "message": "compiled output diverges from the fp64 reference (values)", "details": "output 0: RMSE 0.3"}
    body = render_issue({"status": "minified", "failure": wrong}, "import torch\n", tmp_path)
    assert "at the **inductor** stage with a wrong answer: `AccuracyError: compiled output diverges from the fp64 reference (values)`" in body
    bare = {"stage": "inductor", "kind": "compile_error", "exception": "AssertionError", "message": "AssertionError", "details": ""}
    body = render_issue({"status": "minified", "failure": bare}, "import torch\n", tmp_path)
    assert "with a compile error: `AssertionError`, raised with no message." in body and "AssertionError: AssertionError" not in body
    assert body.startswith("# [inductor] compile_error: AssertionError: (raised with no message)\n")


def test_issue_md_names_the_subsystem_in_full_and_reads_a_lowering_as_a_fallback_that_avoids_it(tmp_path):
    subsystem = {"backend": "inductor", "name": "lowerings", "application": 3, "detail": "aten.sum.default"}
    failure = {"stage": "inductor", "kind": "accuracy", "exception": "AccuracyError", "message": "m"}
    body = render_issue({"status": "minified", "failure": failure, "subsystem": subsystem}, "import torch\n", tmp_path)
    assert "Subsystem: inductor / lowerings / aten.sum.default (application 3)" in body
    assert "the first lowering whose fallback to eager avoids the failure" in body
