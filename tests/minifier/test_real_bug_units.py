"""In-process decisions behind the real-bug fixes: what a graph's inputs are, what counts as an effect, what the reference is.

Each test here is one thing a genuine torch bug needed (tests/minifier/real_bugs/) that no planted
bug did, checked on real graphs and real backends without a worker process:

- inputs that are views of one tensor (``f(buf, buf[1:])``) stay views of one tensor,
  in pt2kit's queries and in the repro's ``make_inputs``;
- special inputs (a ZeroTensor, a conjugate view) are made again, not copied flat;
- a write into an input, and the ``with torch.inference_mode():`` switches, are not
  dead code;
- a graph that tests its values for inf or NaN is judged against eager, not fp64;
- the fp64 reference keeps a conversion of integer data to a low-precision float, in
  pt2kit's queries and in the repro's ``ReproFloat64``;
- delta debugging that leaves a graph 1-minimal settles it, and a later round does not
  search its nodes again;
- a higher-order op's body is reduced too, the ops it returns included where its op cannot tell.
"""

import copy
import dataclasses
from dataclasses import replace

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from minifier.unit.case import GraphCase, GraphInput, TensorMeta, has_effect
from minifier.unit.copies import alias_groups, clone_values
from minifier.capture.casemaker import graph_inputs
from minifier.repro.files import exec_repro
from minifier.repro.writer import data_of, render


pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


def test_inputs_that_are_views_of_one_tensor_stay_so_when_copied():
    buf = torch.randn(4, 6)
    values = [buf, torch.ones(3), buf[1:], buf[:, 2:].t()]
    assert alias_groups(values) == [(0, [(2, 6, True), (3, 2, True)])]
    copies = clone_values(values)
    copies[0].add_(1)  # a write into the copy of buf shows through the copies of its views
    assert torch.equal(copies[2], values[2] + 1) and torch.equal(copies[3], values[3] + 1)
    assert copies[0].untyped_storage().data_ptr() != buf.untyped_storage().data_ptr()
    # overlapping tensors none of which holds the others' memory stay apart
    assert alias_groups([buf[:2], buf[1:]]) == []


def _writes_into_views(buf, tail):
    buf.mul_(0.5)
    return (tail[0] + 1,)


def test_a_repro_makes_aliased_inputs_views_of_one_tensor_again():
    buf = torch.randn(4, 6)
    gm = fx.symbolic_trace(_writes_into_views)
    for node, value in zip(gm.graph.find_nodes(op="placeholder"), (buf, buf[1:])):
        node.meta["example_value"] = value
    inputs = graph_inputs(gm.graph.find_nodes(op="placeholder"), [buf, buf[1:]])
    assert inputs[1].view_of == ("buf", 6)
    case = GraphCase(gm, inputs)
    made = case.materialize_inputs()
    assert made[1].untyped_storage().data_ptr() == made[0].untyped_storage().data_ptr()
    namespace = exec_repro(render(case, stage="eager"))
    buf_again, tail_again = namespace["make_inputs"](data_of(case))
    assert tail_again.untyped_storage().data_ptr() == buf_again.untyped_storage().data_ptr()
    assert tail_again.storage_offset() - buf_again.storage_offset() == 6 and not buf_again._is_view()


def _scales_its_parameter(z, y):
    with torch.no_grad():
        z.mul_(2)
    return (y + z,)


def test_an_input_that_shares_memory_without_being_a_view_is_made_so_again():
    # pytorch#125284: ``z = nn.Parameter(y)`` is a leaf on y's memory, no view of it. Made a view
    # of z, y was a view AOTAutograd refuses otherwise ("any_leaf"): the graph failed alone
    # another way than in the program, which was blamed whole (exit 5).
    y = torch.randn(2, requires_grad=True) * 1
    z = torch.nn.Parameter(y)
    gm = fx.symbolic_trace(_scales_its_parameter)
    for node, value in zip(gm.graph.find_nodes(op="placeholder"), (z, y)):
        node.meta["example_value"] = value
    inputs = graph_inputs(gm.graph.find_nodes(op="placeholder"), [z, y])
    assert inputs[0].view_of == ("y", 0) and inputs[0].shares_only and inputs[1].view_of is None  # (the op's result holds it)
    copies = clone_values([z, y])
    made = GraphCase(gm, inputs).materialize_inputs()
    written = exec_repro(render(GraphCase(gm, inputs), stage="eager"))["make_inputs"](data_of(GraphCase(gm, inputs)))
    for z_again, y_again in (copies, made, written):
        assert z_again.untyped_storage().data_ptr() == y_again.untyped_storage().data_ptr()
        assert z_again.is_leaf and z_again.requires_grad and not z_again._is_view() and not y_again._is_view()
    assert not made[1].is_leaf and not written[1].is_leaf  # (a capture's copy is a leaf: its meta says non-leaf)


def _writes_one_reads_the_other(x, y):
    x.add_(1)
    return (y.sum(),)


@pytest.mark.parametrize("as_view", [False, True])
def test_memory_read_as_another_dtype_of_its_size_is_made_so_again_and_another_size_stays_apart(as_view):
    # pytorch#194747: x and x.view(torch.int32) (a tensor of its own on x's memory) or a view of it read as
    # int32; AOTAutograd refuses a write into one. Made again as float32 memory, the graph passed alone (exit 5)
    x = torch.arange(8.0)
    y = x.view(torch.int32) if not as_view else x[2:].view(torch.int32)
    gm = fx.symbolic_trace(_writes_one_reads_the_other)
    for node, value in zip(gm.graph.find_nodes(op="placeholder"), (x, y)):
        node.meta["example_value"] = value
    inputs = graph_inputs(gm.graph.find_nodes(op="placeholder"), [x, y])
    assert inputs[1].view_of == ("x", 2 if as_view else 0) and inputs[1].shares_only is not y._is_view()
    case = GraphCase(gm, inputs)
    copies = clone_values([x, y])
    made = case.materialize_inputs()
    written = exec_repro(render(case, stage="eager"))["make_inputs"](data_of(case))
    for x_again, y_again in (copies, made, written):
        assert (x_again.dtype, y_again.dtype) == (torch.float32, torch.int32)
        assert y_again.untyped_storage().data_ptr() == x_again.untyped_storage().data_ptr()
        x_again.add_(1)  # the write shows through the int32 reading of that memory
        assert torch.equal(y_again, (x[2:] if as_view else x).add(1).view(torch.int32))
    assert alias_groups([x, x.view(torch.int16)]) == []  # (offsets count elements: another size stays apart)


@pytest.mark.parametrize("special", ["zerotensor", "conj"])
def test_special_inputs_are_made_again_not_copied_flat(special):
    from minifier.capture.casemaker import tensor_input

    plain = torch.randn(3, 4, dtype=torch.complex64)
    value = torch._efficientzerotensor((3, 4), dtype=torch.float32) if special == "zerotensor" else plain.conj()
    graph_input = tensor_input("x", value, ())
    assert graph_input.meta.special == special
    case = GraphCase(fx.symbolic_trace(lambda x: (x * 2,)), [graph_input])
    (made,) = case.materialize_inputs()
    (written,) = exec_repro(render(case, stage="eager"))["make_inputs"](data_of(case))
    for tensor in (made, written):
        if special == "zerotensor":
            assert torch._is_zerotensor(tensor)
        else:
            assert tensor.is_conj() and torch.equal(tensor.resolve_conj(), value.resolve_conj())


@pytest.mark.parametrize("kind", ["custom_function", "no_grad", "multi_output"])
def test_a_view_autograd_guards_is_made_again_as_that_view(kind):
    # pytorch#194534: an input an autograd.Function returned as-is, written through .detach():
    # AOTAutograd's replay of the write hits autograd's guard on such views ("Output 0 of
    # Ident is a view and is being modified inplace"), and a plain copy of it has no guard.
    from minifier.capture.casemaker import tensor_input
    from pt2kit.seams.special_tensors import view_kind

    class Ident(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    base = torch.randn(2, 3, requires_grad=True) * 1
    if kind == "custom_function":
        value = Ident.apply(base)
    elif kind == "no_grad":
        with torch.no_grad():
            value = base[:, :]
    else:
        value = base.unbind(0)[1]
    graph_input = tensor_input("x", value, ())
    assert graph_input.meta.view == kind and view_kind(base) is None
    case = GraphCase(fx.symbolic_trace(lambda x: (x.detach().mul_(2),)), [graph_input])
    (made,) = case.materialize_inputs()
    (written,) = exec_repro(render(case, stage="eager"))["make_inputs"](data_of(case))
    for tensor in (made, written):
        assert view_kind(tensor) == kind and torch.equal(tensor.detach(), value.detach())
        assert (tensor.shape, tensor.stride(), tensor.is_leaf) == (value.shape, value.stride(), value.is_leaf)
    if kind == "custom_function":  # the guard, with the Function's own name in its message
        with pytest.raises(RuntimeError, match="Output 0 of Ident is a view"):
            written.mul_(2)


def test_writes_into_inputs_and_inference_mode_switches_are_effects_not_dead_code():
    def program(x, y):
        x.mul_(y)
        with torch.inference_mode():
            y.transpose(0, 1)
        x += 1

    graphs = []
    torch.compile(program, backend=lambda gm, example_inputs: graphs.append(gm) or gm)(torch.randn(2, 2), torch.randn(2, 2))
    (gm,) = graphs
    effects = [getattr(n.target, "__name__", n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method") and has_effect(n)]
    assert effects == ["mul_", "_enter_inference_mode", "_exit_inference_mode", "iadd"]
    assert not has_effect(next(n for n in gm.graph.nodes if n.target == "transpose"))


def test_a_write_through_an_index_is_an_effect_not_dead_code():
    # pytorch#164875's graph: ``flat[:20] = True`` (``operator.setitem``, ``Tensor.__setitem__``) writes the
    # mask nonzero reads through a view; dropped as dead code, every candidate raised in
    # plain eager and the repro stayed the whole graph, "not reduced"
    def program(mask, x):
        flat = mask.reshape(-1)
        flat[:2] = True
        return x + mask.float()

    graphs = []
    torch.compile(program, backend=lambda gm, example_inputs: graphs.append(gm) or gm)(torch.zeros(4, dtype=torch.bool), torch.randn(4))
    (gm,) = graphs
    effects = [getattr(n.target, "__name__", n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method") and has_effect(n)]
    assert effects == ["setitem"], gm.code  # (operator.setitem here; Tensor.__setitem__ in a rebuilt graph)


def test_a_graph_that_tests_for_overflow_is_judged_against_eager_not_fp64():
    # An fp16 x*x that overflows to inf, then zeroed by a guard: a float64 run never
    # overflows, and would take the side of a compiler that drops the fp16 rounding
    # (pytorch#183607). A graph with no such test keeps the fp64 rule (torch's
    # test_rmse_improves_over_atol: a compiler more precise than eager is right).
    from minifier.unit.accuracy import reference_outputs
    from minifier.unit.float64 import fp64_blocker

    def guarded(x):
        e = x * x
        return (torch.where(torch.isinf(e), torch.zeros_like(e), e),)

    x = (torch.rand(8) * 400).half()
    gm = make_fx(guarded)(x)
    assert "aten.isinf.default" in fp64_blocker(gm)
    references = reference_outputs(gm, [x])
    assert references.fp64 is None and "inf or NaN" in references.fp64_error
    assert fp64_blocker(make_fx(lambda x: (x * 2,))(x)) is None


def test_the_fp64_reference_keeps_a_conversion_of_integer_data_and_promotes_the_rest():
    # pytorch#189518: Inductor drops cumsum's dtype=bfloat16 on bool data and computes exact
    # positions. Promoted to float64, the reference would compute exact positions too and
    # take the compiler's side; the rounding of exact data is what the program asked for.
    # Arithmetic on floats stays promoted: a compiler more precise than eager is right.
    from minifier.unit.accuracy import accuracy_divergence, reference_outputs
    from minifier.unit.float64 import float64_graph

    def positions(x):
        mask = torch.ones(x.shape, dtype=torch.bool)
        return (mask.cumsum(1, dtype=torch.bfloat16).float() * 0.01 + x.half().float(),)

    x = torch.zeros(2, 300)
    gm = fx.symbolic_trace(positions)
    (fp64,) = float64_graph(gm)(x.double())
    assert fp64.dtype == torch.float64
    rounded = torch.ones(2, 300, dtype=torch.bool).cumsum(1, dtype=torch.bfloat16)  # as eager rounds them
    assert torch.equal(fp64, rounded.double() * 0.01)
    exact = (torch.arange(1, 301).double() * 0.01).expand(2, 300).float()  # what a cast-dropping compiler gives
    references = reference_outputs(gm, [x])
    assert accuracy_divergence(references.expected, [exact], references.fp64) is not None
    # A float input cast down and up again is promoted: no rounding of x's values in the reference.
    y = torch.full((4,), 1 / 3)
    (y64,) = float64_graph(fx.symbolic_trace(lambda y: (y.half().float(),)))(y.double())
    assert torch.equal(y64, y.double())
    # The repro's ReproFloat64 carries the same rule with torch alone.
    case = GraphCase(gm, graph_inputs([n for n in gm.graph.nodes if n.op == "placeholder"], [x]))
    source = render(case, stage="aot_eager", accuracy=True)
    namespace = exec_repro(source)
    assert "fp64_dtype(torch.bfloat16" in source and "minifier_unit" not in source and "import minifier" not in source
    assert torch.equal(namespace["ReproFloat64"]({}).to(torch.float64)(x.double())[0], fp64)


def test_delta_debugging_settles_a_one_minimal_graph_and_the_next_round_skips_its_nodes():
    import planted  # noqa: F401  registers planted_pair (cos and exp in one graph)
    from minifier.reduce.passes import PASSES, delta_debugging, truncate_suffix
    from minifier.stages.profile import profile_case, realize
    from minifier.reduce.engine import Reducer
    from minifier.stages.run import run_case

    aten = torch.ops.aten

    def pair(x):
        a = aten.cos.default(x)
        b = aten.sin.default(a)
        return (aten.exp.default(b), aten.neg.default(x))

    x = torch.randn(4)
    origin = GraphCase(make_fx(pair)(x), [GraphInput("x_1", x, TensorMeta.of(x))], boundary="aot", kind="inference", backend="planted_pair")
    asked: list[int] = []

    def query(candidates):
        asked.append(len(candidates))
        return [run_case(realize(c, origin), "planted_pair") for c, _, _ in candidates]

    target = run_case(origin, "planted_pair").failure.signature
    reducer = Reducer(origin, profile_case(origin), target, query)
    reducer.run(PASSES)
    assert sorted(reducer.best.kept) == ["cos", "exp"] and reducer.settled()
    before = len(asked)
    truncate_suffix(reducer)
    delta_debugging(reducer)
    assert len(asked) == before  # settled: no node search asks again


def test_the_reducer_ends_on_a_graph_that_returns_its_inputs_as_saved_for_backward():
    # An aot forward graph returns the inputs its backward saves (map_bwd, a fresh genuine bug):
    # its canonical form drops those outputs, and the bisection's answer for it is cached. A
    # drop of such an output is that same cached candidate; when the best stayed the graph as
    # captured, the scan took the cached "fails" for progress and never ended.
    import signal

    import planted  # noqa: F401  registers planted_pair (it rejects a graph holding cos and exp)
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case, realize
    from minifier.stages.run import run_case

    aten = torch.ops.aten

    def forward(x, y):
        return (aten.exp.default(aten.cos.default(x)), x, y)

    x, y = torch.randn(4), torch.randn(4)
    inputs = [GraphInput("x_1", x, TensorMeta.of(x)), GraphInput("y_1", y, TensorMeta.of(y))]
    origin = GraphCase(make_fx(forward)(x, y), inputs, boundary="aot", kind="forward", backend="planted_pair")
    target = run_case(origin, "planted_pair").failure.signature
    reducer = Reducer(origin, profile_case(origin), target, lambda cs: [run_case(realize(c, origin), "planted_pair") for c, _, _ in cs])
    reducer.assume(reducer.best, True)  # (what minify run does with the graph the bisection just saw fail)

    def hung(*_):
        raise TimeoutError("the reducer did not end")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        reducer.run(PASSES)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert sorted(reducer.best.kept) == ["cos", "exp"] and reducer.best.outputs == ("exp",)


def test_an_internal_error_of_dynamos_tracing_is_a_compile_error_in_tracing_at_the_users_frame():
    # A fresh genuine bug: a nested_compile_region called with one tensor twice makes dynamo's
    # invoke_subgraph stamping raise a plain IndexError (not a dynamo exception) while it traces
    # f. It is a compile error of dynamo's tracing, not a run-time error of the script, and the
    # frame it names is the user's f, not torch's own wrapper dynamo traced on the way.
    from minifier.capture.frames import frame_of_exception, where_it_failed
    from pt2kit.signature import signature_of_exception

    @torch.compiler.nested_compile_region
    def g(x, y):
        return torch.mul(x, y).sin() + y

    def f(x, y):
        return g(x, y) + g(y, x) * g(x, x)

    torch._dynamo.reset()
    x, y = torch.randn(5), torch.randn(5)
    try:
        torch.compile(f, backend="eager")(x, y)
    except Exception as e:  # noqa: BLE001 - the genuine bug, asserted below
        raised = pytest.ExceptionInfo.from_exc_info((type(e), e, e.__traceback__))
    else:
        pytest.skip(f"torch {torch.__version__} traces the nested_compile_region without the bug")
    chain = [raised.value, raised.value.__context__]  # (torch 2.12 raises an InternalTorchDynamoError while handling it)
    assert "IndexError" in [type(e).__name__ for e in chain]
    assert where_it_failed(raised.value) == "tracing"
    assert signature_of_exception(raised.value).signature.kind == "compile_error"
    assert frame_of_exception(raised.value)["name"] == "f"
    # an error the compiled code raises as it runs is still a run-time error
    torch._dynamo.reset()
    with pytest.raises(Exception) as ran:
        torch.compile(lambda a, i: a[i], backend="eager")(torch.randn(5), torch.tensor([9]))
    assert "out of bounds" in str(ran.value)
    assert where_it_failed(ran.value) == "runtime" and signature_of_exception(ran.value).signature.kind == "runtime_error"


def test_the_reducer_reduces_inside_the_branches_of_a_cond():
    # A higher-order op is one node at the top level; its branches used to ride whole. Inside
    # them, an op's readers read its operand instead where the failure allows: the branch
    # that holds the rejected cos loses its sin and the add it returned (the sin has memory of
    # its own and the add's layout); the other branch keeps one op, the exp of its input,
    # which a branch may not return (an output aliasing an input).
    import planted  # noqa: F401  registers planted_dynamo_error (it rejects torch.cos, in bodies too)
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.reduce.bodies import bodies
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case, realize
    from minifier.stages.run import run_case

    def f(x):
        return torch.cond(x.sum() > 0, lambda x: (torch.cos(x).sin() + 1,), lambda x: (x.exp() * 2,), (x,))

    grabbed = {}

    def grab(gm, example_inputs):
        grabbed.update(gm=gm, inputs=example_inputs)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(f, backend=grab, fullgraph=True)(torch.randn(4))
    origin = make_case(grabbed["gm"], grabbed["inputs"], backend=BackendInfo("planted_dynamo_error", []), index=0)
    target = run_case(origin, "planted_dynamo_error").failure.signature
    assert "torch.cos is not supported" in str(target)

    def body_ops(gm):
        return {path: sorted(str(n.target.__name__ if callable(n.target) else n.target) for n in body.graph.nodes if n.op in ("call_function", "call_method")) for path, body in bodies(gm)}

    assert sum(len(ops) for ops in body_ops(origin.gm).values()) == 5
    reducer = Reducer(origin, profile_case(origin), target, lambda cs: [run_case(realize(c, origin), "planted_dynamo_error") for c, _, _ in cs])
    reducer.run(PASSES)
    reduced = reducer.best_case()
    assert run_case(reduced, "planted_dynamo_error").failure.signature == target
    ops = body_ops(reduced.gm)
    assert sorted(ops.values()) == [["cos"], ["exp"]], ops
    assert sum(len(o) for o in body_ops(origin.gm).values()) == 5  # (the origin's bodies are untouched)


def test_the_reducer_drops_a_scan_output_nothing_reads_and_edits_what_its_body_returns():
    # a scan's per-step ys that nothing at the top level reads kept its body's ops alive; dropped, they go. The
    # sin the body returns as its carry takes the cos's value in its place, found by running the body on fake
    # tensors (one row of each xs per step)
    import planted  # noqa: F401  registers planted_dynamo_error (it rejects torch.cos, in bodies too)
    from torch._higher_order_ops.scan import scan

    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.reduce.bodies import bodies
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case, realize
    from minifier.stages.run import run_case

    def f(init, xs):
        def step(h, x):
            new = torch.sin(torch.cos(h + x))
            return new, torch.exp(new * 2)

        return scan(step, init, xs)[0]

    grabbed = {}

    def grab(gm, example_inputs):
        grabbed.update(gm=gm, inputs=example_inputs)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(f, backend=grab, fullgraph=True)(torch.randn(4), torch.randn(3, 4))
    origin = make_case(grabbed["gm"], grabbed["inputs"], backend=BackendInfo("planted_dynamo_error", []), index=0)
    target = run_case(origin, "planted_dynamo_error").failure.signature
    assert "torch.cos is not supported" in str(target)

    def body_ops(gm):
        return sorted(n.target.__name__ for _, body in bodies(gm) for n in body.graph.nodes if n.op == "call_function")

    def returned(gm):
        (body,) = [b for _, b in bodies(gm)]
        return next(n for n in body.graph.nodes if n.op == "output").args[0]

    assert body_ops(origin.gm) == ["add", "cos", "exp", "mul", "sin"] and len(returned(origin.gm)) == 2
    reducer = Reducer(origin, profile_case(origin), target, lambda cs: [run_case(realize(c, origin), "planted_dynamo_error") for c, _, _ in cs])
    reducer.run(PASSES)
    reduced = reducer.best_case()
    assert run_case(reduced, "planted_dynamo_error").failure.signature == target
    assert body_ops(reduced.gm) == ["cos"] and len(returned(reduced.gm)) == 1, reduced.gm.print_readable(False)
    assert body_ops(origin.gm) == ["add", "cos", "exp", "mul", "sin"]  # (the origin's body is untouched)


def test_the_reducer_drops_the_weight_a_scan_body_reads_no_more_and_the_top_level_op_that_made_it():
    # the ys nothing reads was the only reader of w2 in the body: dropped, w2 is an operand no body reads,
    # and with it goes the top-level mul that computed it (a repro of the scan and its cos alone)
    import planted  # noqa: F401  registers planted_dynamo_error (it rejects torch.cos, in bodies too)
    from torch._higher_order_ops.scan import scan

    from minifier.reduce.bodies import bodies
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case, realize
    from minifier.stages.run import run_case

    def f(init, xs, w):
        w2 = w * 3

        def step(h, x):
            new = torch.cos(h + x)
            return new, new * w2

        return scan(step, init, xs)[0]

    origin = _dynamo_case(f, torch.randn(4), torch.randn(3, 4), torch.randn(4))
    origin = replace(origin, backend="planted_dynamo_error")
    target = run_case(origin, "planted_dynamo_error").failure.signature
    reducer = Reducer(origin, profile_case(origin), target, lambda cs: [run_case(realize(c, origin), "planted_dynamo_error") for c, _, _ in cs])
    reducer.run(PASSES)
    reduced = reducer.best_case()
    assert run_case(reduced, "planted_dynamo_error").failure.signature == target
    top = [str(n.target) for n in reduced.gm.graph.nodes if n.op == "call_function"]
    assert not any("mul" in t for t in top), reduced.gm.print_readable(False)
    (body,) = [b for _, b in bodies(reduced.gm)]
    assert len([n for n in body.graph.nodes if n.op == "placeholder"]) == 2, body.print_readable(False)  # (h and x)


def test_a_cond_output_nothing_reads_goes_from_both_branches_and_the_later_getitem_is_renumbered():
    from minifier.reduce.bodies import apply_output_drops, bodies, unused_outputs

    def f(x):
        outs = torch.cond(x.sum() > 0, lambda x: (x.sin(), x.cos(), x.exp()), lambda x: (x * 2, x + 1, x - 1), (x,))
        return outs[0] + outs[2]

    case = _dynamo_case(f, torch.randn(4))
    (cond,) = [n.name for n in case.gm.graph.nodes if n.op == "call_function" and "cond" in str(n.target)]
    assert unused_outputs(case.gm) == [(cond, 1)]
    x = torch.randn(4)
    dropped = apply_output_drops(copy.deepcopy(case.gm), frozenset({(cond, 1)}))
    for _, body in bodies(dropped):
        assert len(next(n for n in body.graph.nodes if n.op == "output").args[0]) == 2
    assert torch.equal(dropped(x)[0], case.gm(x)[0])  # (outs[2] is read as the second output now)
    assert sum(len(b.graph.nodes) for _, b in bodies(case.gm)) > sum(len(b.graph.nodes) for _, b in bodies(dropped))


def test_a_while_loop_value_only_it_carries_goes_whole_and_one_the_predicate_reads_stays():
    # (i, x, y): the predicate reads i, the body's next x reads only x, its next y reads x, and the program
    # reads only i. x feeds y, so x stays; y goes with its operand, its input in both bodies and its result
    from torch._higher_order_ops.while_loop import while_loop

    from minifier.reduce.bodies import apply_output_drops, bodies, unused_outputs

    def f(x, y):
        return while_loop(lambda i, x, y: i < 3, lambda i, x, y: (i + 1, x * 2, x.sin()), (torch.zeros((), dtype=torch.int64), x, y))[0]

    case = _dynamo_case(f, torch.randn(4), torch.randn(4))
    (loop,) = [n for n in case.gm.graph.nodes if n.op == "call_function" and "while_loop" in str(n.target)]
    assert unused_outputs(case.gm) == [(loop.name, 2)]
    dropped = apply_output_drops(copy.deepcopy(case.gm), frozenset({(loop.name, 2)}))
    (after,) = [n for n in dropped.graph.nodes if n.op == "call_function" and "while_loop" in str(n.target)]
    assert len(after.args[2]) == 2
    for _, body in bodies(dropped):
        assert len([n for n in body.graph.nodes if n.op == "placeholder"]) == 2 + len(after.args[3])
        assert "sin" not in body.code
    x, y = torch.randn(4), torch.randn(4)
    assert torch.equal(dropped(x, y)[0], case.gm(x, y)[0])


@pytest.mark.parametrize("through", ["dynamo", "aot"])
def test_operands_no_body_reads_go_from_cond_while_loop_scan_and_map_and_the_rest_still_compute_alike(through):
    # each op's second result is read by nothing: once dropped, u (closed over, or a cond's operand) is read by no
    # body, nor a scan's and a map's second xs (the first stays: the loop's length comes from it)
    from torch._higher_order_ops.map import map as hmap
    from torch._higher_order_ops.scan import scan
    from torch._higher_order_ops.while_loop import while_loop

    from minifier.reduce.bodies import apply_operand_drops, apply_output_drops, bodies, unread_operands, unused_outputs

    def f(x, xs, w, u):
        a = torch.cond(x.sum() > 0, lambda x, w, u: (x.sin() * w, x * u), lambda x, w, u: (x.cos() + w, x - u), (x, w, u))
        zero = torch.zeros((), dtype=torch.int64)
        b = while_loop(lambda i, y, z: i < 3, lambda i, y, z: (i + 1, y * w, z * u), (zero, x, x.clone()))
        c = scan(lambda h, pair: (h + pair[0] * w, pair[1] * u), torch.zeros(4), (xs, xs * 2))
        d = hmap(lambda pair: (pair[0] + w, pair[1] * u), (xs, xs * 3))
        return a[0], b[1], c[0], d[0]

    args = (torch.randn(4), torch.randn(3, 4), torch.randn(4), torch.randn(4))
    case = (_dynamo_case if through == "dynamo" else _aot_case)(f, *args)
    gm = apply_output_drops(copy.deepcopy(case.gm), frozenset(unused_outputs(case.gm)))
    unread = unread_operands(gm)
    hops = {n.name: str(n.target).rsplit(".", 1)[-1] for n in gm.graph.nodes if n.name in {d[0] for d in unread}}
    assert sorted(hops.values()) == ["cond", "map_impl", "scan", "while_loop"], unread
    assert len(unread) == 6, unread  # (u four times, a scan's and a map's second xs)
    inputs_before = sum(len([n for n in b.graph.nodes if n.op == "placeholder"]) for _, b in bodies(gm))
    dropped = apply_operand_drops(copy.deepcopy(gm), frozenset(unread))
    assert unread_operands(dropped) == []
    inputs_after = sum(len([n for n in b.graph.nodes if n.op == "placeholder"]) for _, b in bodies(dropped))
    assert inputs_before - inputs_after == 8, (inputs_before, inputs_after)  # (two bodies take a cond's and a while_loop's)
    for got, expected in zip(dropped(*args), case.gm(*args)):
        assert torch.equal(got, expected)
    # a drop found in a graph built with earlier drops names its place in the original, which every build starts from
    from minifier.reduce.bodies import _before_drops

    assert [_before_drops([1], 1), _before_drops([0, 2], 1), _before_drops([2], 0), _before_drops([], 3)] == [2, 3, 0, 3]
    xs, extra = sorted(d for d in unread if hops[d[0]] == "scan")  # (a second xs; u, after w)
    once = apply_operand_drops(copy.deepcopy(gm), frozenset({xs}))
    assert [d for d in unread_operands(once) if d[0] == xs[0]] == [extra]  # (a drop elsewhere moves no place)


def test_a_body_traced_without_values_gets_stand_ins_for_what_it_returns_from_fake_values():
    # a repro's bodies are traced from code, with no values on their nodes: the body is run on fake
    # tensors laid out as the profile saw its operands; a returned op takes an operand of its layout
    # with memory of its own, never a body input; and edits chained through a removed op still apply
    from torch._higher_order_ops.while_loop import while_loop

    from minifier.reduce.bodies import apply_body_edits, returned_stand_ins
    from minifier.stages.profile import profile_case

    def f(x):
        return while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, (a.sin() * 2 + 1).cos()), (torch.zeros((), dtype=torch.int64), x))[1]

    case = _aot_case(f, torch.randn(4))
    for body in case.gm.modules():
        if isinstance(body, torch.fx.GraphModule) and body is not case.gm:
            for node in body.graph.nodes:
                node.meta.clear()  # as the repro's traced bodies are
    metas = {i.name: i.meta for i in case.inputs} | {k: v.meta for k, v in profile_case(case).items()}
    found = returned_stand_ins(case.gm, metas.get)
    (body,) = {path for path, _ in found}
    # the cos returns the add_1's value in its place; the counter's add would return the loop's own input
    assert found == {(body, "cos"): "add_1"}, found
    once = apply_body_edits(copy.deepcopy(case.gm), frozenset({(body, "cos", "add_1")}))
    assert returned_stand_ins(once, metas.get) == {(body, "add_1"): "mul"}  # now returned, it takes the mul
    twice = apply_body_edits(copy.deepcopy(case.gm), frozenset({(body, "cos", "add_1"), (body, "add_1", "mul")}))
    output = next(n for n in twice.get_submodule(body).graph.nodes if n.op == "output")
    assert [a.name for a in output.args[0]] == ["add", "mul"]  # (add_1 edited first, by name: the cos reads the mul)
    # a candidate that no longer calls the loop holds no body: its edits are skipped
    bare = torch.fx.Graph()
    bare.output(bare.placeholder("x"))
    assert not dict(apply_body_edits(torch.fx.GraphModule(case.gm, bare), frozenset({(body, "cos", "add_1")})).named_children())


def test_a_body_op_returned_at_its_operands_layout_once_the_inputs_shrink_gets_that_operand_as_stand_in():
    # each branch returns a keepdim sum over a computed value: (4, 1) against (4, 8) at the program's
    # sizes, so no stand-in; once the input is (1, 1), the sum is of its operand's very layout, and the
    # bodies are run on fakes at the candidate's sizes, not the profile's
    from minifier.reduce.bodies import body_stand_ins
    from minifier.reduce.engine import Reducer
    from minifier.stages.profile import profile_case
    from pt2kit.signature import Signature

    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a.sin().sum(-1, keepdim=True), lambda a: a.cos().sum(-1, keepdim=True), (x,))

    case = _aot_case(f, torch.randn(4, 8))
    reducer = Reducer(case, profile_case(case), Signature("compile_error", "RuntimeError", "x"), lambda candidates: [])
    start = reducer.initial()
    returned = {edit: v for edit, v in body_stand_ins(reducer, start).items() if edit[1].startswith("sum")}
    assert returned == {}, returned
    shrunk = dataclasses.replace(start, shapes=((case.inputs[0].name, (1, 1)),))
    returned = {edit: v for edit, v in body_stand_ins(reducer, shrunk).items() if edit[1].startswith("sum")}
    assert sorted(v.split("_")[0] for v in returned.values()) == ["cos", "sin"], returned


def _aot_case(fn, *args):
    """``fn``'s aot inference graph, as the case pt2kit captures (real AOTAutograd, no compile)."""
    from torch._dynamo.backends.common import aot_autograd

    with torch.no_grad():
        return _dynamo_case(fn, *args, through=aot_autograd)


class Tagged(torch.Tensor):
    """A tag a library puts on its tensors: ``__torch_function__`` only, the data an ordinary tensor's."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_plain_tensor_subclass_input_is_rebuilt_and_a_wrapper_subclass_is_named():
    from torch.testing._internal.two_tensor import TwoTensor

    from minifier.capture.casemaker import tensor_input
    from minifier.repro.inputs import _tensor_expression
    from pt2kit.seams import special_tensors

    x = torch.randn(2, 3).as_subclass(Tagged)
    graph_input = tensor_input("x", x, ())
    assert type(graph_input.value) is torch.Tensor and torch.equal(graph_input.value, x.as_subclass(torch.Tensor))
    assert graph_input.meta.subclass == f"{__name__}.Tagged"
    assert _tensor_expression(graph_input).endswith(f".as_subclass({__name__}.Tagged)")
    wrapper = TwoTensor(torch.randn(2), torch.randn(2))
    assert special_tensors.plain_subclass(wrapper) is None
    assert "TwoTensor" in special_tensors.unsupported(wrapper)


def test_a_repro_run_elsewhere_shows_the_failure_by_its_signal_or_its_last_words():
    from pt2kit.signature import Signature, shows_failure

    compile_error = Signature("compile_error", "CppCompileError", "C++ compile error")
    wrapped = "Traceback (most recent call last):\n  ...\ntorch._inductor.exc.InductorError: CppCompileError: C++ compile error\n"
    assert shows_failure(1, wrapped, compile_error)
    assert not shows_failure(1, wrapped.replace("C++ compile", "C++ link"), compile_error)
    assert not shows_failure(0, wrapped, compile_error)  # it printed that, and passed
    accuracy = Signature("accuracy", "AccuracyError", "compiled output diverges from the fp64 reference (values)")
    verdict = "AccuracyError: compiled output diverges from the fp64 reference (values): output 0: RMSE vs fp64 1.7, eager's own 0\n"
    assert shows_failure(1, verdict, accuracy)
    assert not shows_failure(1, verdict.replace("(values)", "(non-finite values)"), accuracy)
    # raised without a message: bare, or through Inductor's wrapper, which prints the empty message's colon
    bare = Signature("compile_error", "AssertionError", "AssertionError")
    assert shows_failure(1, "Traceback ...\nAssertionError\n", bare)
    assert shows_failure(1, "Traceback ...\ntorch._inductor.exc.InductorError: AssertionError: \n", bare)
    assert not shows_failure(1, "Traceback ...\n    raise AssertionError\nKeyError: 'buf1'\n", bare)
    assert not shows_failure(1, "torch._inductor.exc.InductorError: AssertionError: buf1 is not a buffer\n", bare)
    segfault = Signature("crash", "SIGSEGV", "process killed by SIGSEGV")
    assert shows_failure(-11, "", segfault) and not shows_failure(-6, "", segfault) and not shows_failure(None, "", segfault)
    # a compiler's own diagnostic is part of a C++ error's signature: another C++ bug is another failure
    declared = Signature("compile_error", "CppCompileError", "C++ compile error | error: conflicting declaration 'auto at_Half_tmp_acc#_vec'")
    c_locale = wrapped + "/tmp/cache/ab/x.main.cpp:124:26: error: conflicting declaration 'auto at_Half_tmp_acc1_vec'\n"
    assert shows_failure(1, c_locale, declared)
    assert shows_failure(1, c_locale.replace("'auto at_Half_tmp_acc1_vec'", "‘auto at_Half_tmp_acc0_vec’"), declared)
    assert not shows_failure(1, wrapped, declared)  # no diagnostic printed
    assert not shows_failure(1, c_locale.replace("conflicting declaration", "redeclaration of"), declared)
    generated = Signature("runtime_error", "RuntimeError", "buf# has no storage at <path>")
    assert shows_failure(1, "RuntimeError: buf12 has no storage at /tmp/x/y.py\n", generated)  # names and paths masked


def test_torchs_repro_of_an_inference_graph_is_read_as_one(tmp_path):
    # torch 2.15 writes run_repro(..., is_inference=True); 2.13 writes no flag (a forward).
    from minifier.repro.files import load_repro
    from minifier.capture.torch_repro import convert_torch_repro

    for flag, kind in (("", "forward"), (", is_inference=True", "inference")):
        path = tmp_path / f"repro{bool(flag)}.py"
        path.write_text(
            "import torch\n"
            "class Repro(torch.nn.Module):\n"
            "    def forward(self, arg0_1):\n"
            "        sin = torch.ops.aten.sin.default(arg0_1);  arg0_1 = None\n"
            "        return (sin,)\n"
            "def load_args(reader):\n"
            "    buf0 = reader.storage(None, 16)\n"
            "    reader.tensor(buf0, (4,), is_leaf=True)  # arg0_1\n"
            "mod = Repro()\n"
            "if __name__ == '__main__':\n"
            "    from torch._dynamo.repro.after_aot import run_repro\n"
            "    with torch.no_grad():\n"
            f"        run_repro(mod, load_args, accuracy=False, command='run', save_dir=None, tracing_mode='real', check_str=None{flag})\n"
        )
        case = load_repro(__import__("pathlib").Path(convert_torch_repro(path, tmp_path / f"out{bool(flag)}"))).case
        assert (case.kind, case.compile_kwargs.get("is_inference", False)) == (kind, kind == "inference")


def _dynamo_case(fn, *args, through=None):
    """``fn``'s one dynamo graph, as the case pt2kit captures (real dynamo, no backend run);
    ``through=aot_autograd``: the graph its forward compiler gets instead."""
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo

    grabbed = {}

    def grab(gm, example_inputs):
        grabbed.update(gm=gm, inputs=example_inputs)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=grab if through is None else through(fw_compiler=grab), fullgraph=True)(*args)
    return make_case(grabbed["gm"], grabbed["inputs"], backend=BackendInfo("aot_eager", []), index=0)


def _set_onto_a_view(base):
    y = base[1:, 0]
    x = torch.empty(0)
    x.set_(y)
    return x[0] * 2


def test_a_smaller_graph_that_raises_in_plain_eager_too_is_not_the_failure():
    # pytorch#197399: AOTAutograd's metadata pass keeps `x` at size 0 after `x.set_(y)`, so
    # `x[0]` raises IndexError under aot_eager. Dropping the set_ raises the very same
    # IndexError in plain eager: no compiler bug, and it must not become the repro.
    from minifier.reduce.engine import Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case, realize
    from minifier.stages.run import RAISES_IN_EAGER, run_case

    origin = _dynamo_case(_set_onto_a_view, torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
    target = run_case(origin, "aot_eager").failure.signature
    assert target.exception == "IndexError"
    reducer = Reducer(origin, profile_case(origin), target, lambda cs: [run_case(realize(c, origin), "aot_eager") for c, _, _ in cs])
    no_set = reducer.without([n.name for n in origin.op_nodes if n.target == "set_"])
    outcome = run_case(realize(reducer.build(reducer.normalize(no_set)), origin), "aot_eager")
    assert outcome.failure.signature.exception == "IndexError"
    assert outcome.failure.signature.message.startswith(RAISES_IN_EAGER) and outcome.failure.signature != target
    reducer.run(PASSES)
    reduced = reducer.best_case()
    assert "set_" in {str(n.target) for n in reduced.op_nodes}
    namespace = exec_repro(render(reduced, stage="aot_eager"))
    namespace["run_eager"](namespace["Repro"](data_of(reduced)), namespace["make_inputs"](data_of(reduced)))


def test_values_inside_a_functorch_transform_are_profiled_as_values_no_input_can_take():
    # pytorch#197086's graph: torch.func.jvp flattened by dynamo. Its dual tensors live at a
    # transform level, where copying one out (requires_grad_) raises: profiling used to
    # blame the graph ("raises when run eagerly"), exit 5 on a real crash.
    from minifier.stages.profile import profile_case

    e = torch.tensor([[1.0, -2.0], [0.0, 3.0]])

    def g(x, t):
        return torch.func.jvp(lambda a: torch.ldexp(a, e), (x,), (t,))

    origin = _dynamo_case(g, torch.randn(2, 2), torch.randn(2, 2))
    info = profile_case(origin)
    dual = next(n.name for n in origin.op_nodes if "ldexp" in str(n.target))
    assert info[dual].kind == "other" and set(info) == {n.name for n in origin.op_nodes}


def test_an_output_far_below_the_tolerance_is_judged_at_its_own_scale():
    # pytorch#197089: std of values near 1e-30 underflows to 0 in float32 under a
    # decomposition; absolute tolerances (1e-4) passed it, a 100% error.
    from minifier.unit.accuracy import accuracy_divergence

    torch.manual_seed(0)
    x = torch.randn(4, 64) * 1e-30
    eager, fp64 = torch.std(x, 1), torch.std(x.double(), 1)
    assert "in units of the output's largest fp64 value" in accuracy_divergence([eager], [torch.zeros(4)], [fp64])
    assert accuracy_divergence([eager], [eager * (1 + 1e-6)], [fp64]) is None
    # small gradients computed alike pass; noise around a true zero keeps the absolute rule
    g = torch.randn(100) * 1e-6
    assert accuracy_divergence([g], [g + 1e-13 * torch.randn(100)], [g.double()]) is None
    a = torch.randn(1000)
    noise = (a - a.mean()).sum().reshape(1)
    assert accuracy_divergence([noise], [noise * 3], [(a.double() - a.double().mean()).sum().reshape(1)]) is None


class _CountingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.full((), 5.0))
        self.weight = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        self.count += 1
        return (x @ self.weight) * self.count


def test_a_modules_buffers_and_parameters_stay_static_inputs_in_the_repro():
    # pytorch PR #197039: AOTAutograd's partitioner may read a static input (a buffer) again
    # in the backward, after the forward updated it: the weight's gradient sees the count
    # incremented twice. Over plain tensors the same graph is partitioned right.
    from minifier.stages.run import run_case

    origin = _dynamo_case(_CountingModule(), torch.randn(6, 4))
    assert {i.name: i.static for i in origin.inputs} == {
        "L_self_buffers_count_": "unguarded", "L_self_parameters_weight_": "unguarded", "L_x_": None
    }  # fmt: skip
    assert "torch._dynamo.mark_static_address(inputs[0], guard=False)" in render(origin, stage="aot_eager")
    outcome = run_case(origin, "aot_eager", accuracy=True)
    assert outcome.failure is not None and outcome.failure.signature.exception == "AccuracyError"
    plain = origin.replace(inputs=[replace(i, static=None) for i in origin.inputs])
    assert run_case(plain, "aot_eager", accuracy=True).failure is None


def _write_past_the_view(x):
    v = x.as_strided((10,), (1,), storage_offset=5)
    v.add_(1)
    return v * 2


def test_an_input_that_is_a_slice_keeps_the_storage_around_it():
    # pytorch#140171: the graph reads and writes past its input's elements, into the storage
    # of the tensor the program sliced it from (which the graph never saw). A copy of the
    # elements alone fails otherwise (setStorage out of bounds, even in eager).
    from minifier.stages.run import run_case

    base = torch.arange(30.0)
    origin = _dynamo_case(_write_past_the_view, base[3:13])
    (x,) = origin.inputs
    assert x.meta.storage == (3, 30)
    made = x.materialize()
    assert made.storage_offset() == 3 and made.untyped_storage().nbytes() == 30 * 4
    assert torch.equal(made.as_strided((30,), (1,), 0), base) and made.untyped_storage().data_ptr() != base.data_ptr()
    saved = data_of(origin)["input:L_x_"]
    assert torch.equal(exec_repro(render(origin, stage="eager"))["clone_input"](saved).as_strided((30,), (1,), 0), base)
    random = origin.replace(inputs=[replace(x, seed=7)])
    assert "storage=(3, 30)" in render(random, stage="aot_eager")
    dense = _dynamo_case(_write_past_the_view, torch.arange(30.0)).inputs[0]  # its elements are its storage
    assert dense.meta.storage is None
    failure = run_case(origin, "aot_eager").failure
    if failure is None:
        assert torch.__version__ >= "2.15", "the bug passed on a torch that has it"  # (fixed in 2.15)
        return
    assert failure.signature.exception == "RuntimeError" and "as_strided_scatter" in failure.signature.message
    assert run_case(random, "aot_eager").failure.signature == failure.signature


def test_a_view_spanning_all_of_its_base_stays_the_view_when_copied():
    # both hold all the memory: the base stays the base, the view a view of it
    x = torch.randn(2, 3)
    assert alias_groups([x.view(-1), x]) == [(1, [(0, 0, True)])]
    flat, base = clone_values([x.view(-1), x])
    assert flat._is_view() and not base._is_view() and flat.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


def _sum_of_products(a, b, c):
    return (a * b + c,)


def test_a_backward_graph_keeps_the_inputs_aotautograd_donated_to_inductor(tmp_path):
    """Hunt b's ``nested_compile_region`` wrong weight gradient: Inductor reused the memory of a backward input
    AOTAutograd donates to it (read from the tracing context the program compiled in), and the graph compiled
    alone, with none donated, was right. The capture keeps the donated inputs by name; the repro gives them
    again by position, only while ``donated_buffer`` is on; the first workaround tried turns it off."""
    import dataclasses

    import torch._functorch.config as functorch_config

    from minifier.bisect.subsystem import workarounds
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.repro.files import exec_repro, load_repro, write_repro
    from minifier.repro.writer import render
    from pt2kit.seams import compile_fx

    a, b, c = torch.randn(4), torch.randn(4), torch.randn(4)
    gm = torch.fx.symbolic_trace(_sum_of_products)
    dynamo = make_case(gm, [a, b, c], backend=BackendInfo("inductor", []), index=0, in_backend=False)
    backward = dataclasses.replace(
        dynamo, boundary="aot", kind="backward", compile_kwargs={"is_backward": True}, backward=False, donated=("c", "b")
    )
    read = load_repro(write_repro(backward, tmp_path / "g0.backward", stage="inductor")).case
    assert read.donated == ("c", "b")
    text = render(read, stage="inductor")
    assert "with donating([1, 2], None):" in text, text
    namespace = exec_repro(text, meta={"definitions": read.definitions})
    with namespace["donating"]([0, 2]):
        assert compile_fx.donated_inputs(read.gm) == ("a", "c")  # as Inductor's inner compile reads them
    with functorch_config.patch(donated_buffer=False), namespace["donating"]([0, 2]):
        assert compile_fx.donated_inputs(read.gm) == ()  # AOTAutograd donates none then
    # an input the reduction drops moves the others: they are found again by name
    fewer = torch.fx.symbolic_trace(lambda b, c: (b + c,))
    assert "with donating([0, 1], None):" in render(dataclasses.replace(read, gm=fewer, inputs=read.inputs[1:]), stage="inductor")
    assert "donating" not in render(dataclasses.replace(read, donated=()), stage="inductor")
    alone = dataclasses.replace(read, gm=torch.fx.symbolic_trace(lambda a: (a * 2,)), inputs=read.inputs[:1])
    assert load_repro(write_repro(alone, tmp_path / "alone", stage="inductor")).case.donated == ()  # (none it still takes)
    first = workarounds(None, "inductor", "inductor", donated=True)[0]
    assert "donated_buffer = False" in first.code and "enable_autograd_cache" in first.code, first
    assert "donated_buffer" not in workarounds(None, "inductor", "inductor")[0].code
    # a graph that draws random numbers (hunt 14: a program comparing compiled dropout with eager's under one
    # seed): first, torch's documented switch, before any lighter backend
    drawn = workarounds(None, "aot_eager_decomp_partition", "inductor", draws=True)
    assert "fallback_random = True" in drawn[0].code and drawn[-1].stage == "aot_eager", drawn
    assert not any("fallback_random" in o.code for o in workarounds(None, "aot_eager", "inductor", draws=True))


def _dropout_doubled(x):
    return (torch.nn.functional.dropout(x, 0.5, training=True) * 2,)


def _dropout_beside_a_cos(x):
    return (torch.nn.functional.dropout(x, 0.5, training=True) * 2, x.cos())


def test_a_graph_that_draws_random_numbers_is_compared_only_where_it_draws_eager_s(tmp_path):
    """Hunt k: under ``--accuracy``, a graph with dropout was judged wrong at every stage that takes Inductor's
    decompositions (they draw otherwise than eager), so a dropout graph before the program's real bug became
    the culprit, and a repro of ``torch.rand`` alone "failed" whatever the bug. Its accuracy check now compiles
    with ``fallback_random`` (eager's draws, as torch's own accuracy minifier does), and a run that drew
    otherwise, the program's own, is judged on what random draws cannot change: shape, dtype, structure."""
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.repro.writer import render
    from minifier.stages.run import run_case
    from minifier.unit.accuracy import judge_compiled_run

    x = torch.randn(64)
    gm = torch.fx.symbolic_trace(_dropout_doubled)
    case = make_case(gm, [x], backend=BackendInfo("inductor", []), index=0, in_backend=False)
    assert "torch._inductor.config.fallback_random = True" in render(case, stage="aot_eager_decomp_partition", accuracy=True)
    assert "fallback_random" not in render(case, stage="aot_eager", accuracy=True)  # (aot_eager draws eager's)
    assert "fallback_random" not in render(case, stage="aot_eager_decomp_partition")  # (no values are compared)
    with torch._inductor.config.patch(fallback_random=False):  # (restored after the check's apply_config sets it)
        assert run_case(case, "aot_eager_decomp_partition", accuracy=True).failure is None
    # the program's own compiled run drew Inductor's numbers: its values are not judged, its dtype is
    rng = torch.get_rng_state()
    drawn = (torch.rand(64) < 0.5) * x * 2
    assert judge_compiled_run(gm, [x], [drawn], rng=rng) is not None
    assert judge_compiled_run(gm, [x], [drawn], rng=rng, draws_otherwise=True) is None
    assert judge_compiled_run(gm, [x], [drawn.double()], rng=rng, draws_otherwise=True) is not None
    # an output no draw reaches still compares: a bug there is not hidden by the dropout beside it
    beside = torch.fx.symbolic_trace(_dropout_beside_a_cos)
    assert judge_compiled_run(beside, [x], [drawn, x.cos()], rng=rng, draws_otherwise=True) is None
    assert judge_compiled_run(beside, [x], [drawn, x.cos() + 1], rng=rng, draws_otherwise=True) is not None


def test_a_program_comparing_its_graphs_draws_with_eager_s_judges_them_as_drawn(tmp_path):
    """torch's ``test_rng``: a program that compares what its compiled graph draws with eager's own draws. Under
    ``accuracy="draws"`` (which :func:`~minifier.bisect.plainly.draws_of_inductor` finds) a graph's draws are
    judged as they come: no ``fallback_random`` in its check or its repro, which keeps that mode when read back,
    and the program's capture is asked for it."""
    from pathlib import Path

    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.capture.program import ProgramRun
    from minifier.repro.files import load_repro, write_repro
    from minifier.repro.writer import render
    from minifier.stages.run import run_case

    import torch._inductor.config

    x = torch.randn(64)
    with torch._inductor.config.patch(fallback_random=False):  # (an in-process run_case before this one set it)
        case = make_case(torch.fx.symbolic_trace(_dropout_doubled), [x], backend=BackendInfo("inductor", []), index=0, in_backend=False)
    text = render(case, stage="aot_eager_decomp_partition", accuracy="draws")
    assert "fallback_random" not in text and "its random draws are eager's own" in text
    # the decompositions' dropout draws otherwise than eager: judged on its draws, the graph differs
    with torch._inductor.config.patch(fallback_random=False):
        assert run_case(case, "aot_eager_decomp_partition", accuracy="draws").failure is not None
    path = write_repro(case, tmp_path, stage="aot_eager_decomp_partition", accuracy="draws")
    assert load_repro(path).accuracy == "draws"
    assert ProgramRun(Path("p.py"), (), None, "draws").command(tmp_path, None)[-4:-2] == ["--accuracy", "draws"]


def _inductors_own_dropout() -> torch.fx.GraphModule:
    """``rand_like(x) > 0.5`` as Inductor's decompositions leave it in an aot graph: its own generator."""
    import torch._inductor.inductor_prims  # (registers prims.inductor_*)

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    seeds = graph.call_function(torch.ops.prims.inductor_seeds.default, (1, torch.device("cpu")))
    seed = graph.call_function(torch.ops.prims.inductor_lookup_seed.default, (seeds, 0))
    drawn = graph.call_function(torch.ops.prims.inductor_random.default, ([64], seed, "rand"))
    kept = graph.call_function(torch.ops.aten.gt.Scalar, (drawn, 0.5))
    graph.output((graph.call_function(torch.ops.aten.mul.Tensor, (kept, x)),))
    return torch.fx.GraphModule({}, graph)


def test_an_aot_graph_holding_inductor_s_own_generator_is_not_compiled_with_fallback_random(tmp_path):
    """A healthy GPT-2 step with dropout, through the API with ``accuracy=True``: its aot forward graph holds
    ``prims.inductor_random`` (Inductor's decompositions put it there), whose lowering asserts ``not
    fallback_random``; compiled with it, the graph "failed" to compile and was minified. Such a graph's
    check leaves ``fallback_random`` alone and is judged despite its draws."""
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.repro.writer import render
    from minifier.unit.float64 import draws_as_eager_under_fallback, draws_inductors

    x = torch.randn(64)
    gm = _inductors_own_dropout()
    assert draws_inductors(gm) and not draws_inductors(torch.fx.symbolic_trace(_dropout_doubled))
    assert not draws_as_eager_under_fallback(gm, "inductor")
    case = make_case(gm, [x], backend=BackendInfo("inductor", []), index=0, in_backend=False)
    assert "torch._inductor.config.fallback_random = True" not in render(case, stage="inductor", accuracy=True)


def _hooked_two_heads(x, w):
    h = x @ w
    z = h * 2
    z.register_hook(lambda g: g + 1.0)
    return h.tanh().sum(-1), z.sin().sum(-1)


def test_a_repro_imports_the_module_that_registers_a_higher_order_op_of_its_graph(tmp_path):
    """Hunt n: a hook on an intermediate is traced as ``torch.ops.higher_order.register_hook``, which ``import
    torch`` alone does not register; the graph's repro raised AttributeError for its reader and for pt2kit
    itself ("none of its 0 graphs"). The repro imports the module that defines each higher-order op it calls."""
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.repro.files import write_repro
    from support.running import torch_alone

    graphs = []
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    torch.compile(_hooked_two_heads, backend=lambda gm, example_inputs: graphs.append(gm) or gm)(x, w)
    (gm,) = graphs
    assert any("register_hook" in str(n.target) for n in gm.graph.nodes)
    case = make_case(gm, [x, w], backend=BackendInfo("eager", []), index=0, in_backend=False)
    ran = torch_alone(write_repro(case, tmp_path / "run", stage="eager"), tmp_path / "elsewhere")
    assert ran.returncode == 0, ran.stderr[-1500:]


MODE_AROUND_COMPILE = """
import torch

class Mul2(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {})) * 2

with Mul2():
    torch.compile(lambda x: x.view(-1))(torch.ones(3))
"""


def test_a_program_that_fails_otherwise_run_plainly_gets_no_stage_named(tmp_path):
    """Hunt 14 (pytorch#115741): run plainly, ``torch.compile``'s own lazy import runs under the user's mode and
    raises (a ``torch.device`` times 2); under pt2kit's capture, which imported it already, the program fails later,
    in AOTAutograd's runtime wrapper. "Only on its own backend" named a stage the program, run plainly, never reaches."""
    from minifier.bisect.plainly import fails_otherwise_plainly
    from minifier.capture.program import ProgramRun
    from pt2kit.signature import Failure, Signature

    script = tmp_path / "program.py"
    script.write_text(MODE_AROUND_COMPILE)
    captured = Failure(Signature("runtime_error", "TypeError", "unsupported operand type(s) for *: 'NoneType' and 'int'"))
    said = fails_otherwise_plainly(ProgramRun(script), captured)
    assert said is not None and "fails otherwise (TypeError: unsupported operand type(s) for *: 'torch.device'" in said, said
    plain = Failure(Signature("runtime_error", "TypeError", "unsupported operand type(s) for *: 'torch.device' and 'int'"))
    assert fails_otherwise_plainly(ProgramRun(script), plain) is None  # (the failure it shows plainly: the verdict stands)


SEEDED_DROPOUT_COMPARED = """
import torch

def f(x):
    return torch.nn.functional.dropout(x.sin(), 0.5, training=True) * 2

x = torch.randn(64)
torch.manual_seed(0)
expected = f(x)
torch.manual_seed(0)
torch.testing.assert_close(torch.compile(f)(x), expected)
"""


@pytest.mark.slow  # (four runs of the program, each compiling through Inductor)
def test_a_program_comparing_draws_that_first_fails_at_the_decompositions_is_told_it_compares_draws(tmp_path):
    """Hunt 14: compiled dropout compared with eager's under one seed fails first at aot_eager_decomp_partition,
    whose decompositions draw as Inductor does. That verdict was "the bug is in the decompositions"; with
    ``fallback_random`` the program runs to the end, and with each graph drawing elsewhere in eager's stream it
    fails: the program compares its graphs' draws with eager's own."""
    from minifier.bisect.plainly import around_its_graphs
    from minifier.capture.program import ProgramRun
    from minifier.isolation.session import Session
    from pt2kit.errors import ComparesEagersDraws
    from pt2kit.signature import Failure, Signature

    script = tmp_path / "program.py"
    script.write_text(SEEDED_DROPOUT_COMPARED)
    failure = Failure(Signature("runtime_error", "AssertionError", "Tensor-likes are not close!"))
    graph = make_fx(lambda x: torch.nn.functional.dropout(x.sin(), 0.5, training=True) * 2)(torch.randn(4))
    session = Session("program", out=tmp_path / "runs", quiet=True)
    try:
        with pytest.raises(ComparesEagersDraws, match="compares what its graphs draw"):
            around_its_graphs(session, ProgramRun(script, accuracy=True), failure, "inductor", [("g0", graph)])
    finally:
        session.close()


def test_a_cond_whose_branch_holds_a_map_is_inlined_with_the_maps_body_moved_to_the_graph():
    # hunt 14: a cond around a map (whose lowering is the bug) was kept, 2 -> 2 nodes: inlining skipped any body
    # that reads attributes of its own. The nested body now moves to the graph, under a name of the graph's own.
    from torch._higher_order_ops.map import map as hmap

    from minifier.stages.inline import inlined

    def f(p, xs):
        return torch.cond(p, lambda xs: hmap(lambda x: x.cos() * 2, xs), lambda xs: xs.flip(0), (xs,))

    case = _dynamo_case(f, torch.tensor(True), torch.randn(4, 3))
    flat = inlined(case.gm, 0)
    assert flat is not None
    called = [str(n.target) for n in flat.graph.nodes if n.op == "call_function"]
    assert not any("cond" in c for c in called) and any("map" in c for c in called), called
    xs = torch.randn(4, 3)
    assert torch.allclose(flat(torch.tensor(True), xs)[0], xs.cos() * 2)
    assert torch.equal(inlined(case.gm, 1)(torch.tensor(False), xs)[0], xs.flip(0))  # (the false branch, had none)
