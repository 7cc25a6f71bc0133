"""The unit every step shares: the accuracy rule, graph ids, a case moved to another device."""

import pytest
import torch

from minifier.unit.case import GraphCase, GraphId, GraphInput, TensorMeta
from minifier.unit.accuracy import accuracy_category, accuracy_divergence


# --------------------------------------------------------------------------- #
# Accuracy against fp64
# --------------------------------------------------------------------------- #


def test_accuracy_forgives_eager_rounding_but_not_a_real_error():
    generator = torch.Generator().manual_seed(0)
    truth = torch.randn(2000, dtype=torch.float64, generator=generator)

    def rounded(scale):  # truth plus rounding noise of a given size, in float32
        return (truth + scale * 1e-3 * torch.randn(2000, dtype=torch.float64, generator=generator)).float()

    eager, compiled, wrong = [rounded(1)], [rounded(1)], [rounded(10)]
    assert not torch.allclose(eager[0], compiled[0], atol=1e-4, rtol=1e-4)  # a fixed tolerance would flag it
    assert accuracy_divergence(eager, compiled, [truth]) is None  # no worse than eager's own error
    assert accuracy_divergence(eager, wrong, [truth]).startswith("output 0: RMSE vs fp64")


def test_accuracy_catches_nan_shape_and_integer_mismatches():
    ones = torch.ones(4)
    assert "non-finite" in accuracy_divergence([ones], [torch.tensor([1.0, float("nan"), 1.0, 1.0])], [ones.double()])
    assert "float32(2,)" in accuracy_divergence([ones], [torch.ones(2)], [ones.double()])
    assert accuracy_category(accuracy_divergence([ones], [torch.ones(2)], [ones.double()])) == "shape or dtype"
    # a dtype bug keeps its pair: bfloat16 where eager gives float32 is not its converse (a nested_compile_region
    # reused outside autocast; the rebuilt graph, traced again, failed the other way round)
    lowered = accuracy_category(accuracy_divergence([ones], [ones.bfloat16()], [ones.double()]))
    assert lowered == "shape or dtype: torch.bfloat16 where eager gives torch.float32"
    assert lowered != accuracy_category(accuracy_divergence([ones.bfloat16()], [ones], [ones.double()]))
    ints = torch.arange(4)
    assert accuracy_divergence([ints], [ints + torch.tensor([0, 0, 1, 0])], [ints]) == "output 0: 1 of 4 values differ from eager"
    # a NaN or an inf that eager and fp64 agree on is the answer: a compiler that swallows it is wrong
    # (softshrink's NaN -> 0), one that keeps it is right, and one eager alone gives is eager's own error
    nan_first = torch.tensor([float("nan"), 1.0, float("inf"), 0.5])
    swallowed = accuracy_divergence([nan_first], [torch.tensor([0.0, 1.0, float("inf"), 0.5])], [nan_first.double()])
    assert swallowed == "output 0: 1 values differ where eager and fp64 agree on a non-finite one"
    assert accuracy_category(swallowed) == "non-finite values lost"  # (not "made": the headline says which)
    assert accuracy_divergence([nan_first], [nan_first.clone()], [nan_first.double()]) is None
    assert "non-finite" in accuracy_divergence([nan_first], [nan_first.nan_to_num(posinf=1.0)], [nan_first.double()])
    alone = accuracy_divergence([nan_first], [torch.tensor([0.0, 1.0, float("inf"), 0.5])], None)  # (no fp64 run)
    assert alone == "output 0: 1 values differ where eager gives a non-finite one (no fp64 reference)"
    assert accuracy_category(alone) == "non-finite values lost"
    made = accuracy_divergence([torch.ones(2)], [torch.tensor([1.0, float("nan")])], [torch.ones(2).double()])
    assert accuracy_category(made) == "non-finite values"
    # inference_mode inside a graph makes inference tensors that a program may not write or save for
    # backward: a compiled graph whose outputs lose the flag is wrong with every value right
    with torch.inference_mode():
        made_in_inference = torch.ones(4)
    lost_flag = accuracy_divergence([made_in_inference], [ones], [ones.double()])
    assert lost_flag == "output 0: is_inference() is False, eager's True"
    assert accuracy_category(lost_flag) == "tensor flags"
    overflowed = torch.tensor([float("inf"), 1.0])  # eager's fp16 overflow, say: fp64 is finite, a finite result is fine
    assert accuracy_divergence([overflowed], [torch.tensor([7e4, 1.0])], [torch.tensor([7e4, 1.0], dtype=torch.float64)]) is None


def test_a_compiled_run_is_judged_from_its_own_random_state_and_leaves_the_programs_alone():
    # --accuracy under capture: a compiled run of a graph with dropout, judged against eager
    # and fp64 runs that start from the random state the compiled run started from; the
    # program's own random stream goes on as if nothing had been judged
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.unit.accuracy import judge_compiled_run

    def f(x):
        return (torch.nn.functional.dropout(x, 0.5, training=True) * 3,)

    x = torch.randn(64)
    gm = make_fx(f)(x)
    torch.manual_seed(7)
    state = torch.random.get_rng_state()
    right = gm(x)  # what a correct compiler returns from that state
    after = torch.random.get_rng_state()
    assert judge_compiled_run(gm, [x], right, rng=state) is None
    assert torch.equal(torch.random.get_rng_state(), after)
    wrong = judge_compiled_run(gm, [x], [right[0] + 0.5], rng=state)
    # (float64 draws other random numbers: eager, from the same state, is the reference)
    assert wrong is not None and wrong.signature.kind == "accuracy" and "no fp64 reference" in wrong.details
    assert torch.equal(torch.random.get_rng_state(), after)


def test_a_graph_id_reads_back_what_it_writes_and_knows_its_dynamo_graph():
    for text in ("g0", "g12.forward", "g3.backward2", "g1.inference"):
        assert str(GraphId.parse(text)) == text
    assert GraphId.parse("g3.backward2") == GraphId(3, "backward", 2)
    assert GraphId.parse("g3.backward2").owner == GraphId(3) and str(GraphId(3)) == "g3"
    assert str(GraphId(0, "forward", 1)) == "g0.forward"  # the first of its kind has no number
    for bad in ("", "3", "g", "gx.forward", "g0.", "g0.forward.x"):
        with pytest.raises(ValueError):
            GraphId.parse(bad)
    # a case's label is its id: an aot case names its dynamo graph, not its own index
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    case = GraphCase(gm=gm, inputs=[], boundary="aot", kind="forward", index=5, parent=2)
    assert case.label() == "g2.forward" and case.graph_id.owner == GraphId(2)


def test_a_case_moved_to_another_device_holds_nothing_of_its_own_and_runs_there():
    """``minify repro --device``'s move, here from the CPU to ``meta`` (no GPU here; the other way, a meta
    tensor has no data to move): inputs, constants, parameters, the devices nodes name, and the autocast."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.unit.case import CompileContext
    from minifier.unit.devices import devices_of, moved_to

    def f(x, w):
        made = torch.ones(3, device=x.device) * 2
        return (x @ w + made).to("cpu").relu()

    x, w = torch.randn(2, 4), torch.randn(4, 3)
    gm = make_fx(f)(x, w)
    gm.register_buffer("scale", torch.ones(3))
    inputs = [GraphInput("x_1", x, TensorMeta.of(x)), GraphInput("w_1", None, TensorMeta.of(w), seed=7)]
    context = CompileContext(autocast=(("cpu", "bfloat16"),))
    case = GraphCase(gm, inputs, boundary="aot", kind="inference", constants={"c": torch.ones(2)}, context=context)
    assert devices_of(case) == {"cpu"} and "device(type='cpu')" in gm.code

    moved = moved_to(case, "meta")
    assert devices_of(moved) == {"meta"} and "cpu" not in moved.gm.code and "meta" in moved.gm.code
    assert moved.inputs[0].value.device.type == "meta" and moved.inputs[1].value is None
    assert moved.gm.scale.device.type == "meta" and moved.constants["c"].device.type == "meta"
    assert moved.context.autocast == (("meta", "bfloat16"),)
    assert case.gm.scale.device.type == "cpu" and "meta" not in case.gm.code  # (the original is left as it was)
    out = moved.gm(torch.randn(2, 4, device="meta"), torch.randn(4, 3, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 3)


def test_a_candidate_never_enters_a_mode_it_does_not_leave():
    # a nested_compile_region under autocast was minified to an _enter_autocast with its _exit_autocast
    # dropped: autocast then stayed on for the eager reference, and the repro showed that, not the bug
    import torch.fx as fx

    from minifier.unit.case import leaves_a_mode_on

    graph = fx.Graph()
    x = graph.placeholder("x")
    enter = graph.call_function(torch.amp.autocast_mode._enter_autocast, ("cpu", torch.bfloat16, True, None))
    mm = graph.call_function(torch.matmul, (x, x))
    leave = graph.call_function(torch.amp.autocast_mode._exit_autocast, (enter,))
    graph.output((mm,))
    nodes = {n.name: n for n in graph.nodes}
    assert leaves_a_mode_on(nodes, [enter.name, mm.name])
    assert not leaves_a_mode_on(nodes, [enter.name, mm.name, leave.name]) and not leaves_a_mode_on(nodes, [mm.name])
    # hunt j: create_block_mask's vmap levels, which no value links: the innermost one open closes first
    from torch._functorch import predispatch

    graph = fx.Graph()
    x = graph.placeholder("x")
    outer = graph.call_function(predispatch._vmap_increment_nesting, (4, "error"))
    inner = graph.call_function(predispatch._vmap_increment_nesting, (4, "error"))
    mm = graph.call_function(torch.matmul, (x, x))
    close_inner = graph.call_function(predispatch._vmap_decrement_nesting, ())
    close_outer = graph.call_function(predispatch._vmap_decrement_nesting, ())
    graph.output((mm,))
    nodes = {n.name: n for n in graph.nodes}
    assert leaves_a_mode_on(nodes, [outer.name, inner.name, mm.name, close_inner.name])
    assert leaves_a_mode_on(nodes, [outer.name, inner.name, mm.name, close_outer.name])
    assert not leaves_a_mode_on(nodes, [inner.name, mm.name, close_outer.name])  # (one level, opened and closed)
    assert not leaves_a_mode_on(nodes, [n.name for n in (outer, inner, mm, close_inner, close_outer)])
    assert not leaves_a_mode_on(nodes, [outer.name, mm.name, close_outer.name])


def test_complex_constants_are_written_as_the_program_ran_them_and_its_own_subgraph_is_left_alone():
    # pytorch#197586: FX writes complex(-0.0, 0.0) as (-0+0j), which reads back as 0j; and inf or nan parts do not run
    import math
    import operator

    import torch.fx as fx

    from minifier.unit.graphio import ExactComplex, exact_constants

    def graph_of(constant, body=False):
        g = fx.Graph()
        x = g.placeholder("x")
        g.call_function(operator.setitem, (x, 0, constant))
        angle = g.call_function(torch.angle, (x,))
        g.output((angle, g.get_attr("body")) if body else angle)  # (a subgraph, as a higher-order op's body)
        return g

    inner = fx.GraphModule({}, graph_of(complex(-0.0, 0.0)))
    outer = fx.GraphModule({"body": inner}, graph_of(complex(-0.0, math.inf), body=True))
    assert "(-0+0j)" in inner.code  # FX's own code
    exact_constants(outer)
    assert "complex(-0.0, 0.0)" in outer.body.code and "complex(-0.0, inf)" in outer.code
    assert outer.body is not inner and "(-0+0j)" in inner.code  # (the program's own subgraph is untouched)
    x = torch.tensor([1 + 1j], dtype=torch.complex64)
    assert float(outer.body(x.clone())[0]) == pytest.approx(math.pi) and float(inner(x.clone())[0]) == 0.0
    assert isinstance(next(a for a in outer.graph.nodes if a.target is operator.setitem).args[2], ExactComplex)
    assert repr(ExactComplex(math.nan, -0.0)) == "complex(nan, -0.0)"


def test_an_index_without_repeats_is_stood_in_for_by_one_without_repeats():
    # (pytorch#198270's index_put: random stand-ins for an arange index repeated indices, which index_put
    # leaves undefined, and a maintainer would dismiss the repro)
    from minifier.unit.case import TensorMeta
    from minifier.unit.runtime import rand_tensor

    index, repeated = torch.tensor([3, 0, 2, 1]), torch.tensor([3, 0, 0, 1])
    assert TensorMeta.of(index).distinct and not TensorMeta.of(repeated).distinct
    assert not TensorMeta.of(torch.tensor([0.5, 1.5])).distinct
    m = TensorMeta.of(index)
    for seed in range(20):
        drawn = rand_tensor(m.shape, m.stride, torch.int64, seed=seed, low=m.low, high=m.high, distinct=True)
        assert drawn.unique().numel() == 4 and int(drawn.min()) >= 0 and int(drawn.max()) <= 3
    assert any(rand_tensor(m.shape, m.stride, torch.int64, seed=s, low=m.low, high=m.high).unique().numel() < 4 for s in range(20))


def test_offsets_are_stood_in_for_by_offsets():
    # (hunt 12, pytorch#183369: a jagged tensor's offsets [0, 6, 11, 14, 20] were stood in for by [19, 3, 11, 9, 14])
    from minifier.unit.case import GraphInput, TensorMeta

    offsets = torch.tensor([0, 6, 11, 14, 20])
    m = TensorMeta.of(offsets)
    assert m.ordered and m.distinct and not TensorMeta.of(torch.tensor([0, 6, 5])).ordered
    assert not TensorMeta.of(torch.tensor([[0, 1], [2, 3]])).ordered  # (1-d only)
    for seed in range(20):
        drawn = GraphInput("offsets", None, m, seed).materialize()
        assert int(drawn[0]) == 0 and int(drawn[-1]) == 20 and bool((drawn[1:] > drawn[:-1]).all()), drawn
