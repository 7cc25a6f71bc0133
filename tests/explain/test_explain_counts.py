"""Each compile is counted once, in every view: the graphs, the compile records, the rich text and the page.

The programs run in this process with explain listening as ``python -m explain`` listens (a
:class:`Collector` and a :class:`RecompileProfiler`, :func:`observed`), on real dynamo with
real backends. The cases are those where one compile meets the graph seat more than once or
where two compiles share a compile id: a backend that makes dynamo restart the analysis, a
backend that fails, and ``torch._dynamo.reset()`` between two programs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from html.parser import HTMLParser

import pytest
import torch
from torch._subclasses.fake_tensor import UnsupportedOperatorException

from explain import RecompileProfiler, hooks
from explain.isolation import OBSERVED
from explain.page import compile_tree, render_explain_page
from explain.session import Collector, ExplainReport


def observed(program: Callable[[], object]) -> ExplainReport:
    """What ``python -m explain`` reports for a script that runs ``program``."""
    collector, profiler = Collector(), RecompileProfiler()
    with hooks.listening(collector), profiler:
        program()
    report = ExplainReport.from_frames("program", collector.frames, OBSERVED)
    report.recompiles = profiler
    return report


class Ids(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [value for name, value in attrs if name == "id" and value]


def compile_entries(page: str) -> list[str]:
    return [i for i in Ids(page).ids if i.startswith("compile-")]


def assert_counted_once(report: ExplainReport, compiles: int) -> dict:
    data = json.loads(report.to_json())
    records = [r for f in data["recompiles"]["functions"] for r in f["records"]]
    assert data["recompiles"]["compile_count"] == compiles
    assert data["graph_count"] == len(data["graphs"]) == compiles
    # each compile's record names the graph its cache entry runs
    installed = {(g["function"], g["compile_id"]): g["hash"] for g in data["graphs"]}
    for function in data["recompiles"]["functions"]:
        for record in function["records"]:
            if record["outcome"] == "compiled":
                assert record["graph_hash"] == installed[(function["function"], record["compile_id"])]
    text = str(report)
    assert f"{compiles} graph{'s' * (compiles != 1)}," in text
    assert f"Graphs ({compiles})" in text
    page = render_explain_page(data, "t")
    entries = compile_entries(page)
    assert len(entries) == len(set(entries)) == len(records)
    assert page.count("guards of graph") == compiles
    return data


class CountingAotEager:
    """aot_eager, counting the graphs it is handed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.calls += 1
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)


def scale_by(x, s):
    return x * math.floor(s) + torch.full((1,), s)


def test_a_compile_whose_analysis_restarts_counts_the_graph_it_installed_once():
    backend = CountingAotEager()
    compiled = torch.compile(scale_by, backend=backend)

    report = observed(lambda: [compiled(torch.randn(4), s) for s in (1.5, 2.5, 3.5)])

    # the float that changes becomes symbolic in the second compile; AOTAutograd cannot keep it
    # so (math.floor), and dynamo traces the frame again with it specialized: 4 graphs, 3 compiles
    assert backend.calls == 4
    data = assert_counted_once(report, compiles=3)
    assert [r["cause"] for r in data["recompiles"]["functions"][0]["records"]] == [
        "first compile",
        "recompile",
        "recompile",
    ]


def backend_rejecting_sin(gm, example_inputs):
    if any(node.target is torch.sin for node in gm.graph.nodes):
        raise UnsupportedOperatorException(torch.ops.aten.sin.default)
    return gm.forward


def failing_backend(gm, example_inputs):
    raise RuntimeError("this backend always fails")


def sin_plus_one(x):
    return torch.sin(x + 1) * 2


def sin_times_two(x):
    return torch.sin(x) * 2


@pytest.mark.parametrize(
    ("fn", "backend", "outcome"),
    [(sin_plus_one, backend_rejecting_sin, "skipped"), (sin_times_two, failing_backend, "failed")],
    ids=["backend-fallback", "backend-error-suppressed"],
)
def test_a_compile_whose_backend_raised_lists_no_graph(fn, backend, outcome):
    compiled = torch.compile(fn, backend=backend)  # a frame that fails is not compiled again: one per case

    with torch._dynamo.config.patch(suppress_errors=True):
        report = observed(lambda: compiled(torch.randn(4)))

    record = report.recompiles.for_function(fn).records[0]
    assert (record.outcome, record.graph) == (outcome, None)
    assert_counted_once(report, compiles=0)


def add_one(x):
    return x + 1


def times_two(x):
    return x * 2


def two_programs_with_a_reset_between():
    for fn in (add_one, times_two):
        torch._dynamo.reset()  # dynamo's compile ids start again at [0/0]
        compiled = torch.compile(fn, backend="eager", dynamic=False)
        compiled(torch.randn(4))
        compiled(torch.randn(5))


def test_compiles_that_torch_gave_the_same_id_are_still_separate_compiles():
    report = observed(two_programs_with_a_reset_between)

    data = assert_counted_once(report, compiles=4)
    assert [g["compile_id"] for g in data["graphs"]] == ["0/0", "0/1", "0/0", "0/1"]
    tree = compile_tree(data)
    assert [(f.function, [c.compile_id for c in f.compiles]) for f in tree.frames] == [
        ("add_one", ["0/0", "0/1"]),
        ("times_two", ["0/0", "0/1"]),
    ]
    # each recompile links the graph it was checked against in its own frame
    for frame in tree.frames:
        first, second = frame.compiles
        assert tree.against("0/0", second) is first
        assert first.graph["ops"] != [] and second.record["graph_hash"] == second.graph["hash"]
    page = render_explain_page(data, "t")
    frame_ids = [i for i in Ids(page).ids if i.startswith("frame-")]
    assert len(frame_ids) == len(set(frame_ids)) == 2
    assert re.findall(r'href="#(compile-[^"]+)"', page) and set(re.findall(r'href="#(compile-[^"]+)"', page)) <= set(
        compile_entries(page)
    )


def test_a_function_compiled_again_after_a_reset_keeps_both_compiles():
    def same_function_twice():
        for _ in range(2):
            torch._dynamo.reset()
            torch.compile(add_one, backend="eager")(torch.randn(3))

    report = observed(same_function_twice)

    data = assert_counted_once(report, compiles=2)
    tree = compile_tree(data)
    assert [[c.compile_id for c in f.compiles] for f in tree.frames] == [["0/0", "0/0"]]
    assert [c.cause for c in tree.compiles] == ["first compile", "first compile"]
