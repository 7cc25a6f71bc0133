"""RecompileProfiler on real dynamo: causes, all failing guards, limits, remedies, threads, nesting.

Line numbers come from this file's own source (:func:`marked_line`); compile ids are compared
with the ids torch itself gives the cache entries, never typed in.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
import threading

import pytest
import torch
import torch._dynamo.convert_frame as convert_frame
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

import explain
from explain import RecompileProfiler, hooks
from explain.hooks import RecompileLimit

pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


def marked_line(fn, marker: str) -> int:
    """The absolute line number of the one line of ``fn`` that ends with the comment ``# marker``."""
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, line in enumerate(lines) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"{marker!r} marks {len(hits)} lines of {fn.__name__}"
    return hits[0]


def only(items):
    assert len(items) == 1, items
    return items[0]


def shift(x, n):
    return x + n


def test_a_changing_python_int_is_named_with_both_values_and_a_remedy():
    compiled = torch.compile(shift, backend="eager")
    x = torch.randn(4)

    with RecompileProfiler() as prof:
        for n in (1, 2, 3):
            compiled(x, n)  # the triggering call

    function = prof.for_function(shift)
    # n=3 reuses the second graph: dynamo made n symbolic after it changed once
    assert [record.cause for record in function.records] == ["first compile", "recompile"]
    first, second = function.records
    failure = only(second.failures)
    assert (failure.name, failure.scope, failure.kind) == ("n", "local", "value")
    assert (failure.expected, failure.actual) == ("1", "2")
    assert only(second.failed_guards).against == first.compile_id
    this_test = test_a_changing_python_int_is_named_with_both_values_and_a_remedy
    assert second.triggered_by.lineno == marked_line(this_test, "the triggering call")
    assert any("torch.tensor(n)" in remedy for remedy in function.remedies)


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.counter = 0

    def forward(self, x):
        self.counter += 1
        return x + 1


def test_an_int_attribute_of_a_module_is_remedied_by_the_config_that_unspecializes_it():
    # pytorch#128319: an nn.Module's int attribute recompiles on every call; dynamic=True (the remedy said)
    # keeps it static, allow_unspec_int_on_nn_module does not
    compiled = torch.compile(_Counting(), backend="eager")
    with RecompileProfiler() as prof:
        for _ in range(3):
            compiled(torch.randn(2))
    function = prof.for_function(_Counting.forward)
    failure = function.records[1].failures[0]
    assert failure.name == "self.counter" and failure.kind == "value", failure
    remedy = only([r for r in function.remedies if "self.counter" in r])
    assert "allow_unspec_int_on_nn_module = True" in remedy and "dynamic=True` so" not in remedy
    torch._dynamo.reset()
    compiled = torch.compile(_Counting(), backend="eager")
    with torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True), RecompileProfiler() as fixed:
        for _ in range(4):
            compiled(torch.randn(2))
    assert len(fixed.for_function(_Counting.forward).records) <= 2  # the remedy works


def forward_pass(x):
    return torch.relu(x @ x.T)


def test_a_growing_batch_size_suggests_mark_dynamic():
    compiled = torch.compile(forward_pass, backend="eager")

    with RecompileProfiler() as prof:
        for batch in (2, 4, 8):
            compiled(torch.randn(batch, 3))

    function = prof.for_function(forward_pass)
    assert (function.compiles, function.recompiles) == (2, 1)  # batch 8 fits the dynamic graph
    failure = only(function.records[1].failures)
    assert (failure.name, failure.kind, failure.dim, failure.expected, failure.actual) == ("x", "size", 0, "2", "4")
    assert failure.text == "x: size[0] 2 → 4"
    assert any("torch._dynamo.mark_dynamic(x, 0)" in r and "dynamic=True" in r for r in function.remedies)


def activation(x):
    return x * torch.sigmoid(x)


def test_a_dtype_switch_is_named():
    compiled = torch.compile(activation, backend="eager")

    with RecompileProfiler() as prof:
        compiled(torch.randn(3))
        compiled(torch.randn(3, dtype=torch.float64))

    failure = only(prof.for_function(activation).records[1].failures)
    assert (failure.name, failure.kind, failure.expected, failure.actual) == ("x", "dtype", "float32", "float64")
    assert any("switches dtype (float32 → float64)" in r for r in prof.for_function(activation).remedies)


OFFSET = 1


def affine(x, bias, n):
    return x * n + bias + OFFSET


def test_every_failing_guard_is_listed_where_torch_names_only_the_first():
    global OFFSET
    compiled = torch.compile(affine, backend="eager")
    OFFSET = 1
    with RecompileProfiler() as prof:
        compiled(torch.randn(4), torch.randn(4), 2)
        OFFSET = 5
        compiled(torch.randn(4, dtype=torch.float64), torch.randn(1), 3)

    entry = only(prof.for_function(affine).records[1].failed_guards)
    assert {(f.name, f.kind, f.expected, f.actual) for f in entry.failures} == {
        ("n", "value", "2", "3"),
        ("x", "dtype", "float32", "float64"),
        ("bias", "size", "4", "1"),
        ("OFFSET", "value", "1", "5"),
    }
    assert {f.scope for f in entry.failures if f.name == "OFFSET"} == {"global"}
    # torch's own reason (guard_failures / TORCH_LOGS=recompiles) stops at one guard
    assert entry.torch_reason.startswith(f"{entry.against}: ")
    assert entry.torch_reason.count(" == ") + entry.torch_reason.count("mismatch") == 1


def double(x):
    return x * 2


@pytest.mark.torch_since("2.13", "torch.compile(..., recompile_limit=N)")
def test_hitting_a_recompile_limit_of_2_is_reported_with_what_runs_eagerly():
    compiled = torch.compile(double, backend="eager", recompile_limit=2)

    with RecompileProfiler() as prof:
        dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
        results = [compiled(torch.ones(2, dtype=dtype)) for dtype in dtypes]

    assert [r.dtype for r in results] == [torch.float32, torch.float64, torch.float16, torch.bfloat16]
    function = prof.for_function(double)
    # the bfloat16 call is never even tried: dynamo no longer compiles `double`
    assert [record.cause for record in function.records] == ["first compile", "recompile", "recompile refused"]
    refused = function.limit_hit
    assert refused.limit == RecompileLimit("recompile_limit", 2)
    assert refused.outcome == "refused" and refused.graph is None
    assert {f.actual for f in refused.failures} == {"float16"}
    assert len(refused.failed_guards) == 2
    assert "run eagerly" in function.lost_to_eager
    assert any("recompile_limit" in remedy for remedy in function.remedies)
    assert prof.to_dict()["refused_count"] == 1


def compiled_before(x):
    return x.cos() + 1


def test_functions_compiled_before_the_block_are_seen():
    compiled = torch.compile(compiled_before, backend="eager")
    compiled(torch.randn(2))
    earlier = only([str(entry.compile_id) for entry in _debug_get_cache_entry_list(compiled_before)])

    with RecompileProfiler() as prof:
        compiled(torch.randn(2))  # a cache hit: not a compile
        compiled(torch.randn(5))

    record = only(prof.for_function(compiled_before).records)
    assert record.cause == "recompile"
    assert only(record.failed_guards).against == earlier
    assert only(record.failures).text == "x: size[0] 2 → 5"


def old_style(x):
    return x.exp()


def test_it_also_works_as_a_backend_like_the_removed_compile_profiler():
    prof = RecompileProfiler()
    compiled = torch.compile(old_style, backend=prof)
    try:
        compiled(torch.randn(3))
        compiled(torch.randn(3, dtype=torch.float64))
    finally:
        prof.close()

    records = prof.for_function(old_style).records
    assert [record.cause for record in records] == ["first compile", "recompile"]
    assert records[0].graph.ops == ("Tensor.exp",)
    assert only(records[1].failures).kind == "dtype"
    assert not hooks.seats_installed()


def from_thread_a(x):
    return x + 1


def from_thread_b(x):
    return x - 1


def test_compiles_on_several_threads_are_all_recorded():
    compiled = {name: torch.compile(fn, backend="eager") for name, fn in (("a", from_thread_a), ("b", from_thread_b))}
    barrier = threading.Barrier(2)

    def work(name):
        barrier.wait()
        for dtype in (torch.float32, torch.float64, torch.float16):
            compiled[name](torch.ones(2, dtype=dtype))

    with RecompileProfiler() as prof:
        threads = [threading.Thread(target=work, args=(name,), name=f"worker-{name}") for name in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    for fn, thread in ((from_thread_a, "worker-a"), (from_thread_b, "worker-b")):
        records = prof.for_function(fn).records
        assert [r.cause for r in records] == ["first compile", "recompile", "recompile"]
        assert {r.thread for r in records} == {thread}
    assert len(prof.records) == 6


def outer_only(x):
    return x * 5


def inner_too(x):
    return x * 7


def test_nested_profilers_each_see_what_ran_inside_them_and_unhook_at_the_end():
    original = convert_frame._compile
    with RecompileProfiler() as outer:
        torch.compile(outer_only, backend="eager")(torch.ones(1))
        with RecompileProfiler() as inner:
            torch.compile(inner_too, backend="eager")(torch.ones(1))
        assert hooks.seats_installed()

    assert [r.function for r in outer.records] == ["outer_only", "inner_too"]
    assert [r.function for r in inner.records] == ["inner_too"]
    assert not hooks.seats_installed()
    assert convert_frame._compile is original


def pair(x, y):
    return x + y, x * y


def test_each_compile_has_graph_hash_arity_trigger_and_time():
    compiled = torch.compile(pair, backend="eager")
    with RecompileProfiler() as prof:
        compiled(torch.ones(2), torch.ones(2))  # first
        compiled(torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))

    first, second = prof.for_function(pair).records
    assert (first.graph.inputs, first.graph.outputs) == (2, 2)
    assert first.graph.hash != second.graph.hash  # same code, other dtypes
    assert first.triggered_by.lineno == marked_line(test_each_compile_has_graph_hash_arity_trigger_and_time, "first")
    assert first.triggered_by.filename == __file__
    assert first.seconds > 0 and second.seconds > 0
    assert {(f.name, f.kind) for f in second.failures} == {("x", "dtype"), ("y", "dtype")}


def weighted(x, w):
    return (x * w).sum()


def test_report_and_json_carry_the_same_facts():
    compiled = torch.compile(weighted, backend="eager")
    with RecompileProfiler() as prof:
        compiled(torch.ones(3), torch.ones(3))
        compiled(torch.ones(4), torch.ones(4))

    data = json.loads(prof.to_json())
    assert (data["compile_count"], data["recompile_count"], data["refused_count"]) == (2, 1, 0)
    function = only(data["functions"])
    assert (function["function"], function["compiles"], function["recompiles"]) == ("weighted", 2, 1)
    record = function["records"][1]
    assert record["cause"] == "recompile"
    assert record["graph_hash"] == record["graph"]["hash"]
    assert record["graph_inputs"] == record["graph"]["inputs"] == 3  # x, w and the now symbolic size
    texts = sorted(f["text"] for f in record["failed_guards"][0]["failures"])
    assert texts == ["w: size[0] 3 → 4", "x: size[0] 3 → 4"]
    text = prof.report()
    assert "weighted" in text and "recompile" in text
    assert "x: size[0] 3 → 4" in text and "w: size[0] 3 → 4" in text
    remedy = only(function["remedies"])  # x and w changed alike: one remedy names both
    assert remedy.startswith("`w` and `x` change size in dim 0 (3 → 4)") and remedy[:60] in text
    assert "torch._dynamo.mark_dynamic(w, 0); torch._dynamo.mark_dynamic(x, 0)" in remedy


def small_sizes(x):
    return x.sum(0)


def test_a_size_of_one_after_a_dynamic_compile_is_a_symbolic_guard_failure():
    compiled = torch.compile(small_sizes, backend="eager", dynamic=True)
    with RecompileProfiler() as prof:
        compiled(torch.ones(4, 2))
        compiled(torch.ones(1, 2))

    failure = only(prof.for_function(small_sizes).records[1].failures)
    assert (failure.name, failure.kind, failure.dim) == ("x", "dynamic_shape", 0)
    assert failure.expected == "2 <= x.size()[0]" and failure.actual == "x.size()[0] = 1"
    assert any("mark_unbacked(x, 0)" in r for r in prof.for_function(small_sizes).remedies)


def grad_sensitive(x):
    return x * 3


def test_a_global_state_change_is_reported_as_such():
    compiled = torch.compile(grad_sensitive, backend="eager")
    with RecompileProfiler() as prof:
        compiled(torch.ones(2))
        with torch.no_grad():
            compiled(torch.ones(2))

    failure = only(prof.for_function(grad_sensitive).records[1].failures)
    assert failure.kind == "global_state"
    assert "grad_mode" in failure.raw


def steady(x):
    return x.sin() * 2


def test_steady_state_calls_never_run_explain_code():
    compiled = torch.compile(steady, backend="eager")
    x = torch.randn(8)
    compiled(x)
    package = os.path.dirname(explain.__file__)
    entered: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            entered.append(frame.f_code.co_name)

    with RecompileProfiler() as prof:
        sys.setprofile(profile)
        try:
            for _ in range(50):
                compiled(x)
        finally:
            sys.setprofile(None)

    assert entered == []
    assert prof.records == []


def scaled_sum(x, y):
    return x * 2 + y


def scaled_by(x, n):
    return x * n


def matmul(a, b):
    return torch.mm(a, b)


def never_compiled(a, b):
    return a + b


def test_size_forecast_covers_every_tensor_argument():
    compiled = torch.compile(scaled_sum, backend="eager", dynamic=False)
    with RecompileProfiler() as prof:
        compiled(torch.randn(4), torch.randn(4))

    def check(forecast):
        assert (forecast["status"], forecast["entries"]) == ("complete", 1) and forecast["classes"] > 0
        assert forecast["inputs"] == {"x": 1, "y": 1}
        examples = [case["example"] for case in forecast["will_recompile"]]
        assert examples and all(len(example) == 2 for example in examples)  # sizes for x and for y
        assert [[4], [4]] not in examples  # the sizes already compiled need no compile

    given_one = prof.size_forecast(scaled_sum, [1], (1, 16))  # y's rank is the one its cache entry was compiled for
    check(given_one)
    inferred = prof.size_forecast(scaled_sum, None, (1, 16))
    check(inferred)
    assert given_one == inferred


def test_size_forecast_says_incomplete_where_it_cannot_vary_every_argument():
    compiled = torch.compile(scaled_by, backend="eager")
    with RecompileProfiler() as prof:
        compiled(torch.randn(4), 3)

    forecast = prof.size_forecast(scaled_by, [1], (1, 16))
    assert (forecast["status"], forecast["will_recompile"]) == ("incomplete", [])
    assert forecast["inputs"] == {"x": 1} and "`n`" in forecast["reason"] and "not a tensor" in forecast["reason"]

    all_fail = prof.size_forecast(matmul, [1, 1], (1, 4))  # torch.mm takes matrices only: every size raises
    assert all_fail["status"] == "incomplete" and all_fail["classes"] == 0 and "RuntimeError" in all_fail["reason"]

    unknown = prof.size_forecast(never_compiled, None, (1, 16))  # no cache entry says which arguments are tensors
    assert unknown["status"] == "incomplete" and "give one rank per tensor argument" in unknown["reason"]


class ItemScaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        scale = h.abs().max().item()  # graph break: item
        return h / scale


def test_values_carried_over_a_graph_break_are_named_by_the_users_code():
    model = torch.compile(ItemScaled(), backend="eager")
    with RecompileProfiler() as prof:
        for batch in (2, 3):
            model(torch.randn(batch, 4))

    line = marked_line(ItemScaled.forward, "graph break: item")
    resumed = only([f for f in prof.functions if f.resumed_at is not None])
    assert (resumed.function, resumed.resumed_at, resumed.recompiles) == ("forward", line, 1)
    failures = {failure.name: failure for failure in resumed.records[1].failures}
    # the float .item() returned (dynamo's ___stack0) and the local h, both computed inside forward
    assert set(failures) == {"h", "h.abs().max().item()"}
    assert {failure.scope for failure in failures.values()} == {"computed"}
    assert failures["h.abs().max().item()"].text.startswith(f"h.abs().max().item() (line {line}): ")
    shown = prof.report(width=400) + " ".join(resumed.remedies) + " ".join(f.text for f in failures.values())
    assert "___" not in shown and "L[" not in shown
    # nothing the caller could do to a value computed inside forward is asked of it
    assert not any("torch.tensor(" in r or "mark_dynamic(h" in r for r in resumed.remedies)
    value, size = (next(r for r in resumed.remedies if r.startswith(start)) for start in ("`h.abs()", "`h`"))
    assert f"graph break at line {line} (`scale = h.abs().max().item()" in value and "capture_scalar_outputs" in value
    assert "changes size in dim 0 (2 → 3)" in size and "dynamic=True" in size


def two_items(x):
    total = x.sum().item() + x.max().item()  # two breaks
    return x * total


def test_a_stack_value_below_the_top_is_named_by_its_line():
    compiled = torch.compile(two_items, backend="eager")
    with RecompileProfiler() as prof:
        compiled(torch.ones(3))
        compiled(torch.full((3,), 2.0))

    line = marked_line(two_items, "two breaks")
    names = {failure.name for f in prof.functions if f.resumed_at is not None for failure in f.failures}
    assert "x.max().item()" in names and f"the value computed on line {line}" in names  # x.sum().item()
    assert not any("___" in name for name in names)
    assert "___" not in prof.report(width=400)


def dtype_then_size(x):
    return x * 2


def test_a_change_failed_against_several_cached_graphs_is_told_once():
    compiled = torch.compile(dtype_then_size, backend="eager", dynamic=False)
    with RecompileProfiler() as prof:
        compiled(torch.ones(4))
        compiled(torch.ones(4, dtype=torch.float64))
        compiled(torch.ones(8))  # fails the float32 graph's size and the float64 graph's dtype and size

    function = prof.for_function(dtype_then_size)
    last = function.records[-1]
    assert [len(entry.failures) for entry in last.failed_guards] == [2, 1]  # per cached graph, as torch checks them
    remedy = next(r for r in function.remedies if "size" in r)
    assert "(4 → 8)" in remedy and "4 → 8, 4 → 8" not in remedy
    text = prof.report(width=400)
    assert text.count("x: size[0] 4 → 8") == 1
    assert "x: dtype float64 → float32  (" in text  # failed against one of the two cached graphs: it says which


def square(x):
    return x @ x


def test_a_size_remedy_says_which_dims_changed_how():
    compiled = torch.compile(square, backend="eager", dynamic=False)
    with RecompileProfiler() as prof:
        compiled(torch.ones(4, 4))
        compiled(torch.ones(8, 8))

    remedy = only(prof.for_function(square).remedies)
    assert remedy.startswith("`x` changes size in dims 0 and 1 (dim 0: 4 → 8; dim 1: 4 → 8)")
    assert "mark_dynamic(x, 0); torch._dynamo.mark_dynamic(x, 1)" in remedy


def paired(x, y):
    return x.sum() + y.sum()


def test_inputs_reaching_size_one_share_one_remedy_and_a_broken_equality_is_not_called_size_one():
    compiled = torch.compile(paired, backend="eager", dynamic=True)
    with RecompileProfiler() as prof:
        compiled(torch.ones(4), torch.ones(4))  # x and y share one size symbol
        compiled(torch.ones(6), torch.ones(3))  # no longer equal: a guard on the two sizes fails, neither is 1
        unequal = prof.for_function(paired).remedies
        compiled(torch.ones(1), torch.ones(1))

    assert not any("reached a size" in r for r in unequal)
    remedy = only([r for r in prof.for_function(paired).remedies if "reached a size" in r])
    assert remedy.startswith("`x` (dim 0: 1) and `y` (dim 0: 1) reached a size of 1")
    assert "mark_unbacked(x, 0); torch._dynamo.decorators.mark_unbacked(y, 0)" in remedy
