"""explain/'s reports read back from their JSON: ``from_json(r.to_json())`` writes ``r.to_json()`` again.

Real reports are made in this test's own process the way tests/explain/test_explain_api.py and
tests/explain/test_explain_recompiles.py make them (their functions are reused): graph breaks with remedies,
several graphs, a break in a callee and in a loop, recompiles with every failed guard, a refused
recompile. The JSON holds every field of every record (the counts and totals it also writes follow
from them again), so an :class:`~explain.ExplainReport` read back equals the report written, and a
:class:`~explain.recompiles.RecompileReport` read from a profiler's JSON equals the profiler's
snapshot. Only the rendering and the round-trip properties are asserted, never torch's wording.
"""

from __future__ import annotations

import itertools
import json
import sys
import types
from pathlib import Path

import pytest
import torch

import explain
from explain import ExplainReport, RecompileProfiler
from explain.recompiles import RecompileReport

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_explain_recompiles
from test_explain_api import calls_a_breaking_helper, loops_with_a_print, sin_cos_add, three_breaks
from test_explain_recompiles import affine, double, forward_pass

from support.records import round_trip as _round_trip


def round_trip(report, report_type):
    """tests/records.py's round trip; an explain report also renders as the one written."""
    return _round_trip(report, report_type, renders_the_same=True)


# --------------------------------------------------------------------------- #
# explain.explain
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("fn", [three_breaks, calls_a_breaking_helper, loops_with_a_print, sin_cos_add])
def test_explain_report_round_trips_to_an_equal_report(fn):
    torch.manual_seed(0)
    report = explain.explain(fn, torch.randn(4))
    assert (report.graphs or report.breaks) and all(graph.guards for graph in report.graphs)
    read = round_trip(report, ExplainReport)
    assert read == report  # every field of every graph, guard, break and frame is in the JSON
    assert (read.graph_count, read.break_count, read.compile_seconds) == (
        report.graph_count, report.break_count, report.compile_seconds
    )  # fmt: skip
    assert [graph.summary for graph in read.graphs] == [graph.summary for graph in report.graphs]
    assert [brk.location for brk in read.breaks] == [brk.location for brk in report.breaks]
    assert all(isinstance(graph.guards, tuple) and isinstance(graph.ops, tuple) for graph in read.graphs)


def test_explain_report_of_several_graphs_and_breaks_with_remedies_keeps_them_all():
    torch.manual_seed(0)
    report = explain.explain(three_breaks, torch.randn(4))
    assert report.graph_count > 2 and report.break_count > 1 and any(brk.remedy for brk in report.breaks)
    read = ExplainReport.from_json(report.to_json())
    assert [brk.remedy for brk in read.breaks] == [brk.remedy for brk in report.breaks]
    assert [brk.user_stack for brk in read.breaks] == [brk.user_stack for brk in report.breaks]
    assert [graph.guards for graph in read.graphs] == [graph.guards for graph in report.graphs]
    assert read.isolation == report.isolation and read.recompiles is None and read.error is None
    assert "recompiles" not in json.loads(read.to_json()) and "error" not in json.loads(read.to_json())


def test_a_break_in_a_callee_keeps_its_whole_user_stack_and_every_compile_id():
    report = explain.explain(calls_a_breaking_helper, torch.randn(4))
    assert any(len(brk.user_stack) > 1 for brk in report.breaks)
    read = round_trip(report, ExplainReport)
    assert [brk.compile_ids for brk in read.breaks] == [brk.compile_ids for brk in report.breaks]
    assert [brk.key for brk in read.breaks] == [brk.key for brk in report.breaks]


# --------------------------------------------------------------------------- #
# RecompileProfiler
# --------------------------------------------------------------------------- #


_copies = itertools.count()


def fresh(fn):
    """``fn`` as a new code object of its own name, so no cache entry or automatic-dynamic memory of an earlier
    test (or an earlier call here) of ``fn`` turns its first compiles into cache hits or dynamic graphs."""
    name = f"{fn.__name__}_copy{next(_copies)}"
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)


def profile_recompiles() -> RecompileProfiler:
    """A profiler that saw several guard failures in one recompile, a refused recompile and a size change."""
    test_explain_recompiles.OFFSET = 1
    shifted = torch.compile(fresh(affine), backend="eager")
    doubled = torch.compile(fresh(double), backend="eager", recompile_limit=2)
    forward = torch.compile(fresh(forward_pass), backend="eager")
    with RecompileProfiler() as prof:
        shifted(torch.randn(4), torch.randn(4), 2)
        test_explain_recompiles.OFFSET = 5
        shifted(torch.randn(4, dtype=torch.float64), torch.randn(1), 3)
        for dtype in (torch.float32, torch.float64, torch.float16):
            doubled(torch.ones(2, dtype=dtype))
        for batch in (2, 4):
            forward(torch.randn(batch, 3))
    test_explain_recompiles.OFFSET = 1
    functions = prof.snapshot().functions
    assert [(f.compiles, f.recompiles, f.limit_hit is not None) for f in functions] == [
        (2, 1, False), (2, 1, True), (2, 1, False)
    ]  # fmt: skip
    return prof


def test_recompile_profilers_json_reads_back_as_its_snapshot():
    prof = profile_recompiles()
    snapshot = prof.snapshot()
    records = [record for function in snapshot.functions for record in function.records]
    assert any(len(record.failures) > 1 and record.failed_guards[0].torch_reason for record in records)
    assert any(record.limit is not None and record.graph is None for record in records)
    read = round_trip(snapshot, RecompileReport)
    assert read == snapshot  # every field of every record, failure and limit is in the JSON
    assert read.to_json() == prof.to_json() and str(read) == prof.report()
    assert RecompileReport.from_json(prof.to_json()) == snapshot
    for mine, theirs in zip(read.functions, snapshot.functions):
        assert (mine.compiles, mine.recompiles, mine.remedies) == (theirs.compiles, theirs.recompiles, theirs.remedies)
        assert mine.limit_hit == theirs.limit_hit and mine.lost_to_eager == theirs.lost_to_eager
        assert [record.function for record in mine.records] == [theirs.function] * len(theirs.records)


def test_a_record_made_without_timing_reads_back_with_none_seconds():
    def old_style(x):
        return x.sin() + 1

    prof = RecompileProfiler()
    compiled = torch.compile(fresh(old_style), backend=prof)
    compiled(torch.randn(2))
    compiled(torch.randn(2, dtype=torch.float64))
    prof.close()
    snapshot = prof.snapshot()
    assert any(record.seconds is None for function in snapshot.functions for record in function.records)
    assert round_trip(snapshot, RecompileReport) == snapshot


# --------------------------------------------------------------------------- #
# python -m explain: an explain report carrying recompiles and an error
# --------------------------------------------------------------------------- #


def test_explain_report_with_recompiles_and_an_error_round_trips():
    torch.manual_seed(0)
    report = explain.explain(three_breaks, torch.randn(4))
    prof = profile_recompiles()
    report.recompiles, report.error = prof, "RuntimeError: the script failed"
    read = round_trip(report, ExplainReport)
    assert read.recompiles == prof.snapshot() and read.error == report.error
    assert (read.graphs, read.breaks, read.isolation) == (report.graphs, report.breaks, report.isolation)
