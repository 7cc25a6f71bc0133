"""Properties of the reducer, over graphs and failures Hypothesis draws, with fake judges.

The judge is a pure function of the candidate's ops (in process, no compile), so every
property is about the reducer's own logic: its canonical form is a fixed point, and what
it ends with is 1-minimal (no single op node can go) for any set of ops the failure needs.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minifier.reduce.engine import Reducer
from minifier.reduce.passes import PASSES
from minifier.stages.profile import profile_case
from minifier.stages.run import Outcome
from minifier.unit.case import GraphCase, GraphInput, TensorMeta
from pt2kit.signature import Failure, Signature

aten = torch.ops.aten
KINDS = [aten.sin.default, aten.cos.default, aten.exp.default, aten.tanh.default, aten.neg.default, aten.abs.default]
TARGET = Signature("compile_error", "RuntimeError", "the planted ops meet")
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def chain(ops: list, x: torch.Tensor) -> GraphCase:
    """A graph applying ``ops`` in turn, every other result returned (the rest only read)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(t):
        outs = []
        for i, op in enumerate(ops):
            t = op(t)
            if i % 2 or i == len(ops) - 1:
                outs.append(t)
        return tuple(outs)

    return GraphCase(make_fx(f)(x), [GraphInput("t_1", x, TensorMeta.of(x))], backend="inductor")


def needing(culprits: set[str]):
    """A judge: the candidate fails exactly when it still computes every op in ``culprits``."""

    def query(candidates):
        return [
            Outcome("judge", Failure(TARGET) if culprits <= set(case.op_names()) else None, 0.0)
            for case, _, _ in candidates
        ]

    return query


@st.composite
def programs(draw):
    ops = draw(st.lists(st.sampled_from(KINDS), min_size=2, max_size=12))
    names = sorted({str(op) for op in ops})
    culprits = draw(st.sets(st.sampled_from(names), min_size=1, max_size=min(3, len(names))))
    return ops, culprits


@SETTINGS
@given(program=programs())
def test_what_the_reducer_ends_with_is_1_minimal_for_any_set_of_ops_the_failure_needs(program):
    ops, culprits = program
    case = chain(ops, torch.randn(3, 4))
    reducer = Reducer(case, profile_case(case), TARGET, needing(culprits))
    best = reducer.run(PASSES)
    kept_ops = reducer.best_case().op_names()
    assert culprits <= set(kept_ops)
    # 1-minimal: without any one op node that is left, the failure is gone
    for node in best.kept:
        smaller = reducer.build(reducer.without([node], best))
        assert not culprits <= set(smaller.op_names()), (node, kept_ops)
    assert sorted(kept_ops) == sorted(culprits)  # (here that means one node of each culprit op, nothing else)


@SETTINGS
@given(program=programs(), data=st.data())
def test_the_canonical_form_is_a_fixed_point(program, data):
    ops, culprits = program
    case = chain(ops, torch.randn(3, 4))
    reducer = Reducer(case, profile_case(case), TARGET, needing(culprits))
    start = reducer.best
    kept = tuple(n for n in start.kept if data.draw(st.booleans(), label=n))
    outputs = tuple(n for n in start.outputs if n in kept and data.draw(st.booleans(), label=f"out {n}"))
    candidate = replace(start, kept=kept, outputs=outputs)
    once = reducer.normalize(candidate)
    assert reducer.normalize(once) == once
    assert set(once.kept) <= set(kept) and set(once.outputs) <= set(once.kept)
    reducer.build(once)  # and it can be built


@SETTINGS
@given(program=programs(), jobs=st.integers(2, 5))
def test_asking_ahead_side_by_side_ends_with_the_same_repro_and_the_same_count_of_answers_read(program, jobs):
    ops, culprits = program
    case = chain(ops, torch.randn(3, 4))
    batches: list[int] = []

    def judge(candidates):
        batches.append(len(candidates))
        return needing(culprits)(candidates)

    one = Reducer(case, profile_case(case), TARGET, needing(culprits))
    many = Reducer(case, profile_case(case), TARGET, judge, jobs=jobs)
    assert many.run(PASSES) == one.run(PASSES)
    assert many.queries == one.queries  # (the ones asked ahead and never read are not answers the passes used)
    assert sum(batches) >= many.queries


def stopping(culprits: set[str], seed: int):
    """A judge that takes ``until``, as the isolated queries do: its answers end in an order
    drawn from ``seed`` (children finish when they finish), and the batch stops once the
    first answer in order that satisfies ``until`` is in, with every one before it."""
    import random

    order = random.Random(seed)

    def query(candidates, until=None):
        answers = needing(culprits)(candidates)
        if until is None:
            return answers
        ended: list[Outcome | None] = [None] * len(answers)

        def decided() -> bool:
            for answer in ended:
                if answer is None:
                    return False
                if until(answer):
                    return True
            return False

        for i in order.sample(range(len(answers)), len(answers)):
            ended[i] = answers[i]
            if decided():
                break
        return ended

    return query


@SETTINGS
@given(program=programs(), jobs=st.integers(2, 5), seed=st.integers(0, 2**16), data=st.data())
def test_a_pass_wanting_the_first_candidate_that_fails_ends_the_same_whichever_query_ends_first(program, jobs, seed, data):
    # The blamed kernel's nodes are cut to the first third that fails (follow_blame): a third
    # that ends sooner must not change which third is kept.
    ops, culprits = program
    case = chain(ops, torch.randn(3, 4))
    one = Reducer(case, profile_case(case), TARGET, needing(culprits))
    many = Reducer(case, profile_case(case), TARGET, stopping(culprits, seed), jobs=jobs)
    one.blamed = many.blamed = tuple(n for n in one.best.kept if data.draw(st.booleans(), label=f"blamed {n}"))
    assert many.run(PASSES) == one.run(PASSES)
    assert many.queries == one.queries


def test_a_scan_asks_its_next_chunks_side_by_side():
    sin, exp, cos, tanh, neg = aten.sin.default, aten.exp.default, aten.cos.default, aten.tanh.default, aten.neg.default
    case = chain([sin, exp, cos, sin, tanh, aten.abs.default, cos, neg, sin], torch.randn(3, 4))
    culprits = {"aten.exp.default", "aten.tanh.default", "aten.neg.default"}
    batches: list[int] = []

    def judge(candidates):
        batches.append(len(candidates))
        return needing(culprits)(candidates)

    reducer = Reducer(case, profile_case(case), TARGET, judge, jobs=3)
    reducer.run(PASSES)
    assert set(reducer.best_case().op_names()) == culprits
    assert max(batches) == 3  # delta debugging's scan asked three chunks at once


def needing_nodes(culprits: set[str]):
    """A judge: the candidate fails exactly when it still computes every node in ``culprits`` (by name)."""

    def query(candidates):
        return [
            Outcome(
                "judge",
                Failure(TARGET) if culprits <= {n.name for n in case.gm.graph.nodes if n.op == "call_function"} else None,
                0.0,
            )
            for case, _, _ in candidates
        ]

    return query


@SETTINGS
@given(data=st.data())
def test_delta_debugging_on_a_failure_that_needs_most_of_the_graph_asks_about_each_needed_node_twice_at_most(data):
    # (a kernel of several ops: chunks of halving size would cost about 2n queries here)
    n = data.draw(st.integers(10, 24), label="nodes")
    case = chain([KINDS[i % len(KINDS)] for i in range(n)], torch.randn(3, 4))
    names = [node.name for node in case.gm.graph.nodes if node.op == "call_function"]
    culprits = set(data.draw(st.permutations(names), label="order")[: data.draw(st.integers(n // 2, n - 2), label="k")])
    reducer = Reducer(case, profile_case(case), TARGET, needing_nodes(culprits))
    assert delta_debugging_alone(reducer)
    assert set(reducer.best.kept) == culprits
    # each needed node: one drop in each of the two scans; each run that goes: 1, 2, 4, ... then a binary search
    assert reducer.queries <= 2 * len(culprits) + sum(
        2 * math.ceil(math.log2(length + 1)) + 1 for length in _runs(names, culprits)
    ), reducer.queries


def delta_debugging_alone(reducer: Reducer) -> bool:
    from minifier.reduce.scans import ddmin

    return ddmin(reducer, lambda c: c.kept, reducer.without)


def _runs(names: list[str], culprits: set[str]) -> list[int]:
    """The lengths of the runs of consecutive nodes the failure does not need."""
    runs, length = [], 0
    for name in names:
        if name in culprits:
            if length:
                runs.append(length)
            length = 0
        else:
            length += 1
    return [*runs, length] if length else runs
