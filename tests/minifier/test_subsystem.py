"""Below the stage: the subsystem that breaks a graph, and a workaround the unchanged program runs with.

``minify run`` ends, once its repro is written, by asking torch's CompilerBisector which
subsystem of the failing stage breaks the minimized graph (minifier/bisect/subsystem.py), and
by trying workarounds, narrowest first, until the program runs to the end with one.
The scenarios ported from upstream's test_compiler_bisector.py check the subsystem
names upstream's bisector gives (tests/minifier/test_torch_scenarios.py::test_subsystem_is_upstreams);
here, what pt2kit adds: the choice of workarounds, a planted backend no bisector knows,
and real Inductor bugs whose workaround this test applies itself. The genuine torch bugs
whose ``CASE`` names a subsystem are checked the same way on their one ``minify run``
(tests/minifier/test_real_bugs.py::test_subsystem_and_workaround_are_the_bugs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minifier.minification import minify_script
from minifier.bisect.subsystem import Subsystem, workarounds

from support.paths import EXAMPLES
from support.running import run_program


def test_workarounds_go_from_the_narrowest_to_a_lighter_backend():
    lowering = Subsystem("inductor", "lowerings", 3, "aten.relu.default")
    options = workarounds(lowering, "inductor", "inductor")
    assert [o.stage for o in options] == ["inductor", "aot_eager_decomp_partition"]
    assert "torch.ops.aten.relu.default" in options[0].code and "make_fallback(op, " in options[0].code
    # a table change the graph caches' keys do not see: the user's warm cache would serve the failing graph again
    assert "fx_graph_cache = " in options[0].code and "enable_autograd_cache = " in options[0].code
    assert "kwargs['backend'] = 'aot_eager_decomp_partition'" in options[-1].code

    config = Subsystem("inductor", "inductor_fallback_random", 0, "fallback_random = True", ("inductor", "fallback_random", True))
    assert workarounds(config, "inductor", "inductor")[0].code.endswith("torch._inductor.config.fallback_random = True\n")
    cse = Subsystem("aot_eager_decomp_partition", "aot_eager_decomp_partition_cse", 0, "cse = False", ("aot_eager_decomp_partition", "cse", False))
    first, last = workarounds(cse, "aot_eager_decomp_partition", "aot_eager_decomp_partition")
    assert first.code.endswith("torch._functorch.config.cse = False\n") and last.stage == "aot_eager"

    passes = workarounds(Subsystem("inductor", "post_grad_passes", 2, "reinplace_inplaceable_ops"), "inductor", "inductor")
    assert "disabled_passes = 'reinplace_inplaceable_ops'" in passes[0].code
    # a detail that is not a pass's name is not pasted into code; nothing found leaves the last resort
    assert len(workarounds(Subsystem("inductor", "post_grad_passes", 2, "<lambda> at 0x7f"), "inductor", "inductor")) == 1
    assert [o.stage for o in workarounds(None, "my_backend", "my_backend")] == ["aot_eager"]
    # the lighter backend is the stage below the failing one; a failure in dynamo's tracing has none
    assert [o.stage for o in workarounds(None, "aot_eager", "aot_eager")] == ["eager"]
    assert workarounds(None, "eager", "eager") == []
    # a graph whose outputs the program's loss weighed: first, its gradients laid out densely (an overlapping output)
    weighed = workarounds(None, "aot_eager", "inductor", weighed=True)
    assert [o.stage for o in weighed] == ["aot_eager", "eager"] and "guess_tangent_strides_as_outputs = False" in weighed[0].code


def test_a_workaround_under_which_the_graph_raises_as_eager_does_runs_it_right():
    # pytorch#195402: eager raises IndexError (the program catches it) where Inductor aborts; the lighter backend
    # raises eager's IndexError, which is running right. A graph that raises only compiled is not.
    import torch

    import planted  # noqa: F401  registers planted_compile_error (it rejects torch.cos)
    from minifier.bisect.subsystem import Option, passes_with_code
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo

    def case_of(fn, *args):
        grabbed = {}

        def grab(gm, example_inputs):
            grabbed.update(gm=gm, inputs=example_inputs)
            return gm.forward

        torch._dynamo.reset()
        torch.compile(fn, backend=grab)(*args)
        return make_case(grabbed["gm"], grabbed["inputs"], backend=BackendInfo("planted_compile_error", []), index=0)

    lighter = Option("", "a lighter backend", "aot_eager")
    out_of_bounds = case_of(lambda x, idx: (x.sin() * 2)[idx], torch.randn(1, 4), torch.tensor([0]))
    out_of_bounds.inputs[1].value.fill_(1)  # (traced in bounds; run out of them, as the program did)
    assert passes_with_code(out_of_bounds, lighter, False)
    in_bounds = case_of(lambda x: x.cos() * 2, torch.randn(4))
    assert not passes_with_code(in_bounds, Option("", "the same backend", "planted_compile_error"), False)


def test_a_lowering_inside_a_cond_branch_is_named_by_its_op_and_a_shared_name_offers_each_op():
    # Inductor lowers a cond branch as a graph of its own and the bisector names the node it lowered:
    # the branch's sum_1 is aten.sum.dim_IntList, the outer graph's sum_1 aten.sum.default
    import torch
    from torch._dynamo.backends.common import aot_autograd

    from minifier.bisect.subsystem import _detail
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from pt2kit.seams.compiler_bisector import Found

    grabbed = {}

    def grab(gm, example_inputs):
        grabbed.update(gm=gm, inputs=example_inputs)
        return gm.forward

    def f(x):
        s = x.sum()
        return torch.cond(s > 0, lambda x: x.cos().sum(0), lambda x: x.sin().prod(0), (x,)) + s

    torch._dynamo.reset()
    torch.compile(f, backend=aot_autograd(fw_compiler=grab), fullgraph=True)(torch.randn(3, 4))
    case = make_case(grabbed["gm"], grabbed["inputs"], backend=BackendInfo("inductor", []), index=0)

    def lowered(name):
        return _detail(Found("inductor", "lowerings", 1, name, None), case)

    assert lowered("prod") == ("aten.prod.dim_int", ("aten.prod.dim_int",))
    detail, ops = lowered("sum_1")
    assert (detail, ops) == ("sum_1", ("aten.sum.default", "aten.sum.dim_IntList"))
    options = workarounds(Subsystem("inductor", "lowerings", 1, detail, None, ops), "inductor", "inductor")
    assert [o.what.split()[1] for o in options[:2]] == list(ops) and options[-1].stage == "aot_eager_decomp_partition"
    assert lowered("no_such_node") == ("no_such_node", ())


def test_a_config_change_the_bisector_asks_for_is_applied_to_the_query_even_without_inductors_own_compile(tmp_path):
    # an aot graph's query calls Inductor's inner compile, which never reads the bisector's config change itself
    import torch._inductor.config as inductor_config
    import torch._functorch.config as functorch_config

    from minifier.bisect.probes import under_bisector
    from pt2kit.seams import compiler_bisector

    for stage, name, config, key, value in (
        ("inductor", "inductor_emulate_precision_casts", inductor_config, "emulate_precision_casts", True),
        ("aot_eager_decomp_partition", "aot_eager_decomp_partition_cse", functorch_config, "cse", False),
    ):
        directory = str(tmp_path / name)
        compiler_bisector.disable_whole(stage, name, directory)
        before = getattr(config, key)
        assert before != value
        with under_bisector(stage, directory):
            assert getattr(config, key) == value, name
        assert getattr(config, key) == before


@pytest.mark.e2e
def test_a_backend_no_bisector_knows_gets_the_lighter_backend_the_program_runs_with(session, model_script, tmp_path, monkeypatch):
    from minifier import afterwards

    reports, write = [], afterwards.write_run_report
    monkeypatch.setattr(afterwards, "write_run_report", lambda where, data: (reports.append(data), write(where, data))[1])
    result = minify_script(session, model_script("planted_compile_error"), [], out=tmp_path / "runs", subsystem=True)
    # the workaround is in the report once it fixes the repro, before the program runs with it; then verified there
    said = [(r["workaround"]["verified_on"], r.get("pending")) for r in reports if r.get("workaround")]
    assert said == [("repro", ["below the stage"]), ("program", None)]
    assert result.below is not None and result.below.subsystem is None
    assert result.below.workaround is not None and result.below.workaround.verified_on == "program"
    assert "kwargs['backend'] = 'aot_eager'" in result.below.workaround.code
    data = json.loads((result.run_dir / "report.json").read_text())
    assert data["subsystem"] is None and data["workaround"]["verified_on"] == "program"
    assert "# Workaround (the program runs to the end with it): compile with aot_eager" in result.repro.read_text()


@pytest.mark.e2e
def test_minify_run_leaves_the_programs_run_with_the_workaround_to_the_background_and_it_adds_its_answer(model_script, tmp_path):
    import os
    import time

    from minifier.bisect.program_check import PENDING

    script = model_script("planted_compile_error")
    env = {**os.environ, "PT2KIT_SUBSYSTEM": "1"}
    env.pop("PT2KIT_WAIT")
    command = [sys.executable, "-m", "minifier", "run", "--json", "--out", str(tmp_path / "runs"), str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    # at exit: the workaround seen on the repro; the program's run with it to come
    assert printed["workaround"]["verified_on"] == "repro" and printed["workaround"]["verified"] is False
    assert printed["pending"] == [PENDING] and "runs with the workaround in the background" in done.stderr
    run_dir = Path(printed["repro"]).parent
    report = run_dir / "report.json"
    deadline = time.monotonic() + 300
    while PENDING in json.loads(report.read_text()).get("pending", []) and time.monotonic() < deadline:
        time.sleep(0.5)
    data = json.loads(report.read_text())
    assert "pending" not in data, (run_dir / "logs" / "program-check.log").read_text()
    assert data["workaround"]["verified_on"] == "program" and data["workaround"]["verified"] is True
    assert data["timeline"][-1]["step"].endswith("with the workaround, in the background")
    assert "# Workaround (the program runs to the end with it): compile with aot_eager" in (run_dir / "repro.py").read_text()
    assert "ran to the end" in (run_dir / "logs" / "program-check.log").read_text()


def test_the_background_check_keeps_the_workaround_the_program_ran_with_or_says_why_none(tmp_path):
    from minifier.afterwards import add_program_check
    from minifier.bisect.program_check import CHECK_FILE, PENDING, SEEN, ProgramCheck, say_in_header

    (tmp_path / "work").mkdir()
    first = ProgramCheck(str(tmp_path / "train.py"), [], "import torch\n", "the narrow one", 3.0, [["pass\n", "a lighter backend"]])
    (tmp_path / CHECK_FILE).write_text(json.dumps(first.__dict__))
    lighter = ProgramCheck(first.script, [], "pass\n", "a lighter backend", 3.0)
    for ran, timed_out, said, failed in (
        (None, False, "train.py still fails with the workaround", []),
        (None, True, "train.py did not end in time", []),
        (first, False, None, []),
        # (the program still failed with the first: the next that fixes the repro, and why the workaround changed)
        (lighter, False, "train.py still fails with the workaround 'the narrow one' (IndexError: another bug)", [("the narrow one", "IndexError: another bug")]),
    ):
        workaround = {"code": first.code, "what": first.what, "verified_on": "repro", "verified": False}
        (tmp_path / "report.json").write_text(json.dumps({"status": "minified", "workaround": workaround, "pending": [PENDING], "notes": [], "failure": {"stage": "inductor", "kind": "compile_error", "exception": "E", "message": "m"}}))
        (tmp_path / "repro.py").write_text("# pt2kit repro\nimport torch\n")
        say_in_header(tmp_path / "repro.py", first.code, first.what, "repro")
        add_program_check(tmp_path, ran, 2.5, timed_out=timed_out, failed=failed)
        data = json.loads((tmp_path / "report.json").read_text())
        header = (tmp_path / "repro.py").read_text()
        assert "pending" not in data and header.count("# Workaround (") == 1
        if ran is None:
            assert data["workaround"]["verified_on"] == "repro" and data["workaround"]["verified"] is False
            outcome = "did not end in time" if timed_out else "still fails"
            assert said in " ".join(data["notes"]) and SEEN[outcome] in header and data["workaround"]["program"] == outcome
            assert f"(repro.py passes with it; the program {outcome} with it)" in (tmp_path / "issue.md").read_text()
            assert f"verified on repro.py; the program {outcome} with it" in (tmp_path / "report.html").read_text()
        else:
            assert data["workaround"] == {"code": ran.code, "what": ran.what, "verified_on": "program", "verified": True}
            assert f"# Workaround ({SEEN['program']}): {ran.what}." in header
            assert (said in " ".join(data["notes"])) if said else data["notes"] == [], data["notes"]


@pytest.mark.e2e
def test_a_program_that_checks_none_of_its_answers_has_its_workaround_verified_on_the_graph_not_by_running_to_the_end(session, model_script, tmp_path):
    # its wrong answer is --accuracy's finding: it ran to the end before any workaround, so running to the end says nothing
    script = model_script("planted_accuracy")
    assert run_program(script).returncode == 0
    result = minify_script(session, script, [], accuracy=True, out=tmp_path / "runs", subsystem=True)
    assert result.below is not None and result.below.workaround is not None
    assert result.below.workaround.verified_on == "graph"
    assert any("checks none of its answers" in note for note in result.notes)
    data = json.loads((result.run_dir / "report.json").read_text())
    assert data["workaround"]["verified"] is False


@pytest.mark.e2e
def test_bisect_names_the_workaround_under_its_stage_table(model_script, tmp_path):
    script = model_script("planted_runtime_error")
    command = [sys.executable, "-m", "minifier", "bisect", "--subsystem", "--out", str(tmp_path / "runs"), str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (written,) = (tmp_path / "runs").glob("run-*/report.json")  # what --json prints (tests/minifier/test_minifier_cli.py)
    report = json.loads(written.read_text())
    assert report["status"] == "bisected" and report["subsystem"] is None
    assert report["workaround"]["verified"] is True and "'aot_eager'" in report["workaround"]["code"]
    assert "workaround" in done.stdout and "compile with aot_eager instead of" in done.stdout


@pytest.mark.slow
def test_inductors_relu_bug_is_its_lowering_and_falling_back_lets_the_program_run(session, tmp_path):
    script = tmp_path / "relu_compile_error.py"
    shutil.copy(EXAMPLES / script.name, script)
    result = minify_script(session, script, [], out=tmp_path / "runs", subsystem=True)

    assert result.below is not None and result.below.subsystem is not None and (result.below.subsystem.backend, result.below.subsystem.name) == ("inductor", "lowerings")
    assert result.below.subsystem.detail == "aten.relu.default" and result.below.confirmed is True
    assert not list(result.run_dir.glob("pt2kit-*"))  # the bisector's working directories are gone
    workaround = result.below.workaround
    assert workaround is not None and workaround.verified_on == "program" and "make_fallback" in workaround.code
    # the program fails as it is, and runs to the end with the workaround pasted before it
    assert run_program(script).returncode != 0
    assert run_program(script, workaround.code).returncode == 0


@pytest.mark.slow
def test_the_bisectors_first_questions_are_asked_while_the_repro_runs_elsewhere(session, tmp_path, monkeypatch):
    monkeypatch.delenv("PT2KIT_VERIFY_ELSEWHERE", raising=False)  # (the suite's default skips the run elsewhere)
    session.worker.slots = 2  # one core for the run elsewhere, one for the questions
    asked = []  # (label, when the query was handed to a worker)
    start = session.start
    monkeypatch.setattr(session, "start", lambda fn, label, **kw: asked.append((label, session.timeline.seconds)) or start(fn, label, **kw))
    script = tmp_path / "relu_compile_error.py"
    shutil.copy(EXAMPLES / script.name, script)
    result = minify_script(session, script, [], out=tmp_path / "runs", subsystem=True)

    assert result.verified and result.below is not None and result.below.subsystem is not None
    assert (result.below.subsystem.name, result.below.subsystem.detail) == ("lowerings", "aten.relu.default")
    elsewhere = next(step.ended for step in result.timeline if step.step.startswith("running repro.py elsewhere"))
    disabled = [step.step for step in result.timeline if ": without " in step.step]
    # every subsystem disabled whole was asked once (the drill-down read the answers asked ahead), and the
    # first was handed to a worker while the repro ran elsewhere. (When it ran is the cores' business: at
    # the lowest priority, on a loaded machine, it may get no CPU before the run ends.)
    assert len(set(disabled)) == len(disabled) >= 2
    assert next(when for label, when in asked if ": without " in label) < elsewhere


def _max_error(script: Path, code: str, cache: Path) -> float:
    """The largest |compiled - eager| ``relu_accuracy.py`` prints, run with ``code`` first, on the Inductor cache ``cache``."""
    runner = f"import runpy\nexec({code!r}, {{}})\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
    env = {"PATH": "/usr/bin:/bin", "TORCHINDUCTOR_CACHE_DIR": str(cache), "PT2KIT_AUTOLOAD": "0", "HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return max(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_lowering_workaround_holds_on_the_users_warm_cache(tmp_path):
    # The user's cache holds the wrong graph their failing runs compiled (a wrong answer compiles, and is
    # cached under a key that does not see the lowering table); the workaround must not be served it.
    from pt2kit.seams.compiler_bisector import fallback_code

    script, cache = tmp_path / "relu_accuracy.py", tmp_path / "cache"
    shutil.copy(EXAMPLES / script.name, script)
    workaround = fallback_code("aten.relu.default")
    assert _max_error(script, "", cache) > 0.1  # the bug, now in the cache
    without_caches_off = workaround.split("import torch._inductor.config")[0]
    assert _max_error(script, without_caches_off, cache) > 0.1  # (what the lines keep from happening)
    assert _max_error(script, workaround, cache) < 1e-3


def _minified(session, tmp_path, source: Path, **options):
    script = tmp_path / source.name
    shutil.copy(source, script)
    result = minify_script(session, script, [], out=tmp_path / "runs", subsystem=True, **options)
    assert result.below is not None, result.notes
    return script, result


@pytest.mark.slow
def test_a_real_models_wrong_post_grad_pass_is_named_and_turned_off(session, tmp_path):
    # a transformer encoder layer under a library's custom post-grad pass that turns relu into abs
    script, result = _minified(session, tmp_path, Path(__file__).resolve().parent / "subsystem_programs" / "transformer_post_grad_pass.py", accuracy=True)
    assert result.below.subsystem is not None and (result.below.subsystem.name, result.below.subsystem.detail) == ("post_grad_passes", "post_grad_custom_post_pass")
    assert result.below.confirmed is True
    assert result.below.workaround is not None and "disabled_passes = 'post_grad_custom_post_pass'" in result.below.workaround.code
    assert run_program(script).returncode != 0
    assert run_program(script, result.below.workaround.code).returncode == 0


def test_a_question_asked_ahead_is_read_as_the_search_reads_it_a_crash_fails_a_timeout_is_asked_again():
    # A crash of the graph's own (an Inductor kernel's abort) is the answer "it still fails": the drill-down
    # reads it so, and once asked ahead it must not ask it again (BERT's abort: 8 of 9 asked twice).
    # A timeout asked at the lowest CPU priority may be starvation: not an answer.
    import signal

    from minifier.bisect.probes import ahead_answer
    from minifier.isolation.worker import QueryResult
    from pt2kit.signature import signature_of_crash, signature_of_timeout

    assert ahead_answer(QueryResult(True, None, 0.1)) is True
    assert ahead_answer(QueryResult(False, None, 0.1)) is False
    assert ahead_answer(QueryResult(None, signature_of_crash(signal.SIGABRT), 0.1)) is False
    assert ahead_answer(QueryResult(None, signature_of_timeout(60.0), 60.0)) is None


def test_a_lowering_workaround_falls_back_its_in_place_twin_too():
    """(hunt 12, pytorch#171493 on CPU) the repro's graph holds ``index_put`` where the program's post-grad graph,
    after Inductor's reinplacing, holds ``index_put_``: falling back the one named left the program failing."""
    import torch
    from torch._inductor import lowering

    from pt2kit.seams.compiler_bisector import fallback_code, in_place_twin

    assert in_place_twin("aten.index_put.default") == "aten.index_put_.default"
    assert in_place_twin("aten.add_.Tensor") == "aten.add.Tensor" and in_place_twin("prims.iota.default") is None
    saved = dict(lowering.lowerings), set(lowering.fallbacks)
    try:
        exec(fallback_code("aten.index_put.default"), {})
        assert {torch.ops.aten.index_put.default, torch.ops.aten.index_put_.default} <= lowering.fallbacks
        exec(fallback_code("aten.relu.default"), {})  # (a twin torch has no lowering of its own: still no error)
    finally:
        lowering.lowerings.clear()
        lowering.lowerings.update(saved[0])
        lowering.fallbacks.clear()
        lowering.fallbacks.update(saved[1])


def test_the_config_a_repro_needs_is_offered_held_at_its_default_whatever_the_program_sets():
    """(hunt 12: a frozen weight slice under max-autotune) the only workaround was the last resort; the config the
    repro needs to fail, held at torch's default, is offered before it. Held: the program's own write and
    ``torch.compile(mode=...)``'s ``config.patch`` read the default, so the program verifies it unchanged."""
    import torch._inductor.config as inductor_config

    needed = {"freezing": True, "force_disable_caches": True, "max_autotune_gemm_backends": "CPP"}  # (a pick list: by timing)
    options = workarounds(None, "inductor", "inductor", config={"torch._inductor.config": needed})
    held, last = options
    assert "freezing" in held.what and "False" in held.what and last.stage == "aot_eager_decomp_partition"
    entry = inductor_config._config["freezing"]
    saved = entry.env_value_force
    try:
        with inductor_config.patch(freezing=False):  # (puts back what the test writes)
            exec(held.code, {})
            inductor_config.freezing = True
            with inductor_config.patch(freezing=True):
                assert inductor_config.freezing is False
    finally:
        entry.env_value_force = saved
