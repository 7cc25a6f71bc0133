"""explain.explain(fn, *args) on real dynamo: breaks, ops, guards, and the user's caches left alone.

Line numbers are computed from this file's own source (:func:`line_of`), never typed in.
"""
from __future__ import annotations

import inspect
import json

import pytest
import torch
import torch._dynamo.convert_frame as convert_frame
import torch._dynamo.pgo as pgo
from torch._dynamo.utils import counters

import explain
from explain import hooks
from pt2kit import seams

if seams.torch_version() < (2, 13):  # (and test_explain_records, which reuses these functions)
    pytest.skip("explain.explain analyses in a cache region of its own: torch 2.13 on", allow_module_level=True)
from torch._dynamo.eval_frame import _get_cache_entries_for_region


pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


def line_of(fn, text: str) -> int:
    """The absolute line number of the one line of ``fn``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, f"{text!r} occurs {len(hits)} times in {fn.__name__}"
    return hits[0]


class CountingBackend:
    """A backend that runs graphs eagerly and remembers each graph it was given."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def print_then_cos(x):
    y = x.sin()
    print("side effect")
    return y.cos()


def branch_on_tensor(x):
    y = x * 2
    if y.sum() > 0:
        y = y - 1
    return y


def item_then_divide(x):
    peak = x.abs().max().item()
    return x / peak


def unsupported_builtin(x):
    y = x + 1
    _ = memoryview(b"ab")  # (dynamo 2.15 traces bytes(3): memoryview breaks on 2.13-2.15)
    return y * 2


def three_breaks(x):
    x = x.sin()
    print("one")
    if x.sum() > 0:
        x = x + 1
    return x / x.sum().item()


def test_print_break_is_reported_at_the_print_with_a_remedy():
    report = explain.explain(print_then_cos, torch.randn(4))

    assert report.break_count == 1
    brk = report.breaks[0]
    assert (brk.filename, brk.lineno) == (__file__, line_of(print_then_cos, 'print("side effect")'))
    assert brk.location.line == 'print("side effect")'
    assert brk.location.function == "print_then_cos"
    assert brk.cause == "Failed to trace builtin operator"
    assert brk.reason.startswith("`print()` does Python I/O")
    assert "reorderable_logging_functions" in brk.remedy
    assert "Dynamo does not know how to trace builtin operator `print`" in brk.raw_reason
    assert report.graph_count == 2
    assert [graph.ops for graph in report.graphs] == [("Tensor.sin",), ("Tensor.cos",)]


def test_tensor_dependent_if_gets_plain_words_and_keeps_torchs_raw_reason():
    report = explain.explain(branch_on_tensor, torch.ones(3))

    assert report.break_count == 1
    brk = report.breaks[0]
    assert brk.lineno == line_of(branch_on_tensor, "if y.sum() > 0:")
    assert brk.cause == "Data-dependent branching"
    assert "tests the value of a tensor" in brk.reason
    assert "torch.where" in brk.remedy and "torch.cond" in brk.remedy
    # torch's own text survives, including the cryptic developer context torch.explain shows
    assert "attempted to jump with TensorVariable()" in brk.raw_reason
    assert brk.doc_url.endswith(".html")


def test_item_break_suggests_capture_scalar_outputs():
    report = explain.explain(item_then_divide, torch.randn(5))

    assert [brk.lineno for brk in report.breaks] == [line_of(item_then_divide, ".item()")]
    assert report.breaks[0].cause == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert "capture_scalar_outputs = True" in report.breaks[0].remedy


def test_guards_after_a_graph_break_name_the_users_expression_not_dynamos_stack_slot():
    report = explain.explain(item_then_divide, torch.randn(5))

    resumed = [graph for graph in report.graphs if graph.resumed_at is not None]
    assert [graph.resumed_at for graph in resumed] == [line_of(item_then_divide, ".item()")]
    texts = [guard.text for guard in resumed[0].guards]
    assert any(text.startswith("x.abs().max().item() == ") for text in texts)  # the float .item() returned
    assert "___" not in str(report) and "___" not in " ".join(texts)


def test_unsupported_builtin_names_the_builtin_and_its_argument_types():
    report = explain.explain(unsupported_builtin, torch.randn(2))

    assert report.break_count == 1
    brk = report.breaks[0]
    assert brk.lineno == line_of(unsupported_builtin, "memoryview(")
    assert brk.reason == "The Python builtin `memoryview` is not supported by dynamo for arguments of types ['bytes']"
    assert brk.remedy.startswith("Use a torch operation instead of `memoryview`")


def test_every_break_of_a_function_is_reported_in_order():
    report = explain.explain(three_breaks, torch.ones(3))

    assert report.break_count == 3
    assert [brk.lineno for brk in report.breaks] == [
        line_of(three_breaks, 'print("one")'),
        line_of(three_breaks, "if x.sum() > 0:"),
        line_of(three_breaks, ".item()"),
    ]
    assert [brk.cause for brk in report.breaks] == [
        "Failed to trace builtin operator",
        "Data-dependent branching",
        "Unsupported Tensor.item() call with capture_scalar_outputs=False",
    ]


def helper_that_prints(y):
    print("inside the helper")
    return y * 3


def calls_a_breaking_helper(x):
    return helper_that_prints(x + 1) - 1


def test_a_break_in_a_callee_points_at_the_callee_and_keeps_the_user_stack():
    report = explain.explain(calls_a_breaking_helper, torch.randn(2))

    # One place, two broken graphs: the caller's (dynamo cannot resume inside an inlined
    # call) and then the helper's, compiled as a frame of its own.
    assert report.break_count == 1
    assert len(report.breaks[0].compile_ids) == 2
    assert report.graph_count == 3
    stack = report.breaks[0].user_stack
    assert [(frame.function, frame.lineno) for frame in stack] == [
        ("calls_a_breaking_helper", line_of(calls_a_breaking_helper, "helper_that_prints(x + 1)")),
        ("helper_that_prints", line_of(helper_that_prints, "print(")),
    ]


def loops_with_a_print(x):
    for i in range(2):
        print(i)
        x = x + 1
    return x


def test_a_break_inside_a_loop_says_the_whole_function_runs_eagerly():
    report = explain.explain(loops_with_a_print, torch.zeros(2))

    assert report.break_count == 1
    brk = report.breaks[0]
    assert brk.gb_type == "graph break in loop"
    assert brk.cause == "Failed to trace builtin operator"
    assert brk.frame_skipped
    assert "gave up on the whole function" in brk.reason
    assert report.graph_count == 0


def sin_cos_add(x):
    return torch.sin(x).cos() + 1


def test_ops_are_counted_fully_including_method_calls():
    report = explain.explain(sin_cos_add, torch.randn(3))

    assert report.graph_count == 1
    summary = report.graphs[0].summary
    assert summary.ops == ("torch.sin", "Tensor.cos", "operator.add")
    assert (summary.inputs, summary.outputs) == (1, 1)
    assert report.to_dict()["graphs"][0]["op_count"] == 3


def test_an_nn_module_is_explained_with_the_ops_of_its_submodules():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())

    report = explain.explain(model, torch.randn(2, 4))

    assert report.graph_count == 1
    assert report.graphs[0].ops == ("torch._C._nn.linear", "torch.nn.functional.relu")
    assert report.graphs[0].summary.inputs == 3  # x, weight, bias


def test_module_calls_left_in_a_graph_are_counted_as_ops():
    """Dynamo 2.13 always inlines modules, but other fx graphs keep ``call_module`` nodes,
    which torch.explain's op_count skips; summarize_graph counts them by module class."""
    traced = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()))

    summary = explain.graphs.summarize_graph(traced)

    assert summary.ops == ("nn.Linear", "nn.ReLU")
    assert (summary.inputs, summary.outputs) == (1, 1)


def scale(x, n):
    return x * n


def test_guards_are_readable_and_keep_torchs_text():
    report = explain.explain(scale, torch.randn(3), 2)

    texts = {guard.text for guard in report.graphs[0].guards}
    assert "n == 2" in texts
    assert "x: Tensor float32, size=[3], stride=[1]" in texts
    raw = {guard.raw.split("#")[0].strip() for guard in report.graphs[0].guards}
    assert "L['n'] == 2" in raw


def test_compile_time_is_reported_per_graph():
    report = explain.explain(print_then_cos, torch.randn(4))

    assert all(graph.compile_seconds > 0 for graph in report.graphs)
    assert all(graph.compile_seconds >= graph.backend_seconds >= 0 for graph in report.graphs)
    assert report.compile_seconds == pytest.approx(sum(g.compile_seconds for g in report.graphs))


def cached_by_the_user(x):
    y = x.sin()
    print("cached")
    return y + 1


def another_function(x):
    return x.cos() * 2


def test_explain_leaves_a_previously_compiled_function_cache_intact():
    backend = CountingBackend()
    compiled = torch.compile(cached_by_the_user, backend=backend)
    x = torch.randn(3)
    compiled(x)
    assert len(backend.graphs) == 2
    default_entries = [str(e.compile_id) for e in _get_cache_entries_for_region(cached_by_the_user.__code__, -1)]
    unique_graphs = counters["stats"]["unique_graphs"]

    report = explain.explain(cached_by_the_user, x)
    other = explain.explain(another_function, torch.randn(2))

    assert report.graph_count == 2  # explain compiled its own graphs despite the user's cache entry
    assert other.graph_count == 1
    assert report.isolation.strategy == "isolated" and not report.isolation.reset_called
    assert counters["stats"]["unique_graphs"] == unique_graphs
    entries_after = _get_cache_entries_for_region(cached_by_the_user.__code__, -1)
    assert [str(e.compile_id) for e in entries_after] == default_entries
    compiled(x)
    assert len(backend.graphs) == 2  # the user's compiled function ran from its cache: no recompile
    assert counters["stats"]["unique_graphs"] == unique_graphs


def wiped_by_torch(x):
    return x.sin() + 1


def test_torchs_own_explain_does_wipe_that_cache():
    """The contrast that motivates explain/: the same check fails for torch._dynamo.explain."""
    backend = CountingBackend()
    compiled = torch.compile(wiped_by_torch, backend=backend)
    x = torch.randn(3)
    compiled(x)

    torch._dynamo.explain(wiped_by_torch)(x)

    compiled(x)
    assert len(backend.graphs) == 2


def sized(x):
    return x * 3


def test_the_users_automatic_dynamic_history_does_not_leak_into_the_analysis_or_back():
    compiled = torch.compile(sized, backend="eager")
    compiled(torch.randn(3))
    code_state = pgo._CODE_STATE

    report = explain.explain(sized, torch.randn(5))

    # Without isolation dynamo would have seen size 3 then 5 and compiled a dynamic graph.
    tensor_guards = [g.text for g in report.graphs[0].guards if g.kind == "TENSOR_MATCH"]
    assert tensor_guards == ["x: Tensor float32, size=[5], stride=[1]"]
    assert pgo._CODE_STATE is code_state


def test_explains_compiles_are_invisible_to_an_armed_profiler():
    with explain.RecompileProfiler() as prof:
        report = explain.explain(another_function, torch.randn(4))

    assert report.graph_count == 1
    assert prof.records == []


def test_explaining_a_compiled_function_analyses_the_original():
    compiled = torch.compile(sin_cos_add, backend="eager")

    report = explain.explain(compiled, torch.randn(3))

    assert report.target.startswith("sin_cos_add (")
    assert report.graphs[0].ops == ("torch.sin", "Tensor.cos", "operator.add")


def test_explaining_twice_gives_the_same_report():
    first = explain.explain(three_breaks, torch.ones(3))
    second = explain.explain(three_breaks, torch.ones(3))

    assert [(b.lineno, b.cause) for b in second.breaks] == [(b.lineno, b.cause) for b in first.breaks]
    assert [g.summary.hash for g in second.graphs] == [g.summary.hash for g in first.graphs]


def test_explaining_a_compiled_module_analyses_the_module():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    compiled = torch.compile(model, backend="eager")
    compiled(torch.randn(1, 2))

    report = explain.explain(compiled, torch.randn(1, 2))

    assert report.graphs[0].ops == ("torch._C._nn.linear",)


def breaks_then_raises(x):
    print("about to fail")
    raise ValueError("user bug")


def test_state_is_restored_when_the_function_raises():
    unique_graphs = counters["stats"]["unique_graphs"]
    original_compile = convert_frame._compile

    with pytest.raises(ValueError, match="user bug"):
        explain.explain(breaks_then_raises, torch.randn(2))

    assert not hooks.seats_installed()
    assert convert_frame._compile is original_compile
    assert counters["stats"]["unique_graphs"] == unique_graphs


def test_json_has_the_documented_keys():
    data = json.loads(explain.explain(three_breaks, torch.ones(3)).to_json())

    assert data["graph_count"] == len(data["graphs"]) and data["break_count"] == len(data["breaks"]) == 3
    assert all(isinstance(graph["ops"], list) for graph in data["graphs"])
    assert {"reason", "filename", "lineno", "raw_reason", "remedy", "user_stack"} <= set(data["breaks"][0])
    assert data["isolation"]["strategy"] == "isolated"


def test_rich_text_names_the_line_the_reason_and_the_isolation():
    text = str(explain.explain(print_then_cos, torch.randn(4)))

    assert f":{line_of(print_then_cos, 'print(')} in print_then_cos" in text
    assert 'print("side effect")' in text
    assert "`print()` does Python I/O" in text
    assert "torch._dynamo.reset() was not called" in text


def test_every_break_type_explain_translates_is_one_torch_registers():
    from pt2kit.seams.graph_break_messages import LOOP_BREAK, registered_break_types

    translated = {translation.gb_type for translation in explain.breaks.TRANSLATIONS} | {LOOP_BREAK}
    assert translated <= registered_break_types(), translated - registered_break_types()
