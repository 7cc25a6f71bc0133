"""Stage bisection's decisions on real dynamo and AOTAutograd, every query in this test's own process.

The e2e tests of tests/minifier/test_minifier_bisect.py ask the same questions through pt2kit's
worker processes; here :class:`~minifier.isolation.inprocess.InProcessExecutor` answers
them in place, so what the bisection decides from the answers is tested in seconds.
"""

import sys
from pathlib import Path

import pytest
import torch

from minifier.api import save_repro
from minifier.bisect.bisection import bisect_case
from pt2kit.errors import NoFailure
from minifier.repro.files import load_repro

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planted  # noqa: F401  registers the planted backends


pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


def f(x, w):
    y = torch.sin(x @ w) * 2 + 1
    return torch.cos(y).sum(dim=0)


def saved_case(tmp_path, backend):
    run_dir = save_repro(f, torch.randn(4, 8), torch.randn(8, 8), backend=backend, out=tmp_path / "saved")
    return load_repro(run_dir / "g0" / "repro.py").case


def test_a_saved_graph_is_pinned_on_the_aot_graph_its_backend_rejects(in_process, tmp_path):
    session, executor = in_process
    report = bisect_case(session, saved_case(tmp_path, "planted_compile_error"))
    dynamo = report.rows[0]
    assert {stage: outcome.status for stage, outcome in dynamo.outcomes.items()} == {
        "eager": "pass",
        "aot_eager": "pass",
        "aot_eager_decomp_partition": "pass",
        "planted_compile_error": "compile_error",
    }
    assert report.culprit is not dynamo and (report.culprit.boundary, report.culprit.kind) == ("aot", "inference")
    assert report.failure.failure.signature.message == "planted: cannot compile aten.cos"
    # every question went through the executor: the stages, the lowering, the aot graph's stages
    assert any("lowering" in label for label in executor.labels) and session.queries >= 5


def test_a_graph_that_passes_every_stage_is_no_failure(in_process, tmp_path):
    session, _ = in_process
    with pytest.raises(NoFailure, match="passes every stage"):
        bisect_case(session, saved_case(tmp_path, "aot_eager"))


def test_a_failure_only_in_the_backward_is_pinned_on_the_backward_graph(in_process, tmp_path):
    session, _ = in_process
    x, w = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)
    run_dir = save_repro(
        lambda x, w: torch.tanh(x @ w).sum(), x, w, backend="planted_backward_error", out=tmp_path / "s"
    )
    report = bisect_case(session, load_repro(run_dir / "g0" / "repro.py").case)
    by_label = {row.label: row for row in report.rows}
    assert by_label["g0.forward"].outcomes["planted_backward_error"].passed
    assert report.culprit is by_label["g0.backward"]
    assert report.failure.stage == "planted_backward_error"


def test_a_runtime_error_is_told_from_a_compile_error(in_process, tmp_path):
    session, _ = in_process
    report = bisect_case(session, saved_case(tmp_path, "planted_runtime_error"))
    assert report.failure.failure.signature.kind == "runtime_error"
    assert report.rows[0].outcomes["aot_eager"].passed


def test_the_reducer_keeps_only_the_op_the_backend_rejects(in_process, tmp_path):
    from minifier.bisect.choice import choose_graph
    from minifier.minification import Provenance, minify_case
    from minifier.unit.check import Check

    session, executor = in_process
    report = bisect_case(session, saved_case(tmp_path, "planted_compile_error"))
    row = choose_graph(report, "auto")
    outcome = row.first_failure
    check = Check(outcome.stage, outcome.failure.signature)
    result = minify_case(session, row.case, check, Provenance(outcome.failure, "k", bisect=report))
    assert result.after.op_names() == ["aten.cos.default"] and result.verified
    assert result.reduction_queries > 0 and len(executor.labels) >= session.queries > 0


def test_after_aot_where_no_aot_graph_fails_is_exit_5_naming_the_dynamo_graph(in_process, tmp_path):
    # (hunt 13: a frozen graph's aot graphs cannot be kept) the flags were right, the graphs decided: not a usage error
    from minifier.bisect.choice import choose_graph
    from pt2kit.errors import NotReproducible

    session, _ = in_process
    report = bisect_case(session, saved_case(tmp_path, "planted_dynamo_error"))
    with pytest.raises(NotReproducible, match=r"--after aot: .*; --after dynamo \(or auto\) minifies g0") as raised:
        choose_graph(report, "aot")
    assert raised.value.exit_code == 5


def test_each_query_in_process_starts_from_a_forked_childs_clean_slate(in_process):
    """What a query leaves behind in dynamo, the compiler config, grad mode or the default dtype is gone for the next
    one, as it is for a child forked from the zygote (the answers depend on it: see InProcessExecutor)."""
    import torch._dynamo.config as dynamo_config

    _, executor = in_process
    static = dynamo_config.assume_static_by_default
    symbolic: list[bool] = []

    def recording(gm, example_inputs):
        values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
        symbolic.append(any(isinstance(s, torch.SymInt) for v in values if isinstance(v, torch.Tensor) for s in v.shape))
        return gm.forward

    def cos(t):
        return t.cos()

    def leave_state_behind():
        out = torch.compile(cos, backend=recording)(torch.randn(3))
        dynamo_config.assume_static_by_default = not static
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        return out.shape

    def what_is_left():
        torch.compile(cos, backend=recording)(torch.randn(5))  # one frame, a second size: dynamic if dynamo remembered
        return dynamo_config.assume_static_by_default, torch.is_grad_enabled(), torch.get_default_dtype()

    assert executor.start(leave_state_behind).result().value == (3,)
    assert executor.start(what_is_left).result().value == (static, True, torch.float32)
    assert symbolic == [False, False]


def test_a_lighter_stage_failing_otherwise_leaves_the_graph_minified_where_it_fails_the_programs_way():
    # pytorch#190908: aot_eager_decomp_partition drops an effect token (StopIteration) where the program's
    # Inductor fails otherwise; the lighter stage's failure is another bug, which the program never met
    from minifier.bisect.report import Row, program_failure
    from minifier.stages.run import Outcome
    from pt2kit.signature import Failure, Signature

    programs = Failure(Signature("compile_error", "RuntimeError", "Expected positional argument for parameter arg_#"))
    other = Failure(Signature("runtime_error", "StopIteration", "StopIteration"))
    stages = {"eager": None, "aot_eager": None, "aot_eager_decomp_partition": other, "inductor": programs}

    def row():
        return Row("g0", "dynamo", "dynamo", 4, None, {s: Outcome(s, f, 0.1) for s, f in stages.items()})

    lighter = row()
    note = program_failure(lighter, programs, False)
    assert lighter.first_failure.stage == "inductor" and lighter.first_failure.failure == programs
    assert note.startswith("g0 fails otherwise at aot_eager_decomp_partition (runtime_error: StopIteration")
    assert lighter.record(list(stages)).stages["aot_eager_decomp_partition"] == "runtime_error"  # (the table keeps it)
    # report.json's stage table names the stage that broke: the lighter one reads `other`, never `fail`
    table = {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "other", "inductor": "fail"}
    assert lighter.table(list(stages)) == table
    same = row()  # the first failure is the program's, or no stage fails its way: nothing changes
    assert program_failure(same, other, False) is None and same.first_failure.stage == "aot_eager_decomp_partition"
    assert same.table(list(stages))["aot_eager_decomp_partition"] == "fail"
    unknown = Failure(Signature("runtime_error", "ValueError", "something else"))
    assert program_failure(same, unknown, False) is None and same.first_failure.stage == "aot_eager_decomp_partition"


def test_a_function_that_eager_refuses_is_saved_and_minified_to_the_op_eager_refuses(in_process, tmp_path):
    # pytorch#197095 through the API: interpolate of an empty height, which eager refuses and a compiled
    # run returns; save_repro keeps the graph it saved, and with accuracy eager's own error is no target
    from torch._dynamo import register_backend

    from minifier.api import EAGER_RAISED
    from minifier.minification import minify_repro

    # (a name of its own: test_reduce_units.py registers "pt2kit_test_lenient", perhaps in this worker)
    register_backend(lambda gm, example_inputs: lambda *args: (torch.zeros(1, 2, 4, 4),), name="pt2kit_test_lenient_api")

    def step(x):
        return torch.nn.functional.interpolate(x * 2, size=(4, 4), mode="bilinear") + 1

    run_dir = save_repro(step, torch.randn(1, 2, 0, 3), backend="pt2kit_test_lenient_api", out=tmp_path / "saved")
    assert (run_dir / EAGER_RAISED).read_text().startswith("RuntimeError: Input and output sizes should be greater")
    session, _ = in_process
    result = minify_repro(session, run_dir / "g0" / "repro.py", accuracy=True, out=tmp_path / "out")
    assert result.failure.stage == "pt2kit_test_lenient_api" and "(eager raises RuntimeError: " in str(result.failure.failure)
    assert result.bisect.rows[0].table(list(result.bisect.rows[0].outcomes))["eager"] == "other"
    assert result.after.op_names() == ["torch.nn.functional.interpolate"] and result.verified


def test_a_saved_graph_whose_eager_backward_raises_is_minified_where_the_compiler_fails(in_process, tmp_path):
    # pytorch#158561 through the API, no accuracy: AOTAutograd raises at compile time what eager raises
    # only in the backward; with no recorded failure the target was the first failing stage, eager's
    # "raises in plain eager too", so the repro failed without a compiler
    from minifier.minification import minify_repro
    from minifier.stages.run import RAISES_IN_EAGER

    def step(y):
        z = torch.relu(y)
        z.copy_(y)
        return z

    run_dir = save_repro(step, torch.randn(3, 2, requires_grad=True), backend="aot_eager", out=tmp_path / "saved")
    session, _ = in_process
    result = minify_repro(session, run_dir / "g0" / "repro.py", out=tmp_path / "out")
    row = result.bisect.rows[0]
    assert row.outcomes["eager"].failure.signature.message.startswith(RAISES_IN_EAGER)
    assert result.failure.stage == "aot_eager" and row.table(list(row.outcomes))["eager"] == "other"
    assert "modified by an inplace operation" in str(result.failure.failure) and result.verified
    assert "relu" in " ".join(result.after.op_names())
    assert any(n.startswith("g0 raises at eager as plain eager does; it is minified at aot_eager") for n in result.notes), (result.notes, result.bisect.note)


def test_a_dynamo_graph_raising_in_plain_eager_is_named_where_every_graph_was_said_right_alone(tmp_path):
    """Hunt g: dynamo adds ``assert u1 <= 2`` for an unbacked size of 4 and the program fails under dynamo alone;
    exit 5 said each graph was right alone, though g0 raised on the program's own inputs. That graph is named now."""
    from minifier.bisect.plainly import DYNAMO_OUTSIDE_ITS_GRAPHS, dynamo_graph_raising
    from minifier.bisect.report import Row
    from minifier.stages.run import RAISES_IN_EAGER, Outcome
    from pt2kit.signature import Failure, Kind, Signature

    def row(message: str, boundary: str = "dynamo") -> Row:
        failure = Failure(Signature(Kind.RUNTIME_ERROR, "RuntimeError", message))
        return Row("g0", boundary, boundary, 3, None, {"eager": Outcome("eager", failure, 0.1)}, None, tmp_path / "g0" / "repro.py")

    asserted = "Runtime assertion failed for expression u# <= 2 on node 'le'"
    said = dynamo_graph_raising([row(RAISES_IN_EAGER + asserted)])
    assert said is not None and f"RuntimeError: {asserted}" in said and "captured/g0/repro.py" in said
    assert "right alone" not in said and "right alone" in DYNAMO_OUTSIDE_ITS_GRAPHS
    # a graph failing otherwise (not in plain eager), or an aot graph's eager raise (its inputs came from a compiled
    # graph before it), says nothing of how dynamo traced
    assert dynamo_graph_raising([row(asserted)]) is None
    assert dynamo_graph_raising([row(RAISES_IN_EAGER + asserted, boundary="aot")]) is None


def test_dynamo_raising_as_it_builds_a_frames_guards_is_said_so_and_not_a_wrong_graph(tmp_path):
    """Hunt 13: "Guard failed on the same frame it was created" (mark_unbacked, a later call of size 1) got the
    paragraph for a wrong answer dynamo computes (its tracing, a missing guard, a side effect); the capture
    knows it was raised compiling the frame, past its tracing, and exit 5 says that, with explain to read."""
    import torch
    from minifier.bisect.plainly import DYNAMO_OUTSIDE_ITS_GRAPHS, dynamo_alone_said
    from minifier.capture.frames import where_it_failed
    from pt2kit.seams import dynamo_exc

    def f(x, y):
        return (x + y).sum(0)

    compiled = torch.compile(f, backend="eager")
    torch._dynamo.reset()
    with pytest.raises(AssertionError, match="Guard failed on the same frame") as raised:
        for n in (3, 1):
            x = torch.randn(n, 4)
            torch._dynamo.decorators.mark_unbacked(x, 0)
            compiled(x, torch.randn(3, 4))
    assert where_it_failed(raised.value) == "runtime" and dynamo_exc.raised_compiling_a_frame(raised.value)
    said = dynamo_alone_said([], True, "torch/_dynamo/guards.py:4500, in __init__")
    assert "building its guards" in said and "guards.py:4500" in said and "python -m explain" in said
    assert "a guard is missing" not in said and "python -m explain" in DYNAMO_OUTSIDE_ITS_GRAPHS
    assert dynamo_alone_said([], False, None) == DYNAMO_OUTSIDE_ITS_GRAPHS


def test_a_graph_calling_a_setter_of_torchs_global_state_is_named():
    """Hunt i: ``torch.set_default_dtype(torch.float64)`` inside a compiled function; AOTAutograd runs it only while
    it traces, every graph's outputs are right, and exit 5 named only AOTAutograd's runtime wrappers."""
    import torch.fx as fx

    from minifier.bisect.plainly import state_setters

    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(torch.set_default_dtype, (torch.float64,))
    graph.call_function(torch.manual_seed, (0,))
    graph.output(graph.call_function(torch.mul, (x, 2)))
    setting = fx.GraphModule({}, graph)
    plain = fx.GraphModule({}, fx.Graph())
    plain.graph.output(plain.graph.call_function(torch.sin, (plain.graph.placeholder("x"),)))
    assert state_setters([("g0", setting), ("g1", plain)]) == ["g0 calls torch.set_default_dtype", "g0 calls torch.manual_seed"]
    assert state_setters([("g1", plain)]) == []
    # (hunt 12) a setter called again with another value brackets a region, as torch.func.grad's do: not named
    bracket = fx.Graph()
    y = bracket.placeholder("x")
    bracket.call_function(torch.set_default_dtype, (torch.float64,))
    bracket.call_function(torch.set_default_dtype, (torch.float32,))
    bracket.output(bracket.call_function(torch.mul, (y, 2)))
    assert state_setters([("g2", fx.GraphModule({}, bracket))]) == []


def test_a_saved_repro_that_now_fails_otherwise_says_so_in_its_report(in_process, tmp_path):
    # hunt l: the env-var hook asked for an aot repro and wrote a dynamo graph's, saying why only on the console
    from torch._dynamo import register_backend

    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.minification import minify_repro
    from minifier.repro.files import write_repro
    from pt2kit.signature import Signature

    def picky_today(gm, example_inputs):
        if any(n.target is torch.cos for n in gm.graph.nodes):
            raise RuntimeError("picky: cos today")
        return gm.forward

    register_backend(picky_today, name="pt2kit_test_picky_today")
    gm = torch.fx.symbolic_trace(lambda x: (torch.cos(x).sin(),))
    case = make_case(gm, [torch.randn(4)], backend=BackendInfo("pt2kit_test_picky_today", []), index=0, in_backend=False)
    yesterday = Signature("runtime_error", "RuntimeError", "picky: sin yesterday")
    path = write_repro(case, tmp_path / "g0", stage="pt2kit_test_picky_today", failure=yesterday)
    session, _ = in_process
    result = minify_repro(session, path, out=tmp_path / "out")
    assert "picky: cos today" in str(result.failure.failure)
    assert any("now fails with" in n and "picky: sin yesterday" in n for n in result.notes), result.notes


def test_a_wrong_answer_minified_where_the_program_failed_otherwise_says_so(tmp_path):
    """(hunt 12: `options={...}` with a gemm backend list Inductor cannot meet) the program failed to compile; under
    --accuracy its graph alone gave a wrong answer, which any failure matches, and the run said nothing of the two."""
    from minifier.bisect.culprit import finish
    from minifier.bisect.report import BisectReport, Row
    from minifier.stages.run import Outcome
    from pt2kit.signature import Failure, Kind, Signature

    original = Failure(Signature(Kind.COMPILE_ERROR, "NoValidChoicesError", "No choices to select"))
    wrong = Outcome("inductor", Failure(Signature(Kind.ACCURACY, "AccuracyError", "compiled output diverges")), 0.1)
    row = Row("g0", "dynamo", "dynamo", 3, None, {"eager": Outcome("eager", None, 0.1), "inductor": wrong})

    class Clock:
        queries, seconds = 7, 1.0

    report = finish(Clock(), BisectReport("p.py", "inductor", True, tmp_path, original, [row], culprit=row))
    assert "the program failed with compile_error: NoValidChoicesError" in report.note and "g0 alone gives one" in report.note
    assert finish(Clock(), report).note == report.note  # (said once)
    asserted = Failure(Signature(Kind.RUNTIME_ERROR, "AssertionError", "Tensor-likes are not close!"))
    assert not finish(Clock(), BisectReport("p.py", "inductor", True, tmp_path, asserted, [row], culprit=row)).note
