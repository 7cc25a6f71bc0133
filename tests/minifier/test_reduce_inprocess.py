"""The reducer's decisions on real dynamo and AOTAutograd, every query in this test's own process.

A graph is saved from a function (:func:`minifier.api.save_repro`), then ``minify repro``'s
path (bisect it, pick the failing graph, shrink it, write the repro) runs through
:class:`~minifier.isolation.inprocess.InProcessExecutor`. What the reducer keeps for
each planted bug of tests/support/user_modules/planted.py is tested here in seconds; tests/minifier/test_minifier_reduce.py
keeps the boundaries that need processes: a program's capture, crashes and hangs, the
repro run by plain torch, Ctrl-C and resume.
"""

import math
import sys
from pathlib import Path

import pytest
import torch

from minifier.api import save_repro
from minifier.minification import minify_repro

pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import planted  # noqa: F401  registers the planted backends
from support.programs import MODEL_FUNCTION
from support.running import run_repro_without_pt2kit


def _model_function():
    namespace = {"torch": torch}
    exec(MODEL_FUNCTION, namespace)  # the tests' own model, as model_script writes it
    return namespace["f"]


model = _model_function()  # the 15-node graph of conftest's model_script


def deep(x):
    for _ in range(10):
        x = torch.sin(x) * 2 + 1
        x = torch.cos(x).exp().log1p()
        x = x - x.mean(dim=-1, keepdim=True)
    return x.sum(dim=0)


def minified(in_process, tmp_path, backend, fn=model, *, scale=1, train=False, **options):
    session, _ = in_process
    torch.manual_seed(0)
    args = (torch.randn(8, 16),) if fn is deep else (torch.randn(8, 16) * scale, torch.randn(16, 16, requires_grad=train))
    if train:
        run_dir = save_repro(lambda x, w: fn(x, w).sum(), *args, backend=backend, out=tmp_path / "saved")
    else:
        run_dir = save_repro(fn, *args, backend=backend, out=tmp_path / "saved")
    return minify_repro(session, run_dir / "g0" / "repro.py", out=tmp_path / "runs", **options)


def test_one_culprit_is_found_in_logarithmic_queries(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_compile_error")
    assert result.after.op_names() == ["aten.cos.default"] and result.verified
    # one binary search, one "the last node alone", one to randomize the inputs, one to
    # shrink the sizes: log2(n) + 3, where two binary searches would take 2·log2(n)
    assert result.reduction_queries <= math.log2(result.before.node_count) + 4, result.timeline


def test_a_large_graph_is_first_tried_as_one_node_of_each_kind(in_process, tmp_path):
    # 80-odd nodes, nine kinds of op: a graph of one node of each kind is asked as its
    # first two thirds side by side (the culprit is a kind: cos), and no later query
    # compiles more nodes than those.
    result = minified(in_process, tmp_path, "planted_compile_error", fn=deep)
    assert result.after.op_names() == ["aten.cos.default"]
    assert result.before.node_count >= 80
    steps = [t.step for t in result.timeline if " queries · " in t.step]
    nodes = [int(step.rsplit("· ", 1)[1].split()[0]) for step in steps]
    assert steps[0].startswith("sample_op_kinds") and steps[1].startswith("sample_op_kinds"), steps
    sampled = nodes[0] + nodes[1]  # the sample, never asked whole
    assert sampled <= 12, steps[:2]
    assert all(k <= max(nodes[:2]) for k in nodes[2:]), steps
    assert result.reduction_queries <= 2 * math.ceil(math.log2(sampled)) + 4, steps


def test_failure_needing_two_ops_keeps_both(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_pair")
    assert sorted(result.after.op_names()) == ["aten.cos.default", "aten.exp.default"]


@pytest.mark.e2e  # runs the repro in a process of its own
def test_value_dependent_failure_keeps_real_inputs_as_literals_and_runs_copied_alone(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_value", scale=200)
    # the planted bug needs cos in a graph that reads an input above 100: cos alone
    # reads small values, so one op that reads the large input stays
    ops = result.after.op_names()
    assert "aten.cos.default" in ops and len(ops) == 2
    # few real values: literals in the repro, no data file beside it to lose
    assert list(result.repro.parent.glob("inputs-*.pt")) == [] and "torch.tensor([" in result.repro.read_text()
    namespace: dict = {}
    exec(compile(result.repro.read_text(), str(result.repro), "exec"), namespace)
    assert any(bool((t > 100).any()) for t in namespace["load_data"]().values())
    alone = tmp_path / "alone"
    alone.mkdir()
    for source in result.repro.parent.glob("*.py"):  # (the repro, and the planted backend's module it imports)
        (alone / source.name).write_text(source.read_text())
    assert "planted: aten.cos overflows on inputs above 100" in run_repro_without_pt2kit(alone / "repro.py").stderr


def test_backward_graph_is_minified_to_the_backward_op(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_backward_error", fn=lambda x, w: torch.tanh(x @ w), train=True)
    assert result.after.kind == "backward"
    assert result.after.op_names() == ["aten.tanh_backward.default"]


def test_a_wrong_gradient_is_minified_on_the_dynamo_graph_too(in_process, tmp_path):
    # a candidate's wrong gradient does not show in the original's forward outputs, yet it flows back into
    # the program's gradients: it is the failure, not one "no output of the program can see" (pytorch#185509)
    def f(x, w):  # (real inputs only: random stand-ins never pass 100, and the gradient is then 0 everywhere)
        h = x @ w
        return (torch.where(h > 100, torch.tanh(h / 1000), 0.0) * 2).sin() + x.cos().sum()

    result = minified(in_process, tmp_path, "planted_backward_accuracy", fn=f, scale=200, train=True, after="dynamo", accuracy=True)
    assert result.after.boundary == "dynamo" and result.failure.failure.signature.kind == "accuracy"
    assert result.after.op_names() == ["torch.tanh"], result.after.op_names()  # (kept a sum the forward needed, before)


def test_a_runtime_error_is_minified_as_one(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_runtime_error")
    assert result.failure.failure.signature.kind == "runtime_error"
    assert result.after.op_names() == ["aten.cos.default"]


@pytest.mark.e2e  # runs the repro in a process of its own
def test_accuracy_failure_is_minified_against_fp64(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_accuracy", accuracy=True)
    assert result.failure.failure.signature.kind == "accuracy"
    assert result.after.op_names() == ["aten.cos.default"]
    done = run_repro_without_pt2kit(result.repro)
    assert done.returncode == 1
    assert "AccuracyError: compiled output diverges from the fp64 reference" in done.stderr


@pytest.mark.e2e  # runs the repro in a process of its own
def test_after_dynamo_minifies_the_dynamo_graph(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_dynamo_error", after="dynamo")
    assert result.after.boundary == "dynamo"
    assert result.after.op_names() == ["torch.cos"]
    assert "torch.compile(mod, backend='planted_dynamo_error')" in result.repro.read_text()
    assert "planted: torch.cos is not supported" in run_repro_without_pt2kit(result.repro).stderr


def _checkpointed_in_place(x, w):
    def block(x, w):
        y = x @ w
        y.add_(1).mul_(y.detach())
        return y.sigmoid()

    return torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=False).pow(2).sum()


def test_a_checkpoints_body_is_reduced_and_kept_where_inlined_it_is_a_program_eager_rejects(in_process, tmp_path):
    """(hunt 12) AOTAutograd rejects an in-place write inside a checkpoint that eager recomputes. Inlined, the body's
    writes are what eager's own autograd rejects: asked with its backward under eager, inlining is refused (it was
    taken, FX's dead-code rule having dropped the writes). The body's returned sigmoid gives way to ``y``, as a
    checkpoint's body, like a cond's, gets stand-ins for what it returns."""
    session, _ = in_process
    torch.manual_seed(0)
    x, w = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    run_dir = save_repro(_checkpointed_in_place, x, w, backend="aot_eager", out=tmp_path / "saved")
    result = minify_repro(session, run_dir / "g0" / "repro.py", out=tmp_path / "runs")
    text = Path(result.repro).read_text()
    assert "tag_activation_checkpoint" in text and ".add_(" in text and ".mul_(" in text, text
    assert "sigmoid" not in text and "pow" not in text, text
