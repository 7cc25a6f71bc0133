"""The reducer's decisions on small graphs with fake judges and in-process queries: accuracy queries,
halving, the finishing tries, replacements, checkpoints held by a running run."""

import math
import os
import subprocess
import sys
import threading
from dataclasses import replace

import pytest
import torch

from minifier.unit.case import GraphCase, GraphInput, TensorMeta
from minifier.repro.files import trace_module, write_repro
from minifier.repro.writer import render

from support.paths import REPO


class Dropout(torch.nn.Module):
    def forward(self, x):
        return (torch.nn.functional.dropout(x, 0.5, training=True) * 2,)


@pytest.mark.matrix
@pytest.mark.e2e  # compiles in pt2kit's worker processes
def test_an_accuracy_repro_of_a_random_graph_runs_every_side_from_one_seed(tmp_path):
    # eager and compiled each draw their dropout mask: from different RNG states they differ
    # on a healthy backend, and a strict (bit for bit) repro would report a bug that is not there
    x = torch.randn(64, 64)
    case = GraphCase(trace_module(Dropout()), [GraphInput("x", x, TensorMeta.of(x))], backend="aot_eager")
    path = write_repro(case, tmp_path, stage="aot_eager", accuracy=True, strict=True)
    assert "(the compiled result differs from eager's, bit for bit)" in path.read_text().split("import torch")[0]
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "no divergence" in ran.stdout, ran.stderr[-2000:]


class _CosHidden(torch.nn.Module):
    def forward(self, x):
        return (x.cos() * 0.0 + x,)  # whatever cos computes, the output never shows it


class _CosAlone(torch.nn.Module):
    def forward(self, x):
        return (x.cos(),)


def test_a_divergence_the_original_outputs_cannot_see_is_not_the_failure_and_only_it_reads_the_original():
    # A candidate's wrong cos is the bug only if it reaches the original's outputs: here
    # it is multiplied by zero, so it is another failure. Reading the original graph is
    # work that grows with it; a candidate that does not diverge never pays for it.
    import planted  # noqa: F401  registers planted_accuracy (its compiled cos is off by a half)
    from minifier.stages.run import UNSEEN_MESSAGE, Reach, run_case

    x = torch.randn(4, 5)
    origin = GraphCase(trace_module(_CosHidden()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    candidate = GraphCase(trace_module(_CosAlone()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    reads: list[int] = []

    def load_origin():
        reads.append(1)
        return origin

    healthy = run_case(candidate, "eager", accuracy=True, reach=Reach(load_origin, ("cos",)))
    assert healthy.failure is None and reads == []
    hidden = run_case(candidate, "planted_accuracy", accuracy=True, reach=Reach(load_origin, ("cos",)))
    assert hidden.failure is not None and hidden.failure.signature.message == UNSEEN_MESSAGE and reads == [1]
    seen = run_case(candidate, "planted_accuracy", accuracy=True)  # (no origin to ask: the candidate is the program)
    assert seen.failure is not None and seen.failure.signature.kind == "accuracy" and seen.failure.signature.message != UNSEEN_MESSAGE


def test_the_originals_reference_outputs_are_computed_by_the_first_diverging_query_only(tmp_path, monkeypatch):
    # They are the same for every candidate: later queries read them back instead of
    # running the original in working precision and in float64 again.
    import planted  # noqa: F401
    import minifier.stages.run as stages

    computed: list[int] = []
    real = stages.reference_outputs
    monkeypatch.setattr(stages, "reference_outputs", lambda *a, **k: computed.append(1) or real(*a, **k))
    x = torch.randn(4, 5)
    origin = GraphCase(trace_module(_CosHidden()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    candidate = GraphCase(trace_module(_CosAlone()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    reach = stages.Reach(lambda: origin, ("cos",), tmp_path / "references.pt")
    verdicts = [stages.run_case(candidate, "planted_accuracy", accuracy=True, reach=reach).failure.signature.message for _ in range(2)]
    assert verdicts == [stages.UNSEEN_MESSAGE] * 2 and computed == [1]
    (tmp_path / "references.pt").write_bytes(b"not a tensor file")  # a damaged file is computed again
    assert stages.run_case(candidate, "planted_accuracy", accuracy=True, reach=reach).failure.signature.message == stages.UNSEEN_MESSAGE
    assert computed == [1, 1]


def _wrong_cos_case(fn, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [f"{n}_1" for n in ("x", "y")[: len(inputs)]]
    return GraphCase(make_fx(fn)(*inputs), [GraphInput(n, t, TensorMeta.of(t)) for n, t in zip(names, inputs)], backend="planted_wrong_cos")


def _in_process_query(origin, asked=None, keep_diverging=True):
    """The reducer's query, run here: each candidate's cut inputs from the original, through planted_wrong_cos."""
    from minifier.stages.profile import realize
    from minifier.stages.run import run_case

    def query(candidates):
        if asked is not None:
            asked.append(len(candidates))
        outcomes = [run_case(realize(c, origin), "planted_wrong_cos", accuracy=True) for c, _, _ in candidates]
        return outcomes if keep_diverging else [replace(o, diverging=()) for o in outcomes]

    return query


def test_an_accuracy_query_says_which_outputs_are_wrong_and_the_reducer_keeps_the_first_of_them():
    # Only cos is compiled wrong. The query names the outputs that diverge, each judged
    # alone: cos, and exp, which reads it. The narrowed candidate keeps cos only: exp
    # inherits its error, sin is right, and rand (kept by dead-code removal, for the
    # random numbers later ops would draw) is read by nothing kept.
    import planted  # noqa: F401  registers planted_wrong_cos
    from minifier.stages.profile import profile_case
    from minifier.reduce.divergence import narrowed
    from minifier.reduce.engine import Reducer
    from minifier.stages.run import run_case

    aten = torch.ops.aten

    def g(x, y):
        c = aten.cos.default(x)
        aten.rand.default([4])
        return (c, aten.exp.default(c), aten.sin.default(y))

    case = _wrong_cos_case(g, torch.randn(4), torch.randn(4))
    outcome = run_case(case, "planted_wrong_cos", accuracy=True)
    assert outcome.failure is not None and outcome.failure.signature.kind == "accuracy"
    assert outcome.diverging == (0, 1)

    reducer = Reducer(case, profile_case(case), outcome.failure.signature, _in_process_query(case))
    assert "rand" in reducer.best.kept and narrowed(reducer, reducer.best) is None  # (not asked yet)
    assert reducer.consider(reducer.best)
    cos = narrowed(reducer, reducer.best)
    assert cos is not None and (cos.kept, cos.outputs) == (("cos",), ("cos",))
    assert reducer.consider(cos) and reducer.best == cos
    assert narrowed(reducer, cos) is None  # every output of it diverges first-hand


def test_a_sample_part_with_a_wrong_answer_is_narrowed_in_one_query_not_split():
    # 60 nodes: sin, exp, tanh, sigmoid and neg in turn, with a cos (compiled wrong) and
    # an abs that reads it. The sample is sin, exp, cos, abs, neg, tanh, sigmoid; its
    # second third, cos and abs, fails, and both diverge, abs only through cos: one
    # query on cos ends it, where splitting took a round of two queries more.
    import planted  # noqa: F401
    from minifier.reduce.passes import sample_op_kinds
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from minifier.stages.run import run_case

    aten = torch.ops.aten
    kinds = [aten.sin.default, aten.exp.default, aten.tanh.default, aten.sigmoid.default, aten.neg.default]
    ops = [kinds[i % 5] for i in range(60)]
    ops[2], ops[3] = aten.cos.default, aten.abs.default
    case = _chain(ops, torch.randn(4, 4) * 0.1)
    case = case.replace(backend="planted_wrong_cos")
    target = run_case(case, "planted_wrong_cos", accuracy=True).failure.signature
    asked = {True: [], False: []}
    for keep in (True, False):
        reducer = Reducer(case, profile_case(case), target, _in_process_query(case, asked[keep], keep_diverging=keep))
        sample_op_kinds(reducer)
        assert reducer.best.kept == ("cos",), (keep, reducer.best.kept)
    assert asked[True] == [2, 1], asked  # the first two thirds, then cos alone
    assert asked[False] == [2, 2], asked


def _relu_judge(target):
    """A query that fails exactly when the candidate still computes a relu (the reducer's logic alone, in process)."""
    from pt2kit.signature import Failure
    from minifier.stages.run import Outcome

    def query(candidates):
        return [Outcome("judge", Failure(target) if "aten.relu.default" in case.op_names() else None, 0.0) for case, _, _ in candidates]

    return query


def test_halving_keeps_a_multi_output_node_with_its_parts_and_stops():
    # relu feeds max_pool2d_with_indices, whose two parts come out through getitems. A
    # split between the pool and its getitems would leave the pool (and the relu it
    # reads) dead code in both halves; the split moves to the nearest point that keeps
    # them together, either way (ResNet's last four nodes need "relu | pool and parts").
    # When no split can keep the pool whole, the halving stops (it used to spin there).
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.reduce.splits import keep_failing_part, split_point
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Signature

    def f(x):
        y = torch.ops.aten.relu.default(x)
        pooled, indices = torch.ops.aten.max_pool2d_with_indices.default(y, [1, 1])
        return (pooled.cos(), indices)

    def pool_only(x):
        return torch.ops.aten.max_pool2d_with_indices.default(x, [1, 1])

    x = torch.randn(1, 2, 4, 4)
    target = Signature("compile_error", "RuntimeError", "relu")

    def reducer_for(fn):
        case = GraphCase(make_fx(fn)(x), [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor")
        return Reducer(case, profile_case(case), target, _relu_judge(target))

    reducer = reducer_for(f)
    kept = reducer.best.kept
    assert [n.split("_")[0] for n in kept] == ["relu", "max", "getitem", "getitem", "cos"], kept
    assert [split_point(reducer, kept, at) for at in range(1, 5)] == [1, 1, 4, 4]  # never 2 or 3
    assert split_point(reducer, kept[:4], 2) == 1  # relu | the pool and its parts

    keep_failing_part(reducer)
    assert [n.split("_")[0] for n in reducer.best.kept] == ["relu"]
    assert reducer.queries == 1  # the first half fails: the second is neither waited for nor read

    pool = reducer_for(pool_only)
    assert split_point(pool, pool.best.kept, 1) == len(pool.best.kept) == 3
    keep_failing_part(pool)
    assert pool.queries == 0 and len(pool.best.kept) == 3


def test_the_last_third_is_split_unasked_then_asked_innermost_first():
    # Ten nodes, each a different op. A round asks the first two thirds side by side;
    # when neither fails, the last third is split without a query of its own. What was
    # kept that way is asked once the split ends, innermost first: the culprit alone,
    # and, when the failure needs two of the last third's nodes, that third. For a
    # compile error the culprit alone is asked in its finished form (random inputs, no
    # config: here one query, the inputs being small and the config empty) in place of
    # itself; when that does not fail, as it is.
    from minifier.reduce.splits import keep_failing_part
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    aten = torch.ops.aten
    ops = [aten.sin, aten.cos, aten.exp, aten.tanh, aten.sigmoid, aten.neg, aten.abs, aten.sqrt, aten.erf, aten.relu]
    case = _chain([op.default for op in ops], torch.rand(4, 4) + 0.1)
    target = Signature("compile_error", "RuntimeError", "planted")

    def reducer_needing(*needed, target=target, values=False):
        asked: list[list[int]] = []

        def query(candidates):
            asked.append([c.node_count for c, _, _ in candidates])
            return [
                Outcome("judge", Failure(target) if set(needed) <= set(c.op_names()) and not (values and any(i.is_random for i in c.inputs)) else None, 0.0)
                for c, _, _ in candidates
            ]

        return Reducer(case, profile_case(case), target, query), asked

    one, asked = reducer_needing("aten.relu.default")
    assert keep_failing_part(one)
    assert [n.split("_")[0] for n in one.best.kept] == ["relu"] and one.best.random  # (finished)
    assert asked == [[3, 4], [1, 1], [1]], asked  # no query on the last third itself

    valued, asked = reducer_needing("aten.relu.default", values=True)  # (a compile error that needs the real values)
    assert keep_failing_part(valued)
    assert [n.split("_")[0] for n in valued.best.kept] == ["relu"] and not valued.best.random
    assert asked == [[3, 4], [1, 1], [1], [1]], asked

    crash = Signature("runtime_error", "RuntimeError", "planted")  # (not a compile error: the node as it is)
    ran, asked = reducer_needing("aten.relu.default", target=crash)
    assert keep_failing_part(ran)
    assert [n.split("_")[0] for n in ran.best.kept] == ["relu"] and not ran.best.random
    assert asked == [[3, 4], [1, 1], [1]], asked

    pair, asked = reducer_needing("aten.sqrt.default", "aten.relu.default")
    assert keep_failing_part(pair)
    assert [n.split("_")[0] for n in pair.best.kept] == ["sqrt", "erf", "relu"]
    assert asked == [[3, 4], [1, 1], [1], [1], [3]], asked

    spread, asked = reducer_needing("aten.sin.default", "aten.relu.default")
    assert not keep_failing_part(spread) and len(spread.best.kept) == 10
    assert asked == [[3, 4], [1, 1], [1], [1], [3]], asked  # each kept third asked once, then it gives up


def _chain(ops, x):
    """A graph applying ``ops`` (aten overloads, one argument each) in turn, every result returned."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(t):
        outs = []
        for op in ops:
            t = op(t)
            outs.append(t)
        return tuple(outs)

    return GraphCase(make_fx(f)(x), [GraphInput("t_1", x, TensorMeta.of(x))], backend="inductor")


def test_a_large_graph_is_asked_as_the_thirds_of_its_sample_not_the_sample_first():
    # 60 nodes of 6 kinds, one relu among them: the sample (one node per kind) is never
    # asked whole, its first two thirds go out first, side by side; neither fails, so the
    # last (relu and the kind after it) is split without being asked, and ends at the relu.
    from minifier.reduce.passes import sample_op_kinds
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Signature

    aten = torch.ops.aten
    kinds = [aten.sin.default, aten.cos.default, aten.exp.default, aten.tanh.default, aten.sigmoid.default]
    ops = [kinds[i % 5] for i in range(59)]
    ops.insert(41, aten.relu.default)
    case = _chain(ops, torch.randn(4, 4))
    target = Signature("compile_error", "RuntimeError", "relu")
    asked: list[list[int]] = []
    judge = _relu_judge(target)

    def query(candidates):
        asked.append([c.node_count for c, _, _ in candidates])
        return judge(candidates)

    reducer = Reducer(case, profile_case(case), target, query)
    sample_op_kinds(reducer)
    assert [n.split("_")[0] for n in reducer.best.kept] == ["relu"]
    assert asked == [[2, 2], [1, 1]], asked  # never the 6-node sample, nor its last third
    assert reducer.queries == 4


def test_when_no_third_of_the_sample_fails_the_whole_sample_is_asked():
    # The failure needs a sin and a relu to meet: no third of the sample has both. The
    # first two are asked, then the last (relu alone, finished first: a compile error),
    # kept unasked until the split ends; then the sample is asked whole, and stays the
    # best for the searches that follow.
    from minifier.reduce.passes import sample_op_kinds
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    aten = torch.ops.aten
    kinds = [aten.sin.default, aten.cos.default, aten.exp.default, aten.tanh.default]
    ops = [kinds[i % 4] for i in range(56)] + [aten.relu.default]
    case = _chain(ops, torch.randn(4, 4))
    target = Signature("compile_error", "RuntimeError", "sin meets relu")

    def query(candidates):
        return [Outcome("judge", Failure(target) if {"aten.sin.default", "aten.relu.default"} <= set(c.op_names()) else None, 0.0) for c, _, _ in candidates]

    reducer = Reducer(case, profile_case(case), target, query)
    sample_op_kinds(reducer)
    assert reducer.queries == 5 and len(reducer.best.kept) == 5


def test_inputs_already_small_keep_their_sizes():
    # A failure that needs the sizes it has (a kernel big enough to run threaded): a
    # 2x16x32 input is not shrunk at all (no query); a large input is still searched.
    from minifier.reduce.finish import SMALL_INPUTS
    from minifier.reduce.passes import shrink_shapes
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    target = Signature("crash", "SIGABRT", "process killed by SIGABRT")

    def reducer_for(shape):
        case = _chain([torch.ops.aten.relu.default], torch.randn(*shape))
        query = lambda candidates: [Outcome("judge", Failure(target) if math.prod(c.inputs[0].meta.shape) >= 1024 else None, 0.0) for c, _, _ in candidates]
        reducer = Reducer(case, profile_case(case), target, query)
        reducer.best = replace(reducer.best, random=frozenset({"t_1"}))
        return reducer

    small = reducer_for((2, 16, 32))
    assert 2 * 16 * 32 <= SMALL_INPUTS
    shrink_shapes(small)
    assert small.queries == 0 and not small.best.shapes

    large = reducer_for((2, 64, 64))
    shrink_shapes(large)
    assert large.queries > 1 and dict(large.best.shapes)["t_1"] != (2, 64, 64)


def test_shrinking_shapes_stops_at_its_query_budget():
    # An input of many distinct sizes, each of them needed (prime, so each size's search
    # is its one "try 1"): the pass stops starting groups at SHAPE_QUERIES, whatever the
    # number of dims; the largest sizes were asked, the smallest are left as they were.
    from minifier.reduce.passes import SHAPE_QUERIES, shrink_shapes
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    shape = (2, 3, 5, 7, 11, 13, 17)
    target = Signature("crash", "SIGABRT", "process killed by SIGABRT")
    case = _chain([torch.ops.aten.relu.default], torch.randn(*shape))
    query = lambda candidates: [Outcome("judge", Failure(target) if tuple(c.inputs[0].meta.shape) == shape else None, 0.0) for c, _, _ in candidates]
    reducer = Reducer(case, profile_case(case), target, query)
    reducer.best = replace(reducer.best, random=frozenset({"t_1"}))
    reducer.run([shrink_shapes])
    assert reducer.queries == SHAPE_QUERIES < 1 + len(shape)
    assert dict(reducer.best.shapes).get("t_1", shape) == shape
    # A later round (a smaller graph or config: none of its candidates cached) asks only
    # "every size 1" again: the budget is the reduction's, not each round's.
    reducer.cache.clear()
    reducer.run([shrink_shapes])
    assert reducer.queries == SHAPE_QUERIES + 1 and reducer.spent["shrink_shapes"] == SHAPE_QUERIES + 1


@pytest.mark.parametrize(("shape", "ends_at"), [((64, 128), (1, 1)), ((2, 16, 32), (2, 16, 32))])
def test_the_finishing_tries_go_out_together_and_end_the_reduction_in_one_round(shape, ends_at):
    # A one-node graph whose failure needs the config but not the values or sizes: the
    # finishing passes' "everything at once" tries (random, size 1 unless the input is
    # small already, and without config) are one round of two queries, and nothing is
    # asked after it.
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    key = "cpp.inject_relu_bug_TESTING_ONLY"
    x = torch.randn(*shape)
    case = GraphCase(
        make_fx(lambda x: (torch.ops.aten.relu.default(x),))(x),
        [GraphInput("x_1", x, TensorMeta.of(x))],
        config={"torch._inductor.config": {key: "compile_error"}},
        backend="inductor",
    )
    target = Signature("compile_error", "RuntimeError", "relu")
    rounds: list[list[GraphCase]] = []

    def query(candidates):
        rounds.append([c for c, _, _ in candidates])
        return [Outcome("judge", Failure(target) if key in c.config.get("torch._inductor.config", {}) else None, 0.0) for c, _, _ in candidates]

    reducer = Reducer(case, profile_case(case), target, query)
    best = reducer.run(PASSES)
    assert best.random == {"x_1"} and dict(best.shapes).get("x_1", shape) == ends_at and best.config
    last = rounds[-1]
    assert len(last) == 2 and {bool(c.config) for c in last} == {True, False}
    assert all(c.inputs[0].meta.shape == ends_at for c in last)


def test_a_run_still_going_is_not_resumed_by_a_second_one_beside_it(tmp_path):
    # Two runs of one command into one --out: the second must not resume (and write
    # into) the checkpoint the first is still writing. Once the first is gone, however
    # it ended (here: SIGKILL), its checkpoint is resumable again.
    import json
    import signal

    from minifier.reduce.checkpoint import CHECKPOINT, find_checkpoint, holding

    run = tmp_path / "out" / "run-20260101-000000-model"
    run.mkdir(parents=True)
    (run / CHECKPOINT).write_text(json.dumps({"fingerprint": "same-command", "status": "running"}))
    assert find_checkpoint(tmp_path / "out", "same-command") == run / CHECKPOINT

    with holding(run):
        assert find_checkpoint(tmp_path / "out", "same-command") is None
    assert find_checkpoint(tmp_path / "out", "same-command") == run / CHECKPOINT
    assert not (run / ".running").exists()

    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys, time; from pathlib import Path; from minifier.reduce.checkpoint import holding\nwith holding(Path({str(run)!r})):\n    print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert find_checkpoint(tmp_path / "out", "same-command") is None
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert find_checkpoint(tmp_path / "out", "same-command") == run / CHECKPOINT


def test_a_rank_holds_its_error_while_another_rank_of_its_launcher_is_still_minifying(tmp_path, monkeypatch):
    import time

    from minifier.stages.distributed import MINIFYING, minifying, wait_for_other_ranks

    monkeypatch.setenv("LOCAL_RANK", "0")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    threading.Thread(target=other.wait, daemon=True).start()  # reaped when it ends, as torchrun reaps a rank
    sibling, stranger, mine = (tmp_path / f"run-{name}" for name in ("rank1", "other-job", "rank0"))
    for run in (sibling, stranger, mine):
        run.mkdir()
    (sibling / MINIFYING).write_text(f'{{"pid": {other.pid}, "launcher": {os.getppid()}}}')
    (stranger / MINIFYING).write_text(f'{{"pid": {other.pid}, "launcher": {os.getppid() + 1}}}')
    with minifying(mine):
        assert (mine / MINIFYING).is_file()
        started = time.monotonic()
        wait_for_other_ranks(tmp_path, poll=0.05)  # its own marker is not waited for
    assert not (mine / MINIFYING).exists()
    assert time.monotonic() - started > 0.5 and other.poll() is not None  # waited until the other rank was done

    (sibling / MINIFYING).write_text("not json")  # an unreadable marker is never waited for
    monkeypatch.delenv("LOCAL_RANK")
    started = time.monotonic()
    wait_for_other_ranks(tmp_path, poll=0.05)
    assert time.monotonic() - started < 0.5


def _fused_judge(target):
    """Fails while some cos reads a value an op computed from a sin (not one fed in): a fusion bug's shape."""
    from pt2kit.signature import Failure
    from minifier.stages.run import Outcome

    def computed_from_sin(node):
        return node.op == "call_function" and (
            node.target is torch.ops.aten.sin.default or any(computed_from_sin(a) for a in node.all_input_nodes)
        )

    def fails(case):
        cos = case.gm.graph.find_nodes(op="call_function", target=torch.ops.aten.cos.default)
        return any(computed_from_sin(a) for n in cos for a in n.all_input_nodes)

    def query(candidates):
        for case, _, _ in candidates:
            case.gm(*[torch.randn(i.meta.shape) for i in case.inputs])  # every candidate built runs
        return [Outcome("judge", Failure(target) if fails(case) else None, 0.0) for case, _, _ in candidates]

    return query


def test_a_node_whose_readers_need_something_computed_is_replaced_by_its_operand():
    # sin -> abs -> cos fails while cos reads what sin computed. No cut removes abs (cos
    # would read an input), and delta debugging leaves all three: replacing abs by its
    # operand, sin, keeps the failure with two ops, and the repro computes cos(sin(x)).
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.reduce.engine import Candidate, Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from pt2kit.signature import Signature

    x = torch.randn(4)
    gm = make_fx(lambda x: torch.cos(torch.abs(torch.sin(x)) * 1))(x)
    case = GraphCase(gm, [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor")
    target = Signature("compile_error", "RuntimeError", "fused")
    reducer = Reducer(case, profile_case(case), target, _fused_judge(target))
    best = reducer.run(PASSES)
    assert [n.split("_")[0] for n in best.kept] == ["sin", "cos"], best
    assert {s for s, _ in best.substituted} >= {n for n in reducer.initial().kept if n.startswith(("abs", "mul"))}
    built = reducer.best_case()
    assert torch.equal(built.gm(x)[0], torch.cos(torch.sin(x)))
    assert Candidate.from_json(best.to_json()) == best  # a checkpoint keeps the substitutions
    # the stand-ins are of the node's very shape
    assert all(reducer._meta(s).shape == (4,) for n in best.kept for s in reducer.stand_ins(n, best))


def test_a_pick_from_a_split_that_its_new_sizes_made_whole_is_replaced_by_what_it_split():
    # split(sin(x), 128, -1)[0] is half of sin(x) at the program's sizes, and all of it once
    # the input shrinks to (1, 1): the pick is then replaced by sin (looked up through the split
    # it picks from, at the candidate's sizes), and the split goes with it.
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from pt2kit.signature import Signature

    x = torch.randn(64, 256)
    gm = make_fx(lambda x: torch.cos(torch.split(torch.sin(x), 128, -1)[0]))(x)
    case = GraphCase(gm, [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor")
    target = Signature("compile_error", "RuntimeError", "fused")
    reducer = Reducer(case, profile_case(case), target, _fused_judge(target))
    assert reducer.stand_ins("getitem", reducer.initial()) == []  # (64, 128) at the program's sizes
    reducer.reprofile = profile_case
    best = reducer.run(PASSES)
    assert dict(best.shapes) == {"x_1": (1, 1)}, best
    assert [n.split("_")[0] for n in best.kept] == ["sin", "cos"], best
    built = reducer.best_case()
    y = torch.randn(1, 1)
    assert torch.equal(built.gm(y)[0], torch.cos(torch.sin(y)))


def test_the_autotuners_pick_list_stays_while_it_autotunes_and_goes_with_it():
    # A failure in one autotune pick (a CPP GEMM template) fails alone whenever the timings pick it: config
    # minimizing once dropped the program's max_autotune_gemm_backends="CPP", and the repro failed 3 runs in 7.
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from minifier.stages.run import Outcome
    from pt2kit.signature import Failure, Signature

    target = Signature("compile_error", "RuntimeError", "autotuned")

    def judge(needs):  # fails while the config keeps the keys in ``needs``
        def query(candidates):
            kept = [{k for values in case.config.values() for k in values} for case, _, _ in candidates]
            return [Outcome("judge", Failure(target) if needs <= keys else None, 0.0) for keys in kept]

        return query

    x = torch.randn(4, 4)
    gm = make_fx(lambda x: torch.mm(x, x).sin())(x)
    config = {"max_autotune": True, "max_autotune_gemm_backends": "CPP", "epilogue_fusion": False}
    case = GraphCase(gm, [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor", config={"torch._inductor.config": config})
    best = Reducer(case, profile_case(case), target, judge({"max_autotune"})).run(PASSES)
    assert {k for _, k in best.config} == {"max_autotune", "max_autotune_gemm_backends"}, best.config
    best = Reducer(case, profile_case(case), target, judge({"epilogue_fusion"})).run(PASSES)
    assert {k for _, k in best.config} == {"epilogue_fusion"}, best.config  # (no autotuning: its pick list goes)


def test_an_aot_graph_that_makes_a_size_from_data_is_traced_on_fakes_in_its_repro(tmp_path):
    # nonzero's size is the data's: make_fx on real tensors refuses such a graph
    # (data-dependent), so its compiler gets fake inputs in a shape environment, static
    # sizes and all, as AOTAutograd handed them in the program. The failure then reproduces.
    import planted  # noqa: F401  registers planted_compile_error (rejects cos)
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.repro.inputs import reads_data
    from minifier.stages.run import run_case

    def f(x):
        return (torch.nonzero(x).float().cos(),)

    x = torch.tensor([0.0, 1.0, 0.0, 2.0])
    gm = make_fx(f, tracing_mode="symbolic")(x)
    case = GraphCase(gm, [GraphInput("x_1", x, TensorMeta.of(x))], boundary="aot", kind="inference", backend="planted_compile_error")
    assert reads_data(case) and not reads_data(_chain([torch.ops.aten.cos.default], x))
    assert "symbolic_inputs(inputs)" in render(case, stage="planted_compile_error")
    outcome = run_case(case, "planted_compile_error")
    assert outcome.failure is not None and "cos" in outcome.failure.signature.message, outcome


def test_a_failure_that_shows_otherwise_on_every_look_is_no_flake(in_process):
    # The program failed one way; alone, the graph fails another way on every look: not
    # a failure that comes and goes, but a graph that runs alone otherwise than in the
    # program (exit 5, naming both). One that passes on some looks stays flaky (exit 1).
    import planted  # noqa: F401  registers planted_compile_error (rejects cos)
    from pt2kit.errors import FlakyFailure, NotReproducible
    from minifier.stages.flaky import failure_rate
    from minifier.stages.run import Outcome, run_case
    from pt2kit.signature import Failure, Signature

    session, _ = in_process
    x = torch.randn(4)
    program = Outcome("planted_compile_error", Failure(Signature("runtime_error", "NameError", "name 'u#' is not defined")), 0.0)
    cos = _chain([torch.ops.aten.cos.default], x).replace(backend="planted_compile_error")
    alone = run_case(cos, "planted_compile_error")
    assert alone.failure is not None
    with pytest.raises(NotReproducible, match="in every one of 7 runs"):
        failure_rate(session, cos, "planted_compile_error", program, alone, accuracy=False, label="g0")
    sin = _chain([torch.ops.aten.sin.default], x).replace(backend="planted_compile_error")
    with pytest.raises(FlakyFailure):
        failure_rate(session, sin, "planted_compile_error", program, run_case(sin, "planted_compile_error"), accuracy=False, label="g0")


def test_an_input_the_program_never_gave_a_value_stays_random_when_a_replacement_reads_it_again():
    # A graph whose compile failed has inputs with no real value (random from the start).
    # Dropped once nothing reads it, such an input is read again when a node is replaced
    # by it: it must come back random, never as an input with no value at all.
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.reduce.engine import Reducer
    from minifier.stages.profile import profile_case
    from pt2kit.signature import Signature

    x, y = torch.randn(4), torch.randn(4)
    gm = make_fx(lambda x, y: (torch.cos(torch.sin(y)), x.neg()))(x, y)
    case = GraphCase(gm, [GraphInput("x_1", None, TensorMeta.of(x), seed=7), GraphInput("y_1", y, TensorMeta.of(y))], backend="inductor")
    reducer = Reducer(case, profile_case(case.replace(inputs=[replace(case.inputs[0], value=x, seed=None), case.inputs[1]])), Signature("compile_error", "E", "m"), lambda c: [])
    cos_only = reducer.normalize(replace(reducer.best, outputs=tuple(o for o in reducer.best.outputs if o.startswith("cos"))))
    assert reducer.input_names(cos_only.kept) == ["y_1"] and not cos_only.random  # x_1 dropped with neg
    sin = next(n for n in cos_only.kept if n.startswith("sin"))
    replaced = reducer.normalize(replace(cos_only, substituted=frozenset({(sin, "x_1")})))
    built = reducer.build(replaced)
    assert [(i.name, i.is_random) for i in built.inputs] == [("x_1", True)]


def test_a_symbolic_size_whose_tensor_was_cut_away_is_an_int_of_its_own():
    # minify hunt found it: full(x.shape).cumsum(dtype=int32) under dynamic=True, its tensor input cut
    # away by the reducer, left an int input "derived from" a tensor no longer there; the writer raised
    from types import SimpleNamespace

    from minifier.reduce.candidate import derive_sizes
    from minifier.repro.inputs import symbolic_inputs_function
    from minifier.unit.case import GraphInput

    size = GraphInput("arg2_1", 5, None, derived_from=("arg1_1", 0))
    kept = GraphInput("arg0_1", torch.ones(5), None, symbolic_dims=(0,))
    source = symbolic_inputs_function(SimpleNamespace(inputs=[size, kept]))
    assert "SIZES_OF = {}" in source
    assert derive_sizes([size, kept])[0].derived_from is None and derive_sizes([size, kept])[0].symbolic_int


class _Interpolate(torch.nn.Module):
    def forward(self, x):
        return (torch.nn.functional.interpolate(x, size=(4, 4), mode="bilinear") * 2,)


def test_a_compiled_run_that_returns_where_eager_raises_is_a_wrong_answer_named_by_eagers_error():
    # pytorch#197095: an empty height, which eager's interpolate refuses and Inductor's runs (NaNs)
    from torch._dynamo import register_backend

    from minifier.stages.profile import EagerRunRaised, profile_or_why
    from minifier.stages.run import run_case
    from minifier.unit.accuracy import ACCURACY_MESSAGE

    register_backend(lambda gm, example_inputs: lambda *args: (torch.zeros(1, 2, 4, 4),), name="pt2kit_test_lenient")
    x = torch.randn(1, 2, 0, 3)
    case = GraphCase(trace_module(_Interpolate()), [GraphInput("x", x, TensorMeta.of(x))], backend="pt2kit_test_lenient")
    outcome = run_case(case, "pt2kit_test_lenient", accuracy=True)
    refused = "RuntimeError: Input and output sizes should be greater than 0, but got input (H: 0, W: 3) output (H: 4, W: 4)"
    assert outcome.failure.signature.message == f"{ACCURACY_MESSAGE} (eager raises {refused})"
    assert outcome.failure.details == f"the compiled run returns where eager raises {refused}"
    # its repro says the same alone, and the minifier profiles the graph as far as eager goes
    assert "except Exception as e:  # eager refuses what the compiled run returned" in render(case, stage="eager", accuracy=True)
    assert isinstance(profile_or_why(case), EagerRunRaised)
    profile = profile_or_why(case, partial=True)
    assert {name: info.kind for name, info in profile.items()} == {"interpolate": "unreached", "mul": "unreached"}
    # a compiled run that raises what eager raises is no bug of this graph's: its profile is refused
    assert isinstance(profile_or_why(case, partial=True, unless="RuntimeError"), EagerRunRaised)
    assert not isinstance(profile_or_why(case, partial=True, unless="IndexError"), EagerRunRaised)


class _CopyIntoRelu(torch.nn.Module):
    def forward(self, y):
        z = torch.relu(y)
        z.copy_(y)
        return (z,)


def test_a_compile_that_raises_what_only_eagers_backward_raises_is_the_compilers_failure():
    # pytorch#158561: AOTAutograd traces the backward as it compiles, so it raises at once what eager
    # raises only in a backward the program never ran; at eager, whose run here includes that backward,
    # the failure is the graph's own
    from minifier.stages.run import RAISES_IN_EAGER, run_case

    y = torch.randn(3, 2, requires_grad=True)
    case = GraphCase(trace_module(_CopyIntoRelu()), [GraphInput("y", y, TensorMeta.of(y))], backend="aot_eager")
    assert case.backward
    compiled = run_case(case, "aot_eager").failure.signature
    assert compiled.kind == "compile_error" and "modified by an inplace operation" in compiled.message
    assert not compiled.message.startswith(RAISES_IN_EAGER)
    assert run_case(case, "eager").failure.signature.message.startswith(RAISES_IN_EAGER)


def test_the_programs_global_module_hooks_do_not_fire_on_the_graph_pt2kit_judges():
    # pytorch#149502: a global forward pre-hook that rewrites its arguments fired on the dynamo graph the
    # hook judges at level 4 (a GraphModule is a module too): the eager reference raised TypeError, and a
    # healthy run was called a wrong answer in place of the program's own error
    from minifier.unit.accuracy import judge_compiled_run

    gm = trace_module(_CopyIntoRelu())
    y = torch.randn(3, 2)
    fired = []

    def rewrite(module, args):
        fired.append(type(module).__name__)
        return (args[0] + 1.0,)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(rewrite)
    try:
        right = [torch.relu(y).copy_(y)]
        assert judge_compiled_run(gm, [y], right, rng=torch.random.get_rng_state()) is None and fired == []
        torch.nn.Identity()(y)
        assert fired == ["Identity"]  # the program's hook is back
    finally:
        handle.remove()


def test_lowering_says_why_no_aot_graph_was_kept_as_it_is(tmp_path):
    # pytorch#143431 under aot_eager: the note said "aot_eager does not compile through AOTAutograd"; it does,
    # with torch's own compilers, whose graphs pt2kit does not keep. A plain (gm, example_inputs) backend does not.
    from torch._dynamo import register_backend

    from minifier.stages.run import lower_case

    register_backend(lambda gm, example_inputs: gm.forward, name="pt2kit_test_plain_lowered")
    y = torch.randn(3, 2)
    for backend, said in (
        ("aot_eager", "aot_eager compiles through AOTAutograd with torch's own compilers"),
        ("pt2kit_test_plain_lowered", "pt2kit_test_plain_lowered does not compile through AOTAutograd"),
    ):
        case = GraphCase(trace_module(_CopyIntoRelu()), [GraphInput("y", y, TensorMeta.of(y))], backend=backend)
        paths, note = lower_case(case, tmp_path / backend)
        assert paths == [] and note is not None and note.startswith(said), note


def test_an_aot_graph_that_makes_zero_tensors_is_traced_on_fakes_in_its_repro():
    # Forward-mode AD's zero tangents are ZeroTensors (aten._efficientzerotensor). make_fx on
    # real tensors turns what is computed from one into constants and zeros that Inductor
    # cannot compile ("both a fallback and a decomp for aten.zeros"), where the program's
    # graph compiled: the repro's compiler gets fake inputs, as AOTAutograd handed them
    # (pytorch#190856's graph, jacfwd(jacfwd(f)), captured as Inductor gets it).
    import copy
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._inductor.decomposition import select_decomp_table
    from minifier.repro.inputs import makes_zero_tensors

    graphs = []

    def backend(gm, examples):
        def keep(g, _):
            graphs.append(copy.deepcopy(g))
            return g

        return aot_module_simplified(gm, examples, fw_compiler=keep, decompositions=select_decomp_table())

    def f(t):
        return torch.mean(1.0 / (t + torch.trace(t) * torch.eye(3, dtype=t.dtype)))

    x = torch.randn(3, 3, dtype=torch.float64)
    torch._dynamo.reset()
    torch.compile(torch.func.jacfwd(torch.func.jacfwd(f)), backend=backend)(x)
    case = GraphCase(graphs[0], [GraphInput("arg0_1", x, TensorMeta.of(x))], boundary="aot", kind="inference", backend="inductor")
    assert makes_zero_tensors(case) and not makes_zero_tensors(_chain([torch.ops.aten.cos.default], x))
    assert "symbolic_inputs(inputs)" in render(case, stage="inductor")


def test_a_vmap_level_the_failure_does_not_need_is_cut_with_both_its_switches():
    # create_block_mask's vmap leaves `_vmap_increment_nesting ... _vmap_decrement_nesting` in
    # a dynamo graph, linked by no value. Each switch is an effect, and a cut of one alone
    # fails otherwise (a level never closed, or one closed that was never opened): delta
    # debugging keeps both, the pair goes in one cut.
    import operator
    from torch import fx
    from torch._C import _functorch
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from minifier.stages.run import Outcome
    from pt2kit.seams.ops import mode_brackets
    from pt2kit.signature import Failure, Signature

    graph = fx.Graph()
    x = graph.placeholder("x")
    level = graph.call_function(_functorch._vmap_increment_nesting, (4, "error"))
    sin = graph.call_function(torch.sin, (x,))
    graph.call_function(_functorch._vmap_decrement_nesting, ())
    inner = graph.call_function(_functorch._vmap_increment_nesting, (2, "error"))
    graph.call_function(_functorch._vmap_decrement_nesting, ())
    cos = graph.call_function(torch.cos, (sin,))
    graph.output((graph.call_function(operator.add, (cos, level)), inner))
    gm = fx.GraphModule(torch.nn.Module(), graph)
    names = [n.name for n in gm.graph.nodes]
    assert [(a.name, b.name) for a, b in mode_brackets(list(gm.graph.nodes))] == [(names[1], names[3]), (names[4], names[5])]

    target = Signature("compile_error", "RuntimeError", "cos")

    def query(candidates):
        outcomes = []
        for case, _, _ in candidates:
            try:
                case.gm(*[torch.randn(i.meta.shape) for i in case.inputs])
                left_open = _functorch.maybe_current_level() is not None
                while _functorch.maybe_current_level() is not None:
                    _functorch._vmap_decrement_nesting()
                other = Signature("runtime_error", "RuntimeError", "a vmap level left open") if left_open else None
            except RuntimeError as e:
                other = Signature("runtime_error", "RuntimeError", str(e)[:40])
            has_cos = any(n.target is torch.cos for n in case.gm.graph.nodes)
            outcomes.append(Outcome("judge", Failure(other or target) if other or has_cos else None, 0.0))
        return outcomes

    x0 = torch.randn(3)
    case = GraphCase(gm, [GraphInput("x", x0, TensorMeta.of(x0))], backend="inductor")
    best = Reducer(case, profile_case(case), target, query).run(PASSES)
    assert "cos" in best.kept and not any("vmap" in n for n in best.kept), best
    without_the_pass = Reducer(case, profile_case(case), target, query).run([p for p in PASSES if p.__name__ != "remove_mode_brackets"])
    assert sum("vmap" in n for n in without_the_pass.kept) == 4, without_the_pass  # (both pairs kept: what the pass is for)
