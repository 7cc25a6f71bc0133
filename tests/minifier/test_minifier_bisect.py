"""Stage bisection on real dynamo and AOTAutograd, with planted backend bugs (tests/support/user_modules/planted.py)."""


import pytest

from minifier.bisect.bisection import bisect_script
from pt2kit.errors import FlakyFailure, NoFailure, ScriptNotFound
from pt2kit.script import resolve_script

from support.paths import USER_MODULES

# Every test here runs the program end to end, with pt2kit's capture armed. What is decided
# from the answers (stages, culprit, accuracy, flakiness) is asked in-process (the
# ``in_process`` fixture), the way tests/minifier/test_bisect_inprocess.py asks it of saved
# graphs; the tests of a crash, a hang and of questions asked while the program still runs
# keep pt2kit's worker processes (the ``session`` fixture).
pytestmark = pytest.mark.e2e


def stages_of(row):
    return {stage: outcome.status for stage, outcome in row.outcomes.items()}


def test_compile_error_in_final_stage_names_graph_and_stage(in_process, model_script):
    session, _ = in_process
    report = bisect_script(session, model_script("planted_compile_error"), [])
    dynamo = report.rows[0]
    assert stages_of(dynamo) == {
        "eager": "pass",
        "aot_eager": "pass",
        "aot_eager_decomp_partition": "pass",
        "planted_compile_error": "compile_error",
    }
    # the failure is pinned on the aot graph the planted compiler rejects
    assert report.culprit.boundary == "aot" and report.culprit.kind == "inference"
    failure = report.failure.failure.signature
    assert (failure.kind, failure.exception, failure.message) == ("compile_error", "RuntimeError", "planted: cannot compile aten.cos")
    assert report.culprit.frame["name"] == "f"
    data = report.to_json()
    assert data["graph"] == {"boundary": "aot", "index": 0, "kind": "inference", "label": "g0.inference"}
    assert data["failure"]["stage"] == "planted_compile_error"


def test_abort_in_compiled_code_is_a_crash_and_pt2kit_survives(session, model_script):
    report = bisect_script(session, model_script("planted_crash"), [])
    assert report.original.signature.kind == "crash"
    signature = report.failure.failure.signature
    assert (signature.kind, signature.exception) == ("crash", "SIGABRT")


def test_hang_in_compiled_code_is_a_timeout(session, model_script):
    session.timeout = 8
    report = bisect_script(session, model_script("planted_hang"), [])
    assert report.original.signature.kind == "timeout"
    assert report.failure.failure.signature.kind == "timeout"
    assert report.failure.stage == "planted_hang"


def test_accuracy_needs_the_flag_and_is_judged_against_fp64(in_process, model_script):
    session, _ = in_process
    script = model_script("planted_accuracy")
    with pytest.raises(NoFailure, match="--accuracy"):
        bisect_script(session, script, [])
    report = bisect_script(session, script, [], accuracy=True)
    assert stages_of(report.rows[0]) == {
        "eager": "pass",
        "aot_eager": "pass",
        "aot_eager_decomp_partition": "pass",
        "planted_accuracy": "accuracy",
    }
    assert "RMSE vs fp64" in report.failure.failure.details


def test_with_accuracy_the_programs_own_compiled_run_is_judged_not_compiled_again(in_process, model_script):
    session, _ = in_process
    # The capture judges each aot graph's first compiled run against eager and fp64 on its
    # real inputs; that verdict stands for the final stage of its dynamo graph, and, when a
    # minification follows to confirm it (trust_program), of the aot graph itself: no
    # isolated query compiles either through the planted backend
    script = model_script("planted_accuracy")
    report = bisect_script(session, script, [], accuracy=True, trust_program=True)
    by_label = {row.label: row for row in report.rows}
    assert stages_of(by_label["g0"])["planted_accuracy"] == "accuracy"
    assert report.culprit is by_label["g0.inference"]
    final = report.culprit.outcomes["planted_accuracy"]
    assert final.seen_in_program and "RMSE vs fp64" in final.failure.details
    assert not [step for step in (t.step for t in session.timeline) if "through planted_accuracy" in step], session.timeline
    # nor is the aot graph run eagerly again: the judge did, and an eager run is its own reference
    assert report.culprit.outcomes["aot_eager_decomp_partition"].passed
    assert not [step for step in (t.step for t in session.timeline) if step.startswith("g0.inference") and "aot_eager_decomp_partition" in step], session.timeline
    # minify bisect confirms the aot graph alone (once), and still not the dynamo graph
    report = bisect_script(session, script, [], accuracy=True)
    assert not report.culprit.outcomes["planted_accuracy"].seen_in_program
    asked = [step for step in (t.step for t in session.timeline) if "through planted_accuracy" in step]
    assert len(asked) == 1 and asked[0].startswith("g0.inference"), asked


def test_an_aot_graph_judged_right_does_not_clear_its_dynamo_graph(in_process, model_script):
    session, _ = in_process
    # A bug before AOTAutograd (Inductor's pre-grad passes, its decompositions) is already
    # in the aot graph the capture judges against itself: it is judged right. The dynamo
    # graph's final stage must still be asked, and it is the one that goes wrong
    script = model_script("planted_pre_aot")
    report = bisect_script(session, script, [], accuracy=True, trust_program=True)
    dynamo = report.rows[0]
    assert dynamo.label == "g0" and stages_of(dynamo)["planted_pre_aot"] == "accuracy"
    assert not dynamo.outcomes["planted_pre_aot"].seen_in_program
    assert report.culprit is dynamo
    # its aot compilers are closures inside a plain function backend: no repro can name them
    assert "cannot name" in report.note, report.note


def test_stages_are_asked_while_the_program_runs_and_never_twice(session, tmp_path):
    # g0 compiles fine, then the program sleeps: the worker warms up and asks g0's stages
    # meanwhile; g1 fails. Every (graph, stage) is asked once, early or in the batch.
    script = tmp_path / "program.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\n"
        "import time\nimport torch\nimport planted  # noqa: F401\n\n"
        "def f(x):\n    return torch.sin(x) * 2 + 1\n\n"
        "def g(x):\n    return torch.cos(x).exp()\n\n"
        "if __name__ == '__main__':\n"
        "    print(torch.compile(f, backend='planted_compile_error')(torch.randn(4)))\n"
        "    time.sleep(10)\n"
        "    print(torch.compile(g, backend='planted_compile_error')(torch.randn(4)))\n"
    )
    report = bisect_script(session, script, [])
    by_label = {row.label: row for row in report.rows}
    assert set(stages_of(by_label["g0"]).values()) == {"pass"} and len(by_label["g0"].outcomes) == 4
    assert stages_of(by_label["g1"])["planted_compile_error"] == "compile_error"
    early = [step for step in (t.step for t in session.timeline) if step.endswith("while the program runs")]
    assert any(step.startswith("g0 (") and " through " in step for step in early), session.timeline
    asked = [t.step.removesuffix(", while the program runs") for t in session.timeline if " through " in t.step]
    assert len(asked) == len(set(asked)), asked


def test_failure_in_dynamo_tracing_is_an_eager_stage_failure(in_process, tmp_path):
    session, _ = in_process
    script = tmp_path / "bad_fake.py"
    script.write_text(
        "import torch\n"
        "@torch.library.custom_op('tests::rowsum', mutates_args=())\n"
        "def rowsum(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x.sum(dim=1)\n"
        "@rowsum.register_fake\n"
        "def _(x):\n"
        "    return x.new_empty(x.shape[0] + 1)\n"
        "def f(x):\n"
        "    return rowsum(torch.sin(x)) + torch.ones(x.shape[0])\n"
        "if __name__ == '__main__':\n"
        "    torch.compile(f, backend='eager')(torch.randn(4, 8))\n"
    )
    report = bisect_script(session, script, [])
    culprit = report.culprit
    assert culprit.label == "frame f"
    assert culprit.first_failure.stage == "eager"
    assert stages_of(culprit)["eager"] == "compile_error"
    assert culprit.frame["lineno"] == 9
    assert "Attempting to broadcast a dimension of length 4" in report.failure.failure.signature.message
    # the frame was lifted (make_fx on its real arguments) into a graph that fails the same way
    assert "tests.rowsum.default" in culprit.case.op_names()
    # the op lives in the script: the repro carries its definition, never imports the script
    assert culprit.case.modules == []
    assert "@rowsum.register_fake" in culprit.case.definitions and "torch.compile(f" not in culprit.case.definitions


def test_backend_override_replaces_the_scripts_backend(in_process, model_script):
    session, _ = in_process
    report = bisect_script(session, model_script("aot_eager"), [], backend="planted_runtime_error")
    assert report.backend == "planted_runtime_error"
    assert report.failure.stage == "planted_runtime_error"


def test_missing_script():
    with pytest.raises(ScriptNotFound) as info:
        resolve_script("/nonexistent/model.py")
    assert info.value.exit_code == 2


def test_flaky_failure_is_reported_not_bisected(in_process, model_script, tmp_path, monkeypatch):
    session, _ = in_process
    monkeypatch.setenv("PLANTED_FLAKY_COUNTER", str(tmp_path / "counter"))
    with pytest.raises(FlakyFailure, match="flaky"):
        bisect_script(session, model_script("planted_flaky"), [])


def test_a_program_under_no_grad_is_bisected_under_no_grad(in_process, tmp_path):
    session, _ = in_process
    # Its weights require grad, but it runs under no_grad: AOTAutograd makes an inference
    # graph. Run with grad on, the dynamo graph would become a forward graph (and pass).
    script = tmp_path / "infer.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\n"
        "import torch\nimport planted  # noqa: F401\n\n"
        "def f(x, w):\n    return torch.cos(x @ w).sum(dim=0)\n\n"
        "x, w = torch.randn(8, 16), torch.randn(16, 16, requires_grad=True)\n"
        "with torch.no_grad():\n    torch.compile(f, backend='planted_inference_error')(x, w)\n"
    )
    report = bisect_script(session, script, [])
    dynamo = report.rows[0]
    assert dynamo.case.grad_enabled is False and dynamo.case.backward is False
    assert stages_of(dynamo)["planted_inference_error"] == "compile_error"
    assert report.culprit.kind == "inference"
    source = (session.run_dir / "captured" / "g0" / "repro.py").read_text()
    assert "with torch.no_grad():" in source


def test_a_wrong_answer_lent_to_a_dynamo_graph_may_read_otherwise_alone(in_process, tmp_path):
    session, _ = in_process
    # The fake kernel says float32, the kernel gives float64: AOTAutograd drops the .float(). The capture
    # judges the aot graph against itself (both float64): only planted_accuracy's half is wrong, "values".
    # Alone, the dynamo graph's output is float64 where eager's is float32 from aot_eager on: still the
    # wrong answer the program had, not a graph other than the program's
    script = tmp_path / "program.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\n"
        "import torch\nimport planted  # noqa: F401\n\n"
        "@torch.library.custom_op('pt2kit_test::widen', mutates_args=())\n"
        "def widen(x: torch.Tensor) -> torch.Tensor:\n    return x.double() * 2\n\n"
        "@widen.register_fake\ndef _(x):\n    return torch.empty_like(x)\n\n"
        "def f(x):\n    return torch.cos(widen(x * 3).float())\n\n"
        "x = torch.randn(4, 4)\nout = torch.compile(f, backend='planted_accuracy')(x)\n"
        "torch.testing.assert_close(out, f(x))\n"
    )
    report = bisect_script(session, script, [], accuracy=True, trust_program=True)
    dynamo = report.rows[0]
    assert stages_of(dynamo) == {
        "eager": "pass",
        "aot_eager": "accuracy",
        "aot_eager_decomp_partition": "accuracy",
        "planted_accuracy": "accuracy",
    }
    assert report.culprit is dynamo and report.failure.stage == "aot_eager"
    assert "shape or dtype: torch.float64 where eager gives torch.float32" in report.failure.failure.signature.message


def test_a_backend_failure_dynamo_breaks_around_alone_is_compiled_whole_as_the_program_compiled_it(in_process, tmp_path):
    session, _ = in_process
    # A fake kernel that reads a value: under fullgraph=True AOTAutograd fails on its unbacked size, and the
    # program raises. A stage compiles the graph again without fullgraph, and dynamo breaks the graph at the
    # backend's failure and runs it eagerly: every stage passes, unless compiled whole as the program did
    script = tmp_path / "program.py"
    script.write_text(
        "import torch\n\n"
        "@torch.library.custom_op('pt2kit_test::first_k', mutates_args=())\n"
        "def first_k(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:\n    return x[: int(k.item())].clone()\n\n"
        "@first_k.register_fake\ndef _(x, k):\n    return x.new_empty((int(k.item()),) + x.shape[1:])\n\n"
        "def f(x, k):\n    return first_k(x.sin(), k).cos()\n\n"
        "print(torch.compile(f, backend='aot_eager', fullgraph=True)(torch.randn(6, 2), torch.tensor(3)))\n"
    )
    report = bisect_script(session, script, [])
    plain, whole = report.rows[0], report.culprit
    assert set(stages_of(plain).values()) == {"pass"} and plain.case.frame["fullgraph"] is True
    assert whole.label == "g0 (compiled whole)" and whole.case.fullgraph
    assert stages_of(whole)["eager"] == "pass" and stages_of(whole)["aot_eager"] == "compile_error"
    assert report.failure.failure.signature.exception == report.original.signature.exception == "GuardOnDataDependentSymNode"
    assert "the program compiled g0 with fullgraph=True" in report.note, report.note
    # report.json's stage table is the graph compiled whole's, not the plain one's beside it
    from minifier.result import Bisected

    statuses = Bisected.of(report, whole.case, report.failure.failure.signature).statuses
    assert statuses is not None and (statuses["eager"], statuses["aot_eager"]) == ("pass", "fail"), statuses
