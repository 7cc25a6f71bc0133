"""Categories of genuine bugs the corpus had no case of, each met by a program of its own.

- the body of a higher-order op with state of its own (a ``cond`` branch that builds a tensor constant),
  and a failure that needs the branch;
- a script whose carried definitions start with ``from __future__ import annotations``;
- the context around the compiled call (an outer ``torch.autocast``, the default dtype, matmul precision);
- a failure inside dynamo's own tracing, recorded as the torch calls dynamo saw;
- a dynamic graph right on its first call's sizes and wrong on a later call's (the last, smaller batch);
- config the program's environment set (``TORCHINDUCTOR_FREEZING=1``), which torch calls its default;
- a dynamo graph dynamo will not trace again (a ``while_loop`` in the form dynamo wrote it).

The programs run under capture in their own process, as ``minify run`` runs them; the queries are asked in
this test's process; each repro then runs with torch alone, in another directory, on an empty Inductor cache.
"""

from __future__ import annotations

import operator
import textwrap
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from support.programs import minified
from support.running import run_repro_without_pt2kit, torch_alone

pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


BRANCH_BACKEND = """
import torch
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func


def branch_nodes(gm):
    nodes = []
    for child in gm.children():
        if isinstance(child, torch.fx.GraphModule):
            nodes += list(child.graph.nodes) + branch_nodes(child)
    return nodes


def fw(gm, example_inputs):
    # a compiler that mishandles scatter_add inside a branch, and only there
    if any(n.target == torch.ops.aten.scatter_add.default for n in branch_nodes(gm)):
        raise RuntimeError("cannot lower scatter_add in a cond branch")
    return make_boxed_func(gm.forward)


backend = aot_autograd(fw_compiler=fw)
"""


def scatter_in_a_branch(x, y):
    def true_fn(x, y):
        index = torch.tensor([0, 1, 0, 2])  # make_fx keeps it as the branch's own constant
        return torch.zeros(3).scatter_add(0, index, x.cos()) + y.sum()

    def false_fn(x, y):
        return x[:3].sin() + y.sum()

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


def test_a_body_s_own_constant_is_written_with_it_and_read_back(tmp_path):
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.repro.files import load_repro, write_repro
    from minifier.stages.run import run_case

    x, y = torch.ones(4), torch.randn(5)
    gm = make_fx(scatter_in_a_branch)(x, y)
    assert [n.target for n in gm.true_graph_0.graph.find_nodes(op="get_attr")] == ["_tensor_constant0"]
    case = make_case(gm, [x, y], backend=BackendInfo("eager", []), index=0, in_backend=False)
    assert set(case.constants) == {"true_graph_0._tensor_constant0"}
    path = write_repro(case, tmp_path / "g0", stage="eager")
    read = load_repro(path).case
    assert torch.equal(read.constants["true_graph_0._tensor_constant0"], torch.tensor([0, 1, 0, 2]))
    outcome = run_case(read, "eager", accuracy=True)  # rebuilt, it runs and computes what the program did
    assert outcome.failure is None



def test_a_rebuilt_body_makes_its_tensors_from_data_as_dynamo_recorded_them():
    # pytorch#185482: Inductor fails on the lowering of a branch's torch.tensor(data); a body that froze it
    # into a constant of its own compiled otherwise, and the failure never showed alone
    from minifier.unit.runtime import graph_module

    class Branch(torch.nn.Module):
        def forward(self, t):
            index = torch.tensor([[0, 1], [1, 0]], dtype=torch.long)
            return t.scatter_add(1, index, torch.ones(2, 2)) + t.sum()

    body = graph_module(Branch())
    calls = [n.target for n in body.graph.nodes if n.op == "call_function"]
    assert torch.tensor in calls and torch.ones in calls, body.code
    assert not body.graph.find_nodes(op="get_attr"), body.code  # no constant of the body's own
    t = torch.randn(2, 2)
    assert torch.equal(body(t), Branch()(t))

@pytest.mark.e2e
def test_a_failure_inside_a_cond_branch_keeps_the_cond(in_process, tmp_path):
    script = tmp_path / "cond_constant.py"
    script.write_text(BRANCH_BACKEND + textwrap.dedent("""
        def f(x, y):
            def true_fn(x, y):
                index = torch.tensor([0, 1, 0, 2])  # a constant of the branch's own
                return torch.zeros(3).scatter_add(0, index, x.cos()) + y.sum()

            def false_fn(x, y):
                return x[:3].sin() + y.sum()

            return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))

        print(torch.compile(f, backend=backend)(torch.ones(4), torch.randn(5)))
    """))
    report = minified(in_process, script, after="aot")
    assert report["status"] == "minified" and report["graph"]["boundary"] == "aot"
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    assert "torch.ops.higher_order.cond" in repro.read_text()  # the failure needs the branch: not inlined
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "cannot lower scatter_add in a cond branch" in alone.stderr


@pytest.mark.e2e
@pytest.mark.slow
def test_carried_definitions_under_future_annotations_still_compile(in_process, tmp_path):
    script = tmp_path / "annotated.py"
    script.write_text(textwrap.dedent("""
        from __future__ import annotations

        import torch


        def my_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
            if any(n.target is torch.cos for n in gm.graph.nodes):
                raise RuntimeError("my_backend: no cos")
            return gm.forward


        def f(x):
            return torch.cos(x.sin()) + 1


        print(torch.compile(f, backend=my_backend)(torch.randn(4)))
    """))
    report = minified(in_process, script)
    assert report["status"] == "minified" and report["ops_after"] == ["torch.cos"]
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    assert repro.read_text().startswith("from __future__ import annotations\n")
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "my_backend: no cos" in alone.stderr


def test_the_context_around_the_call_is_recorded_and_replayed(tmp_path):
    """An outer autocast, the default dtype, matmul precision and deterministic algorithms: read at the
    compile, written into the repro, read back, and set again when the repro runs."""
    from minifier.api import save_repro
    from minifier.repro.files import load_repro
    from minifier.unit.case import CompileContext

    def f(x, w):
        return torch.relu(x @ w).sum()

    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            run_dir = save_repro(f, x, w, backend="aot_eager", out=tmp_path)
    finally:
        torch.set_float32_matmul_precision(previous)
    repro = run_dir / "g0" / "repro.py"
    context = load_repro(repro).case.context
    assert context == CompileContext(autocast=(("cpu", "bfloat16"),), matmul_precision="high")
    text = repro.read_text()
    assert "with torch.autocast('cpu', dtype=torch.bfloat16):" in text
    assert "torch.set_float32_matmul_precision('high')" in text
    assert CompileContext().to_json() == {}  # a program that changed nothing writes nothing


BF16_ONLY_BACKEND = """
import torch
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func


def fw(gm, example_inputs):
    # a compiler that cannot compile a bf16 matmul: the program's graphs have one only under its outer autocast
    for n in gm.graph.nodes:
        value = n.meta.get("val")
        if n.target == torch.ops.aten.mm.default and getattr(value, "dtype", None) == torch.bfloat16:
            raise RuntimeError("cannot compile a bf16 mm")
    return make_boxed_func(gm.forward)


backend = aot_autograd(fw_compiler=fw)
"""


@pytest.mark.e2e
def test_a_failure_only_under_the_program_s_outer_autocast_is_minified(in_process, tmp_path):
    script = tmp_path / "amp.py"
    script.write_text(BF16_ONLY_BACKEND + textwrap.dedent("""
        def f(x, w):
            y = torch.relu(x @ w)
            with torch.autocast("cpu", enabled=False):
                z = y.float().sin()
            return z.sum()

        x, w = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = torch.compile(f, backend=backend)(x, w)
        out.backward()
    """))
    report = minified(in_process, script)  # without the autocast, every graph passes every stage
    assert report["status"] == "minified" and report["failure"]["message"] == "cannot compile a bf16 mm"
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "cannot compile a bf16 mm" in alone.stderr


def test_a_frame_dynamo_cannot_trace_is_recorded_as_its_torch_calls():
    """What dynamo saw, one node a call: the call it fails on is a node of its own, fed by the ones before it."""
    from minifier.capture.frames import FailingFrame, lift_frame_calls

    def frame(x):
        parts = [x[0].sum(), x[1].sum()]  # 0-d tensors
        return (x * torch.as_tensor(parts).unsqueeze(1)).relu()

    x = torch.randn(2, 3)
    case = lift_frame_calls(FailingFrame(frame.__code__, frame.__globals__, {"x": x}, None), None)
    calls = [n for n in case.gm.graph.nodes if n.op in ("call_function", "call_method")]
    (as_tensor,) = [n for n in calls if n.target is torch.as_tensor]
    assert [a.target for a in as_tensor.args[0]] == ["sum", "sum"]  # its list of 0-d tensors, as nodes
    assert torch.equal(case.gm(x), frame(x))  # the recorded graph computes what the frame did


def test_a_recorded_frame_writes_operators_as_python_can_read_them():
    """``mask << 2`` reaches the recorder as ``Tensor.__lshift__``: the repro must still be valid Python."""
    from minifier.capture.frames import FailingFrame, lift_frame_calls
    from minifier.repro.writer import render

    def frame(x):
        x[0] = 0  # __setitem__
        return (((x > 0) << 2) | (x < 0)).sum(dim=1) + (x @ x.T)[:, 0].argmax()

    x = torch.randn(4, 3)
    case = lift_frame_calls(FailingFrame(frame.__code__, frame.__globals__, {"x": x.clone()}, None), None)
    methods = {n.target for n in case.gm.graph.nodes if n.op == "call_method"}
    assert {"__lshift__", "__or__", "__setitem__"} <= methods
    compile(render(case, stage="eager"), "repro.py", "exec")  # raises SyntaxError on an unimportable target
    assert torch.equal(case.gm(x.clone()), frame(x.clone()))


def test_a_recorded_frame_keeps_tensors_inside_slices_and_the_programs_fullgraph():
    """pytorch#185185: ``x[:, h0:h1]`` with tensor bounds, under ``fullgraph=True`` (a break there is the failure)."""
    from minifier.capture.frames import FailingFrame, lift_frame_calls
    from minifier.repro.writer import render

    def frame(x, n):
        h0 = (n - 2).long()
        return x[:, h0 : h0 + 2] * 2

    x, n = torch.randn(3, 8), torch.tensor(5.0)
    case = lift_frame_calls(FailingFrame(frame.__code__, frame.__globals__, {"x": x, "n": n}, None, fullgraph=True), None)
    (getitem,) = [node for node in case.gm.graph.nodes if node.target is operator.getitem]
    bounds = getitem.args[1][1]
    assert isinstance(bounds.start, torch.fx.Node) and isinstance(bounds.stop, torch.fx.Node)  # the calls, not values
    code = render(case, stage="eager")
    compile(code, "repro.py", "exec")  # (a tensor's repr in a slice was not Python)
    assert "fullgraph=True" in code and torch.equal(case.gm(x, n), frame(x, n))


@pytest.mark.e2e
def test_a_failure_while_dynamo_traces_becomes_the_one_call_it_fails_on(in_process, tmp_path):
    script = tmp_path / "traced.py"
    script.write_text(textwrap.dedent("""
        import torch

        def f(x):
            parts = [x[0].sum(), x[1].sum()]
            y = torch.as_tensor(parts)  # dynamo fails while tracing this call
            return (x * y.unsqueeze(1)).relu()

        print(torch.compile(f, backend="eager", fullgraph=True)(torch.randn(2, 3)))
    """))
    report = minified(in_process, script)
    assert report["status"] == "minified" and report["ops_after"] == ["torch.as_tensor"]
    assert report["failure"]["stage"] == "eager"
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "data is not allocated yet" in alone.stderr


#: How a program asks dynamo to fail on a recompile: two configs, and a stance (which raises a RuntimeError).
REFUSALS = [
    "torch._dynamo.config.error_on_recompile = True",
    "torch._dynamo.config.recompile_limit = 1; torch._dynamo.config.fail_on_recompile_limit_hit = True",
    'torch.compiler.set_stance("fail_on_recompile")',
]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_the_hooks_closing_note_sends_a_refused_recompile_to_explain(refusal, monkeypatch):
    from types import SimpleNamespace

    from minifier import backward_prologue

    compiled = torch.compile(lambda x, k: torch.sin(x) * k, backend="eager")
    torch._dynamo.reset()
    compiled(torch.randn(4), 1.5)
    with pytest.raises(Exception) as raised, torch._dynamo.config.patch(recompile_limit=8):
        try:
            exec(refusal, {"torch": torch})  # the program's own line
            compiled(torch.randn(4), 2.5)
        finally:
            torch.compiler.set_stance("default")
            torch._dynamo.config.error_on_recompile = False
            torch._dynamo.config.fail_on_recompile_limit_hit = False
    monkeypatch.setattr(backward_prologue, "_intent_reader", [lambda: SimpleNamespace(after="aot", level=2)])
    note = backward_prologue.closing_note(raised.value)
    assert note.startswith("dynamo failed on a recompile, as the program asked it to") and "python -m explain" in note


@pytest.mark.e2e
@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_program_that_asks_dynamo_to_fail_on_a_recompile_is_sent_to_explain(refusal, in_process, tmp_path):
    from pt2kit.errors import NotReproducible

    script = tmp_path / "recompiles.py"
    script.write_text(textwrap.dedent(f"""
        import torch

        def f(x, k):
            return torch.sin(x) * k

        compiled = torch.compile(f, backend="eager")
        print(compiled(torch.randn(4), 1.5))
        {refusal}
        for k in (2.5, 3.5):
            print(compiled(torch.randn(4), k))
    """))
    with pytest.raises(NotReproducible) as raised:
        minified(in_process, script)
    assert "recompiles and asks dynamo to fail" in str(raised.value) and "python -m explain recompiles.py" in str(raised.value)


def test_the_hooks_closing_note_on_an_error_dynamo_raises_building_guards_is_not_a_wrong_answers(monkeypatch):
    # pytorch#183369: a jagged nested tensor's layer_norm; dynamo raises IndexError writing a shape guard,
    # after the graph was made: the note said "if the failure is a wrong answer, ... --accuracy"
    from types import SimpleNamespace

    from minifier import backward_prologue

    def fn(v, o):
        nt = torch.nested.nested_tensor_from_jagged(v, o)
        return torch.nn.functional.layer_norm(nt, [12]).values().sum()

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="eager")(torch.randn(20, 12, requires_grad=True), torch.tensor([0, 6, 11, 14, 20]))
    except (IndexError, torch._dynamo.exc.InternalTorchDynamoError) as e:  # (2.13 raises the IndexError; 2.11 wraps it)
        raised = e
    else:
        pytest.skip(f"torch {torch.__version__} writes that guard (pytorch#183369 is a 2.13 bug)")
    assert "IndexError" in f"{type(raised).__name__}: {raised}"
    monkeypatch.setattr(backward_prologue, "_intent_reader", [lambda: SimpleNamespace(after="aot", level=2)])
    monkeypatch.setattr(backward_prologue, "_watched", [1])
    note = backward_prologue.closing_note(raised)
    assert "minify run" in note and "wrong answer" not in note
    if isinstance(raised, IndexError):  # (a dynamo exception reads as a failure while tracing, which it also names)
        assert note.startswith("dynamo raised it while compiling a frame, outside any graph")


#: pytorch#145587: a size marked dynamic that the code makes static (``a.shape[0] * a * b`` with ``b`` static).
SHAPE_MARK_REFUSED = """
import torch

def fn(a, b):
    return a.shape[0] * a * b

a = torch.randn(4, 3)
torch._dynamo.mark_dynamic(a, 0, min=2, max=10)
print(torch.compile(fn, backend="eager")(a, torch.randn(4, 3)))
"""


@pytest.mark.e2e
def test_a_dynamic_mark_the_programs_own_code_contradicts_is_no_graph_to_minify(in_process, tmp_path, monkeypatch):
    # both doors: minify run, and the hook's closing note (not "if the failure is a wrong answer")
    from types import SimpleNamespace

    from minifier import backward_prologue
    from pt2kit.errors import NotReproducible

    script = tmp_path / "marked.py"
    script.write_text(SHAPE_MARK_REFUSED)
    with pytest.raises(NotReproducible) as raised:
        minified(in_process, script)
    assert "marks a size dynamic that its own code makes static (runtime_error: ConstraintViolationError" in str(raised.value)
    torch._dynamo.reset()
    with pytest.raises(Exception) as error:
        exec(SHAPE_MARK_REFUSED, {"__name__": "marked"})
    monkeypatch.setattr(backward_prologue, "_intent_reader", [lambda: SimpleNamespace(after="aot", level=2)])
    assert backward_prologue.closing_note(error.value).startswith("dynamo refused a size the program marked dynamic")


@pytest.mark.e2e
def test_a_program_that_keeps_recompiling_is_sent_to_explain(in_process, tmp_path):
    # pytorch#128319: an nn.Module's int attribute changes every call; dynamo recompiles up to its
    # limit, runs the rest eagerly, and nothing fails. "pass --accuracy" alone sent the user away.
    from pt2kit.errors import NoFailure

    script = tmp_path / "stepping.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch._dynamo.config.recompile_limit = 3

        class Stepping(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.step = 0

            def forward(self, x):
                self.step += 1
                return x * self.step

        f = torch.compile(Stepping(), backend="eager")
        for _ in range(5):
            f(torch.ones(2))
    """))
    with pytest.raises(NoFailure) as raised:
        minified(in_process, script)
    assert "forward (stepping.py:10) was compiled 3 times: `python -m explain stepping.py`" in str(raised.value)
    from minifier.capture.events import GraphSaved
    from minifier.capture.result import CaptureResult

    frame = {"name": "forward", "filename": str(script), "lineno": 10}
    twice = [GraphSaved(index=i, path=f"g{i}", frame=frame) for i in range(2)]  # (static, then automatic dynamic)
    assert CaptureResult([], None, events=twice).most_compiled_frame() is None
    assert CaptureResult([], None, events=twice).recompiling_hint("stepping.py") == ""  # (nor with --accuracy)


@pytest.mark.e2e
def test_a_failure_in_the_autograd_around_a_compiled_graph_is_given_its_stage(in_process, tmp_path):
    # pytorch#183603 and #132929: a double backward, or a gradient between two outputs of one compiled
    # function, fails only where AOTAutograd makes the graph one autograd node. Each graph passes every
    # stage alone; the whole program, bisected by stage, fails first at aot_eager.
    from pt2kit.errors import NotReproducible

    script = tmp_path / "twice.py"
    script.write_text(textwrap.dedent("""
        import torch

        f = torch.compile(lambda x: x.sin().sum(), backend="aot_eager")
        x = torch.randn(3, requires_grad=True)
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        g.sum().backward()
    """))
    with pytest.raises(NotReproducible) as raised:
        minified(in_process, script)
    said = str(raised.value)
    assert "fails the same way with every torch.compile on backend='aot_eager' and not on backend='eager'" in said
    assert raised.value.report["program_fails_at"] == "aot_eager"
    # report.json names the program's failure at that stage, as a minified run's does (it had none)
    failure = raised.value.report["failure"]
    assert failure["stage"] == "aot_eager" and failure["exception"], raised.value.report


@pytest.mark.e2e
def test_a_failure_only_the_programs_own_backend_shows_around_its_graphs_is_given_that_backend(in_process, tmp_path):
    # pytorch#197887: Inductor loses autograd's check of an input written in place between the
    # forward and the backward. Each graph passes every stage alone, and the whole program fails
    # on no lighter backend: exit 5 names the program's own backend, not a flag that cannot help.
    from pt2kit.errors import NotReproducible

    from support.paths import USER_MODULES

    script = tmp_path / "twice.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\n" + textwrap.dedent("""
        import torch
        import planted  # noqa: F401

        f = torch.compile(lambda x: x.cos() + 1, backend="planted_second_run")
        x = torch.randn(3)
        f(x)
        f(x)
    """))
    with pytest.raises(NotReproducible) as raised:
        minified(in_process, script)
    said = str(raised.value)
    assert "fails the same way only on its own backend, 'planted_second_run'" in said, said
    assert raised.value.report["program_fails_at"] == "planted_second_run"
    assert "--strict-accuracy" not in said and "flaky" not in said  # (the one failure counted was the program's)


@pytest.mark.e2e
def test_a_graph_torch_compiles_for_itself_is_no_graph_of_the_program(in_process, tmp_path):
    # torch.cond run eagerly compiles a wrapper of torch's own (fullgraph, backend "eager"),
    # through every backend hook: it is not among the program's graphs. The user's backend,
    # made inline in the call to torch.compile, is written into the repro as the same call.
    script = tmp_path / "eager_cond.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch._dynamo.backends.common import aot_autograd
        from functorch.compile import make_boxed_func


        def fw(gm, example_inputs):
            if any(n.target == torch.ops.aten.cos.default for n in gm.graph.nodes):
                raise RuntimeError("cannot compile cos")
            return make_boxed_func(gm.forward)


        def f(x):
            return (x.cos() + 1).relu()


        x = torch.randn(4)
        y = torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))
        print(torch.compile(f, backend=aot_autograd(fw_compiler=fw))(y))
    """))
    report = minified(in_process, script)
    assert report["status"] == "minified" and report["ops_after"] == ["aten.cos.default"], report
    dynamo_graphs = [g for g in report["graphs"] if g["boundary"] == "dynamo"]
    assert [(g["label"], g["frame"]["name"]) for g in dynamo_graphs] == [("g0", "f")], report["graphs"]
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    assert "pt2kit_backend = aot_autograd(fw_compiler=fw)" in repro.read_text()
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "cannot compile cos" in alone.stderr


def test_a_body_that_makes_a_tensor_from_nothing_keeps_the_call():
    """``torch.ones(10)`` in a branch, rebuilt: a call of the body, not a constant the op would return as an alias."""
    from minifier.unit.runtime import graph_module

    class Ones(torch.nn.Module):
        def forward(self, x):
            return (torch.ones(10),)

    class Sized(torch.nn.Module):
        def forward(self, x):
            return (x.new_ones(10) * x.sum(),)

    ones = graph_module(Ones())
    assert [n.op for n in ones.graph.nodes] == ["placeholder", "call_function", "output"]

    class Program(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.true_graph_0, self.false_graph_0 = ones, graph_module(Sized())

        def forward(self, p, x):
            return torch.ops.higher_order.cond(p, self.true_graph_0, self.false_graph_0, (x,))[0]

    x = torch.randn(3)
    compiled = torch.compile(Program(), backend="eager", fullgraph=True)  # dynamo refused an aliasing body
    assert torch.equal(compiled(torch.tensor(True), x), torch.ones(10))
    assert torch.equal(compiled(torch.tensor(False), x), torch.ones(10) * x.sum())


def test_the_aliasing_rule_compares_which_outputs_are_one_tensor_or_one_storage():
    from minifier.unit.accuracy import accuracy_category, accuracy_divergence
    from minifier.unit.aliasing import aliasing_divergence

    base = torch.randn(4)
    eager = [base.view(-1), base, base + 1]
    assert aliasing_divergence(eager, [base.view(-1), base, base + 1]) is None  # the same relations
    merged = [base, base, base + 1]  # one tensor where eager has two views of one storage
    problem = aliasing_divergence(eager, merged)
    assert problem == "output 0 and output 1 alias differently: one tensor compiled, one storage eagerly"
    assert accuracy_category(problem) == "aliasing"
    assert aliasing_divergence([base + 1, base], [base, base]) is not None  # a fresh tensor made an alias of another
    # only when asked: the values are right, and by default values are all the rule judges
    assert accuracy_divergence(eager, merged, None) is None
    assert accuracy_divergence(eager, merged, None, aliasing=True) == problem


MERGING_BACKEND = """
import torch


def merged(outputs):
    kept = []
    for out in outputs:
        whole = [m for m in kept if m is not out and m.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
                 and (m.shape, m.stride(), m.storage_offset()) == (out.shape, out.stride(), out.storage_offset())]
        kept.append(whole[0] if whole else out)
    return kept


def backend(gm, example_inputs):
    holds = lambda fn: any(n.op == "call_function" and n.target is fn for n in gm.graph.nodes)

    def run(*args):
        out = list(gm.forward(*args))
        if holds(torch.exp):
            out = [o + 0.5 for o in out]  # a wrong value
        if holds(torch.cos):
            out = merged(out)  # right values, one tensor where eager has two views of it
        return tuple(out)

    return run
"""


def test_outputs_that_alias_otherwise_than_eagers_are_minified(in_process, tmp_path):
    # pytorch#191449's category: every graph's values are right, the program is not
    script = tmp_path / "views.py"
    script.write_text(MERGING_BACKEND + textwrap.dedent("""
        def f(x):
            y = torch.cos(torch.sin(x) * 2) + 1
            return y.view(-1), y, y.sum()

        x = torch.randn(6)
        view, y, _ = torch.compile(f, backend=backend)(x)
        view.resize_(12)  # eagerly, y keeps its 6 elements
        assert y.shape == (6,), y.shape
    """))
    report = minified(in_process, script, accuracy=True)
    assert report["status"] == "minified" and report["failure"]["message"].endswith("(aliasing)"), report
    assert "Tensor.view" in report["ops_after"] and "torch.cos" in report["ops_after"], report["ops_after"]
    alone = torch_alone(tmp_path / "runs" / report["run_dir"] / "repro.py", tmp_path / "elsewhere")
    assert alone.returncode != 0 and "alias differently" in alone.stderr, alone.stderr[-2000:]


def test_a_wrong_value_is_the_programs_failure_before_outputs_that_only_alias_otherwise(in_process, tmp_path):
    script = tmp_path / "both.py"
    script.write_text(MERGING_BACKEND + textwrap.dedent("""
        def f(x):
            y = torch.cos(x) + 1
            v = y.view(-1)
            torch._dynamo.graph_break()  # g0 returns y and its view: they alias otherwise compiled
            return v, y, torch.exp(x) * 3

        x = torch.randn(6)
        _, _, z = torch.compile(f, backend=backend)(x)
        torch.testing.assert_close(z, torch.exp(x) * 3)
    """))
    report = minified(in_process, script, accuracy=True)
    assert report["status"] == "minified" and not report["failure"]["message"].endswith("(aliasing)"), report
    assert "torch.exp" in report["ops_after"], report["ops_after"]
    first, second = report["graphs"][:2]  # g0 fails too, later in line
    assert first["failure"]["message"].endswith("(aliasing)") and second["label"] == "g1", report["graphs"]


def test_pt2kit_code_torch_calls_inside_a_compiled_frame_is_never_traced_by_dynamo():
    # pytorch#183603: torch.autograd.grad in a compiled frame runs its backward under dynamo's callback, and
    # dynamo traced the capture's tensor copy, called from that backward, into 14 graphs of the user's frame
    from torch._dynamo.testing import CompileCounter

    from pt2kit.opaque import opaque

    def copy(grad):
        return grad.clone().detach() * 1

    def frames_compiled(hook):
        torch._dynamo.reset()
        counter = CompileCounter()
        x = torch.tensor([0.5, 1.5], requires_grad=True)
        x.register_hook(hook)  # (called from the backward, as pt2kit's wrappers of compiled graphs are)

        def f(x):
            return torch.autograd.grad((x**4).sum(), x, create_graph=True)[0]

        torch.compile(f, backend=counter)(x)
        return counter.frame_count

    assert frames_compiled(copy) == 2  # the category: a plain function torch calls there is traced
    assert frames_compiled(opaque(copy)) == 1


def test_the_hooks_closing_note_on_a_crash_no_watched_graph_raised_is_no_wrong_answer(monkeypatch):
    # pytorch#183603: a second backward through a compiled function raises at run time, outside every graph
    # the hook watches; at level 4 the note sent the user to --strict-accuracy for a RuntimeError
    from types import SimpleNamespace

    from minifier import backward_prologue

    def f(x):
        return torch.autograd.grad((x**4).sum(), x, create_graph=True)[0]

    torch._dynamo.reset()
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward") as raised:
        torch.autograd.grad(torch.compile(f, backend="aot_eager")(x).sum(), x)
    monkeypatch.setattr(backward_prologue, "_watched", [1])
    for level in (2, 4):
        monkeypatch.setattr(backward_prologue, "_intent_reader", [lambda level=level: SimpleNamespace(after="aot", level=level)])
        note = backward_prologue.closing_note(raised.value)
        assert note.startswith("none of the 1 compiled graph(s) failed where the hook watches them"), note
        assert "RuntimeError arises around them" in note and "accuracy" not in note and "minify run" in note


def test_random_draws_are_compared_where_the_backend_draws_as_eager_does():
    # pytorch#143431: aot_eager dropped an unused torch.rand and shifted the program's random stream; the hook
    # at level 4 forgave every graph that draws random numbers and said the results agree with eager
    from minifier.repro.files import trace_module
    from minifier.unit.float64 import draws_otherwise_than_eager

    class Draws(torch.nn.Module):
        def forward(self, x):
            return x + torch.rand(x.shape)

    gm = trace_module(Draws())
    assert all(draws_otherwise_than_eager(gm, s) for s in ("inductor", "my_backend", "aot_eager_decomp_partition"))
    assert not any(draws_otherwise_than_eager(gm, s) for s in ("eager", "aot_eager"))
    assert not draws_otherwise_than_eager(trace_module(torch.nn.ReLU()), "inductor")


LATER_SIZES = """
import sys
sys.path.insert(0, {modules!r})
import torch
import planted  # noqa: F401

f = torch.compile(lambda x: x.cos() + 1, backend={backend!r}, dynamic=True)
for rows in (4, 6, 4, 5, 7):  # the same graph, every size; wrong from 5 rows on
    x = torch.randn(rows, 3)
    torch.testing.assert_close(f(x), x.cos() + 1)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["planted_odd_rows", "planted_odd_rows_accuracy"])
def test_a_dynamic_graph_that_fails_on_a_later_calls_sizes_is_minified_on_them(in_process, tmp_path, backend):
    # its saved inputs were its first call's (4 rows), on which it passes: the call that failed is kept
    from support.paths import USER_MODULES

    script = tmp_path / "batches.py"
    script.write_text(LATER_SIZES.format(modules=str(USER_MODULES), backend=backend))
    report = minified(in_process, script, accuracy=backend.endswith("accuracy"))
    assert report["failure"]["stage"] == backend and report["graph"]["kind"] == "inference", report["notes"]
    assert report["ops_after"] == ["aten.cos.default"] and report["verified"], report
    ran = run_repro_without_pt2kit(Path(report["repro"]))  # (planted: a user module of the tests' own)
    assert ran.returncode != 0
    shown = "odd number of rows" if backend == "planted_odd_rows" else "AccuracyError"
    assert shown in ran.stderr, ran.stderr[-1500:]


FROZEN_ONLY = """
import torch
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func


def fw(gm, example_inputs):
    # a compiler whose frozen path mishandles cos: what config says, as the program's environment set it
    if torch._inductor.config.freezing and any(n.target == torch.ops.aten.cos.default for n in gm.graph.nodes):
        raise RuntimeError("frozen cos")
    return make_boxed_func(gm.forward)


with torch.no_grad():
    torch.compile(lambda x: x.cos().relu() + 1, backend=aot_autograd(fw_compiler=fw))(torch.randn(4))
"""


@pytest.mark.e2e
def test_config_the_programs_environment_set_is_carried_and_the_repro_fails_without_it(in_process, tmp_path, monkeypatch):
    # torch reads TORCHINDUCTOR_FREEZING when it is imported and calls the result its default:
    # torch's own repros drop it, and the engineer, whose shell does not set it, sees no failure
    script = tmp_path / "frozen.py"
    script.write_text(FROZEN_ONLY)
    import torch._inductor.config

    assert not torch._inductor.config.freezing  # (this process, where the queries run, imported Inductor without it)
    monkeypatch.setenv("TORCHINDUCTOR_FREEZING", "1")  # (the program's environment)
    report = minified(in_process, script)
    monkeypatch.delenv("TORCHINDUCTOR_FREEZING")
    assert report["config"] == {"torch._inductor.config": {"freezing": True}}, report["config"]
    assert report["ops_after"] == ["aten.cos.default"]
    ran = torch_alone(Path(report["repro"]), tmp_path / "elsewhere")
    assert ran.returncode != 0 and "RuntimeError: frozen cos" in ran.stderr, ran.stderr[-1500:]


LOOP_OVER_A_CAPTURED_TENSOR = """
import torch
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func


def fw(gm, example_inputs):
    # a compiler that mishandles a loop which writes into a tensor it closes over
    if any(torch.ops.higher_order.while_loop in (n.target, *n.args[:1]) for n in gm.graph.nodes):  # (functionalized)
        raise RuntimeError("cannot lower a while_loop that writes a captured tensor")
    return make_boxed_func(gm.forward)


def step(state, x):
    state.mul_(0.5)

    def cond_fn(i, acc):
        return i < 3

    def body_fn(i, acc):
        state.add_(1.0)
        return i + 1, acc + state

    return torch.while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


with torch.no_grad():
    torch.compile(step, backend=aot_autograd(fw_compiler=fw))(torch.ones(4), torch.zeros(4))
"""


@pytest.mark.e2e
def test_a_graph_dynamo_will_not_trace_again_is_handed_to_its_backend(in_process, tmp_path):
    # the graph calls while_loop(..., mutated_arg_indices=...), which dynamo refuses when a repro compiles
    # it again: every stage failed that way, a failure the program never had (exit 5 before)
    script = tmp_path / "loop.py"
    script.write_text(LOOP_OVER_A_CAPTURED_TENSOR)
    report = minified(in_process, script)
    assert report["failure"]["message"] == "cannot lower a while_loop that writes a captured tensor", report
    assert any(note.startswith("dynamo will not trace g0 again") for note in report["notes"]), report["notes"]
    assert "torch.ops.higher_order.while_loop" in report["ops_after"]
    ran = torch_alone(Path(report["repro"]), tmp_path / "elsewhere")
    assert ran.returncode != 0 and "cannot lower a while_loop" in ran.stderr, ran.stderr[-1500:]


ONE_THREAD_ONLY = """
import torch


def one_thread_only(gm, example_inputs):  # a compiler whose kernels are wrong on the program's thread count
    if torch.get_num_threads() == {threads} and any(n.target == "cos" for n in gm.graph.nodes):
        raise RuntimeError("cannot vectorize cos on {threads} threads")
    return gm.forward


torch.set_num_threads({threads})
print(torch.compile(lambda x: (x.sin() + 1).cos() * 2, backend=one_thread_only)(torch.randn(8)))
"""


@pytest.mark.e2e
def test_the_thread_count_a_program_set_is_part_of_its_compile_context(in_process, tmp_path):
    # Inductor writes its C++ kernels for the thread count at the compile; pt2kit's queries ran with the
    # machine's, so a failure on the program's one thread passed alone everywhere (exit 5 before)
    from minifier.unit.case import environment_threads

    program = 1 if environment_threads() > 1 else 2  # (a count its environment does not give it)
    script = tmp_path / "threads.py"
    script.write_text(ONE_THREAD_ONLY.replace("{threads}", str(program)))
    report = minified(in_process, script)
    assert report["status"] == "minified" and report["ops_after"] == ["Tensor.cos"], report
    repro = Path(report["repro"])
    assert f"torch.set_num_threads({program})  # as the program set it" in repro.read_text()
    threads = torch.get_num_threads()
    ran = torch_alone(repro, tmp_path / "elsewhere")
    assert ran.returncode != 0 and f"cannot vectorize cos on {program} threads" in ran.stderr, ran.stderr[-1500:]
    assert torch.get_num_threads() == threads  # (the in-process queries gave this process its own back)


NO_GRAPH_FOR_ITS_BACKEND = """
import torch


def f(x):  # pytorch#196012: a constant-False condition; dynamo folds the loop into a graph of no ops
    return torch.ops.higher_order.while_loop_stack_output(lambda y: False, lambda y: (y + 1,), (x,), ())


x = torch.ones(4)
expected, compiled = f(x), torch.compile(f, fullgraph=True, backend="eager")(x)
assert expected[0].shape == compiled[0].shape, (expected[0].shape, compiled[0].shape)
"""


@pytest.mark.e2e
def test_a_failure_dynamo_compiles_into_no_graph_is_dynamos_not_the_scripts(in_process, tmp_path):
    # no backend ever saw a graph, so "raised before torch.compile compiled anything" (exit 3) said the script's
    # own code failed; it passes with torch.compile turned off
    raised = exit_5_of(in_process, tmp_path / "folded.py", NO_GRAPH_FOR_ITS_BACKEND, "pytorch#196012")
    assert "torch.compile handed its backend no graph" in str(raised) and "the bug is dynamo's" in str(raised)
    assert raised.report.get("program_fails_at") == "eager", raised.report


def exit_5_of(in_process, script: Path, program: str, bug: str):
    """The NotReproducible ``minify run`` raises on ``program`` (a genuine ``bug``: skipped where this torch fixed it)."""
    from pt2kit.errors import NotReproducible

    script.write_text(program)
    if run_repro_without_pt2kit(script).returncode == 0:
        pytest.skip(f"{bug} is fixed in torch {torch.__version__}")
    with pytest.raises(NotReproducible) as raised:
        minified(in_process, script)
    return raised.value


QUANTIZED_OUTPUT = """
import torch


def no_quantize(gm, example_inputs):  # a compiler that cannot lower a quantize (pytorch#198307's kind)
    if any(n.target is torch.quantize_per_tensor for n in gm.graph.nodes):
        raise RuntimeError("cannot lower quantize_per_tensor")
    return gm.forward


def f(x):
    return torch.quantize_per_tensor((x * 2).t(), 0.1, 0, torch.quint8)


print(torch.compile(f, backend=no_quantize)(torch.randn(4, 3)))
"""


@pytest.mark.e2e
def test_a_graph_whose_output_is_a_quantized_tensor_is_reduced(in_process, tmp_path):
    # a quantized value cannot be rebuilt as an input, and the reducer dropped it as an output too: every
    # candidate was an empty graph, and the repro was the graph as captured, "not reduced"
    script = tmp_path / "quantize.py"
    script.write_text(QUANTIZED_OUTPUT)
    report = minified(in_process, script)
    assert report["status"] == "minified" and report["ops_after"] == ["torch.quantize_per_tensor"], report
    assert not any("not reduced" in note for note in report["notes"]), report["notes"]


LAZY_MODULE_DYNAMIC = """
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.LazyBatchNorm2d()

    def forward(self, x):
        return self.bn(x)


torch.compile(M(), dynamic=True, backend="eager")(torch.randn(1, 3, 16, 16))
"""


@pytest.mark.e2e
def test_a_frame_that_cannot_be_lifted_says_why(in_process, tmp_path):
    # pytorch#185488: a lazy module's first call under dynamic=True; dynamo fails tracing it, and pt2kit's lifting of
    # the frame fails on the uninitialized parameter: exit 5 said "no graph to minify" and not why
    raised = exit_5_of(in_process, tmp_path / "lazy.py", LAZY_MODULE_DYNAMIC, "pytorch#185488")
    assert "there is no graph to minify (pt2kit could not lift the frame to one, a limit of pt2kit's and not a second bug: " in str(raised), raised
    assert "uninitialized parameter" in str(raised), raised
    # report.json names the failure and its stage, as a minified run's does (hunt h: "failure": null)
    assert raised.report["failure"]["stage"] == "eager" and raised.report["failure"]["kind"], raised.report


def test_a_graph_whose_compiled_run_crashes_where_eager_raises_is_minified_as_far_as_eager_goes(session, tmp_path):
    # pytorch#195402's shape: an index out of bounds that eager raises (and the program catches) kills
    # the compiled run instead. The graph's eager run raises, so its profile stops at the index: the
    # nodes before it are cut as before, and the crash is minified, not blamed on wrong inputs (exit 5).
    from support.paths import USER_MODULES

    script = tmp_path / "oob.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\n" + textwrap.dedent("""
        import torch
        import planted  # noqa: F401  planted_crash aborts where the graph holds a cos

        def f(x, idx):
            return (x.sin().cos() * 2)[idx]

        try:
            torch.compile(f, backend="planted_crash")(torch.randn(1, 4), torch.tensor([1]))
        except IndexError:
            pass
    """))
    report = minified((session, None), script)  # (isolated queries: the crash is a query's, not this process's)
    assert report["status"] == "minified" and report["failure"]["kind"] == "crash", report
    assert [op.rsplit(".", 1)[-1] for op in report["ops_after"]] == ["cos"], report["ops_after"]  # (no sin, no index)


HOOK_UNDER_COMPILED_AUTOGRAD = """
import torch

torch._dynamo.config.compiled_autograd = True  # (dynamo then captures a hook the forward registers)


def f(x, w):
    h = x @ w
    h.register_hook(lambda g: g * 0.5)
    return h.relu()


w = torch.randn(4, 4, requires_grad=True)
torch.compile(f, backend="aot_eager")(torch.randn(2, 4), w).sum().backward()  # an eager backward
"""


def test_a_graph_pt2kit_cannot_save_is_said_to_be_pt2kits_limit_not_that_nothing_compiled(in_process, tmp_path):
    # a hunt's own program: the graph calls a function dynamo defines locally (its hook trampoline), which no
    # repro can import; the program then fails in its backward ("BackwardState requires CompiledAutograd")
    raised = exit_5_of(in_process, tmp_path / "hook.py", HOOK_UNDER_COMPILED_AUTOGRAD, "BackwardState in an eager backward")
    assert "after torch.compile compiled 1 graph, but pt2kit could not save it as a repro (g0: " in str(raised), raised
    assert "_register_hook_trampoline" in str(raised) and "pt2kit's limit" in str(raised), raised


ROUNDING_ONCE = """
import torch
from torch._dynamo import register_backend


@register_backend
def rounding_once(gm, example_inputs):  # computes in float32 and rounds once: closer to fp64 than eager's fp16
    def run(*args):
        outs = gm(*[a.float() if a.dtype == torch.float16 else a for a in args])
        return tuple(o.half() if o.dtype == torch.float32 else o for o in outs)

    return run


def f(x):
    return (x.sin() * 3 + x).exp()


x = torch.linspace(-2, 2, 64, dtype=torch.float16)
assert torch.equal(torch.compile(f, backend="rounding_once")(x), f(x)), "not bit for bit eager's"
"""


def test_a_check_the_fp64_rule_forgives_every_graph_is_bisected_again_bit_for_bit(in_process, tmp_path):
    # nextafter on fp16 (pytorch#187340) and emulate_precision_casts (a hunt's own): the compiled graph is no worse
    # than eager against fp64, yet the program's exact check fails; --accuracy alone ended in exit 5 telling the
    # user to rerun with --strict-accuracy. It now judges each graph bit for bit itself, and says so.
    script = tmp_path / "rounding.py"
    script.write_text(ROUNDING_ONCE)
    report = minified(in_process, script, accuracy=True)
    assert report["status"] == "minified" and report["failure"]["kind"] == "accuracy", report
    assert any("judged bit for bit against eager instead (--strict-accuracy)" in n for n in report["notes"]), report["notes"]


COMPILED_AUTOGRAD_BACKWARD = """
import sys
sys.path.insert(0, {modules!r})
import torch
import planted  # noqa: F401  planted_compile_error rejects aten.cos

torch._dynamo.config.compiled_autograd = True


def backward(loss):
    loss.backward()


x = torch.randn(4, requires_grad=True)
(x * 2).sin().sum().backward()
expected, x.grad = x.grad, None
torch.compile(backward, backend={backend!r})((x * 2).sin().sum())  # its gradient holds the cos
torch.testing.assert_close(x.grad, expected)
"""


@pytest.mark.parametrize(("backend", "accuracy"), [("planted_compile_error", False), ("planted_wrong_cos", True)])
def test_a_compiled_autograd_graph_pt2kit_cannot_save_is_minified_from_its_aot_graph(backend, accuracy, in_process, tmp_path):
    # a hunt's own bugs (upsample_nearest2d_backward's lowering under compiled autograd: an error, and a wrong
    # gradient): the dynamo graph compiled autograd traces calls functions it binds at run time
    # (ops.validate_outputs), which no repro can import; the aot graph the program failed in stands for it, or
    # with --accuracy the one whose first run was judged wrong
    from support.paths import USER_MODULES

    script = tmp_path / "ca.py"
    script.write_text(COMPILED_AUTOGRAD_BACKWARD.format(modules=str(USER_MODULES), backend=backend))
    report = minified(in_process, script, accuracy=accuracy)
    assert report["status"] == "minified" and report["graph"]["boundary"] == "aot", report
    assert report["failure"]["kind"] == ("accuracy" if accuracy else "compile_error"), report
    assert report["ops_after"] == ["aten.cos.default"], report["ops_after"]
    assert any("could not be saved as repros: g0: " in n for n in report["notes"]), report["notes"]


def test_a_wrong_answer_whose_repro_is_wrong_below_its_stage_too_is_said_to_be_maybe_another_bug(session):
    # hunt f: spectral_norm's wrong weight_orig.grad under Inductor (pytorch#197039's recompute of a mutated
    # buffer) was minified into another bug, a no_grad view of an input returned as an output, whose gradient
    # AOTAutograd lets flow (wrong from aot_eager on). Both are "compiled output diverges": the stage below says.
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.stages.elsewhere import wrong_below_too
    from minifier.stages.run import run_case
    from minifier.unit.check import Check

    def f(w):
        with torch.no_grad():
            t = w.t()
        return w * 2, t

    grabbed = {}

    def grab(gm, example_inputs):
        grabbed.update(gm=gm, inputs=example_inputs)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(f, backend=grab)(torch.randn(3, 3, requires_grad=True))
    case = make_case(grabbed["gm"], grabbed["inputs"], backend=BackendInfo("aot_eager_decomp_partition", []), index=0)
    wrong = run_case(case, "aot_eager_decomp_partition", accuracy=True).failure
    assert wrong is not None and wrong.signature.kind == "accuracy", wrong
    note = wrong_below_too(session, case, Check("aot_eager_decomp_partition", wrong.signature, True))
    assert note is not None and note.startswith("repro.py is wrong under aot_eager too"), note
    assert wrong_below_too(session, case, Check("aot_eager", wrong.signature, True)) is None  # (eager is right)


TWO_HEADS = """
import torch


def two_heads(x, w):
    h = x @ w
    out1 = h.tanh().sum(-1)
    z = h * 2
    {hook}
    out2 = z.sin().sum(-1)
    return out1, out2


def trunk_grad(fn):
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    out1, out2 = fn(x, w)
    out1.sum().backward()  # this step trains head 1 only
    return w.grad


torch.testing.assert_close(trunk_grad(torch.compile(two_heads, backend="aot_eager")), trunk_grad(two_heads))
"""


def test_an_output_no_gradient_reaches_stays_out_of_the_repros_loss(in_process, tmp_path):
    # pytorch#131794's category: AOTAutograd gives such an output zero gradients, and a hook inside the graph on it
    # runs where eager's never does; a repro whose loss sums every output shows nothing
    script = tmp_path / "heads.py"
    script.write_text(TWO_HEADS.format(hook="z.register_hook(lambda g: g + 1.0)"))
    report = minified(in_process, script, accuracy=True)
    assert report["status"] == "minified" and report["failure"]["stage"] == "aot_eager", report
    assert "torch.ops.higher_order.register_hook" in report["ops_after"], report["ops_after"]
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    assert "the program's backward never reached it" in repro.read_text()
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "diverges" in alone.stdout + alone.stderr, alone.stderr[-2000:]


def test_following_which_outputs_a_gradient_reaches_changes_no_gradient_of_a_healthy_program(in_process, tmp_path):
    from pt2kit.errors import NoFailure

    script = tmp_path / "healthy.py"
    script.write_text(TWO_HEADS.format(hook="pass"))
    with pytest.raises(NoFailure):
        minified(in_process, script, accuracy=True)


def minified_doing_what_the_program_did(in_process, tmp_path, program: str, failure: str, says: str, **options) -> dict:
    """``minify run``'s report of ``program``, which fails with ``failure`` only when the repro does what the program
    did between a forward and its backward: the repro says so (``says``) and fails alone that way."""
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(program))
    report = minified(in_process, script, **options)
    assert report["status"] == "minified" and failure in report["failure"]["message"], report
    repro = tmp_path / "runs" / report["run_dir"] / "repro.py"
    assert says in repro.read_text()
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and failure in alone.stderr, alone.stderr[-2000:]
    return report


def test_an_input_the_program_writes_between_the_forward_and_the_backward_is_written_there_in_the_repro(
    in_process, tmp_path
):
    # state outside the graph: a hook closes over a global tensor, which the program updates after the forward;
    # AOTAutograd saved it for the backward, and autograd's version check raises where eager reads the new value
    from support.programs import WRITTEN_BETWEEN

    report = minified_doing_what_the_program_did(
        in_process, tmp_path, WRITTEN_BETWEEN, "modified by an inplace operation", "between the forward and the backward"
    )
    assert "torch.ops.higher_order.register_hook" in report["ops_after"], report["ops_after"]


def test_an_output_the_program_writes_before_the_backward_of_another_is_written_there_in_the_repro(in_process, tmp_path):
    # hunt p: the compiled graph is one autograd node, whose backward checks the version of every tensor it saved,
    # even for a backward of another output; eager's never runs the written output's node
    report = minified_doing_what_the_program_did(in_process, tmp_path, """
        import torch


        def f(x):
            scores = x.exp()
            return scores, (x * x).sum()


        x = torch.linspace(-1, 1, 6, requires_grad=True)
        scores, loss = torch.compile(f, backend="aot_eager")(x)
        with torch.no_grad():
            scores.div_(scores.sum())  # the caller normalizes what it got
        loss.backward()
    """, "modified by an inplace operation", "outputs[0].mul_(1)")
    assert report["ops_after"] == ["Tensor.exp", "operator.mul"], report["ops_after"]
    text = (tmp_path / "runs" / report["run_dir"] / "repro.py").read_text()
    assert "never reached it" in text


def test_the_global_state_a_backward_runs_under_is_the_repros_backwards_too(in_process, tmp_path):
    # hunt p: the partitioner recomputes `arange(5) * 0.1` in the backward, which the program runs under a float64
    # default dtype; eager saved the float32 tensor of its forward
    report = minified_doing_what_the_program_did(in_process, tmp_path, """
        import torch


        def f(x, w):
            return (x @ w.t() + torch.arange(5) * 0.1).sin().sum()


        x, w = torch.randn(4, 6), torch.randn(5, 6, requires_grad=True)
        loss = torch.compile(f, backend="aot_eager")(x, w)
        torch.set_default_dtype(torch.float64)  # float64 bookkeeping between the forward and the backward
        try:
            loss.backward()
        finally:
            torch.set_default_dtype(torch.float32)
    """, "double != float", "torch.set_default_dtype(torch.float64)  # as the program's backward ran")
    assert "torch.arange" in report["ops_after"], report["ops_after"]


def test_a_backward_the_program_runs_under_autocast_runs_under_it_in_the_repro(in_process, tmp_path):
    # hunt q: eager casts each node's bf16 gradient back to float32; the compiled backward is one node, whose bf16
    # mm meets the float32 index_put AOTAutograd traced
    minified_doing_what_the_program_did(in_process, tmp_path, """
        import torch


        def f(w, idx, x):
            return w[idx] @ x


        w, x, idx = torch.randn(10, 8, requires_grad=True), torch.randn(8, 4), torch.tensor([1, 3, 3, 7])
        out = torch.compile(f, backend="aot_eager")(w, idx, x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out.sum().backward()
    """, "Index put requires", "with torch.autocast('cpu', dtype=torch.bfloat16):  # as the program's backward ran")


def test_a_program_s_several_backward_calls_through_one_compiled_call_are_the_repro_s_too(in_process, tmp_path):
    # pytorch#118739: a loss per output, each its own backward call; eager's unbind node keeps nothing and runs
    # again, the compiled graph is one autograd node whose first call freed it
    report = minified_doing_what_the_program_did(in_process, tmp_path, """
        import torch


        def f(x):
            return x.unbind(0)


        x = torch.randn(3, 4, requires_grad=True)
        a, b, c = torch.compile(f, backend="aot_eager")(x)
        a.sum().backward()
        b.sum().backward()
    """, "backward through the graph a second time", "for positions, retain in [((0,), False), ((1,), False)]:")
    assert report["ops_after"] == ["Tensor.unbind", "operator.getitem", "operator.getitem"], report["ops_after"]


def test_the_repro_s_backward_calls_take_each_output_the_reduction_made_into_the_first():
    from minifier.unit.case import BackwardCall, GraphCase

    gm = torch.fx.symbolic_trace(lambda x: (x.sin(), x.cos(), x.exp(), x.tan()))
    names = [n.name for n in gm.graph.find_nodes(op="output")[0].args[0]]  # sin, cos, exp, tan
    case = GraphCase(gm, [], unreached=(names[3],), backward_calls=(BackwardCall((names[1],), True), BackwardCall((names[0],))))
    # cos first (retaining the graph), then sin; exp, named by no call, goes with the first; tan no call reached
    assert case.backward_positions() == [([1, 2], True), ([0], False)]
    assert case.replace(backward_calls=()).backward_positions() == []


def test_a_write_between_the_forward_and_the_backward_from_the_second_step_on_is_the_repro_s_too(in_process, tmp_path):
    # hunt q: the first step's backward shows nothing, so the next call is followed, and so on
    from support.programs import WRITTEN_BETWEEN

    program = WRITTEN_BETWEEN.replace(
        """    loss = torch.compile(forward, backend="aot_eager")(x, w)
    scale.fill_(0.5)  # a loss scale decided after seeing the loss
    loss.backward()""",
        """    step = torch.compile(forward, backend="aot_eager")
    for i in range(3):
        loss = step(x, w)
        if i > 0:  # a loss scale that starts moving after the first step
            scale.fill_(0.5 ** i)
        loss.backward()""",
    )
    assert "for i in range(3)" in program
    minified_doing_what_the_program_did(
        in_process, tmp_path, program, "modified by an inplace operation", "between the forward and the backward"
    )


def test_the_gradients_a_program_s_loss_gives_its_outputs_are_the_repro_s_too(in_process, tmp_path):
    # hunt q: AOTAutograd's gradient of an overlapping view of an intermediate (unfold) is wrong only where the
    # loss weighs the output's elements differently; every repro's loss was a plain sum, and each graph passed
    report = minified_doing_what_the_program_did(in_process, tmp_path, """
        import torch


        def f(x):
            return (x + 1).unfold(0, 4, 1)


        torch.manual_seed(0)
        x, w = torch.randn(10, requires_grad=True), torch.randn(7, 4)
        (torch.compile(f, backend="aot_eager")(x) * w).sum().backward()
        compiled = x.grad
        x.grad = None
        (f(x) * w).sum().backward()
        torch.testing.assert_close(compiled, x.grad)
    """, "diverges", "the gradients the program's backward gave these outputs", accuracy=True)
    assert report["failure"]["kind"] == "accuracy" and report["ops_after"] == ["operator.add", "Tensor.unfold"], report


def test_a_gradient_is_kept_for_the_repro_where_it_weighs_an_output_s_elements_differently():
    from minifier.capture.between import weighing

    weighed = torch.randn(3, 4)
    kept = weighing(weighed.t())  # (a strided one: kept dense, with its values)
    assert kept is not None and torch.equal(kept, weighed.t()) and kept.is_contiguous()
    assert weighing(torch.ones(3, 4)) is None and weighing(torch.full((5,), 0.2).expand(2, 5)) is None  # sum, mean
    assert weighing(torch.tensor([float("nan"), float("nan")])) is not None  # (NaN is no weight like another)
    assert weighing(torch.randn(1)) is None and weighing(torch.arange(4)) is None
    assert weighing(weighed, limit=11) is None and weighing(weighed, limit=12) is not None  # (12 elements)
    assert weighing(torch._efficientzerotensor((3,))) is None
