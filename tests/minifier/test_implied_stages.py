"""Stages a higher stage vouches for: not asked before the reduction, asked once the repro is ready."""

from __future__ import annotations

import json

import pytest
import torch

from minifier.bisect.early import EarlyStages
from minifier.bisect.implied import implied, take_answers, voucher
from minifier.bisect.report import BisectReport, Row
from minifier.stages.run import Outcome
from minifier.unit.case import GraphCase, GraphInput, TensorMeta
from pt2kit.signature import Failure, Signature

DECOMP, PASSED = "aot_eager_decomp_partition", Outcome("aot_eager_decomp_partition", None, 0.0)
BROKEN = Failure(Signature("runtime_error", "RuntimeError", "broken"))


def _case(**fields) -> GraphCase:
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.rand(3)
    return GraphCase(make_fx(torch.sin)(x), [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor", **fields)


def test_a_dynamo_graph_that_passed_the_decomposed_stage_implies_the_eager_stages_below_it():
    dynamo = _case()
    assert voucher(dynamo, "eager", {DECOMP: PASSED}) == "g0 passed aot_eager_decomp_partition"
    assert voucher(dynamo, "aot_eager", {DECOMP: PASSED}) == "g0 passed aot_eager_decomp_partition"
    # nothing vouches for the stage itself, nor for the final one, nor from a failure or another implied pass
    assert voucher(dynamo, DECOMP, {DECOMP: PASSED}) is None
    assert voucher(dynamo, "inductor", {DECOMP: PASSED}) is None
    assert voucher(dynamo, "eager", {DECOMP: Outcome(DECOMP, BROKEN, 0.0)}) is None
    assert voucher(dynamo, "eager", {DECOMP: Outcome(DECOMP, None, 0.0, implied_by="g0 passed it")}) is None
    assert voucher(dynamo, "eager", {"aot_eager": Outcome("aot_eager", None, 0.0)}) is None


def test_an_aot_graph_is_vouched_for_by_the_dynamo_graph_it_was_lowered_from():
    forward = _case(boundary="aot", kind="forward", parent=0)
    assert voucher(forward, DECOMP, {}, owner={DECOMP: PASSED}) == "g0 passed aot_eager_decomp_partition"
    assert voucher(forward, DECOMP, {}, owner={}) is None
    assert voucher(forward, "inductor", {}, owner={DECOMP: PASSED}) is None


def test_a_compile_that_failed_in_the_program_vouches_for_every_lighter_stage_of_its_graphs():
    dynamo, forward = _case(), _case(boundary="aot", kind="forward", parent=0)
    said = "the program's g0.forward reached inductor's own compiler"
    assert voucher(dynamo, "eager", {}, failed_compile="g0.forward") == said
    assert voucher(dynamo, DECOMP, {}, failed_compile="g0.forward") == said
    assert voucher(forward, DECOMP, {}, failed_compile="g0.forward") == said
    assert voucher(dynamo, "inductor", {}, failed_compile="g0.forward") is None  # (the program's own answer)


def test_the_early_stages_learn_of_a_failed_compile_from_the_programs_events(tmp_path):
    from minifier.capture.events import AotGraphSaved

    dynamo, other = _case(), _case(index=1)
    early = EarlyStages(None, None, accuracy=False, roots=[], imply=True)  # type: ignore[arg-type]
    early.cases = {"g0/repro.py": dynamo, "g1/repro.py": other}
    assert not early._vouched("g0/repro.py", dynamo, DECOMP)
    failing = Signature("compile_error", "CppCompileError", "C++ compile error")
    early._on_event(AotGraphSaved(0, "forward", str(tmp_path / "g0.forward" / "repro.py"), failure=failing))
    assert early._vouched("g0/repro.py", dynamo, DECOMP) and early._vouched("g0/repro.py", dynamo, "eager")
    assert early.outcomes["g0/repro.py"]["eager"].implied_by == "the program's g0.forward reached inductor's own compiler"
    assert not early._vouched("g1/repro.py", other, "eager")  # (another dynamo graph's compile is not g1's)


def test_the_early_stages_skip_an_implied_stage_only_when_asked_to_imply():
    dynamo, forward = _case(), _case(boundary="aot", kind="forward", parent=0)
    for imply in (True, False):
        early = EarlyStages(None, None, accuracy=False, roots=[], imply=imply)  # type: ignore[arg-type]
        early.cases = {"g0/repro.py": dynamo, "g0.forward/repro.py": forward}
        early.outcomes = {"g0/repro.py": {DECOMP: PASSED}}
        assert early._vouched("g0/repro.py", dynamo, "eager") is imply
        assert early._vouched("g0.forward/repro.py", forward, DECOMP) is imply
        assert ("eager" in early.outcomes["g0/repro.py"]) is imply
        if imply:
            assert early.outcomes["g0.forward/repro.py"][DECOMP].implied_by == "g0 passed aot_eager_decomp_partition"


def test_a_vouching_stage_still_running_as_the_program_ends_is_waited_for_only_where_it_vouches(in_process, monkeypatch):
    # BERT: g0's early aot_eager_decomp_partition ended 0.9 s after the program; asking eager and aot_eager
    # beside it cost 2.2 s on both cores before the reduction. Its pass, waited for, implies them.
    import functools

    from minifier.stages.run import run_case

    session, executor = in_process
    g0, g1 = _case(), _case(index=1)
    early = EarlyStages(session, None, accuracy=False, roots=[], imply=True)  # type: ignore[arg-type]
    early.cases = {"g0/repro.py": g0, "g1/repro.py": g1}
    early._cheap = [("g0/repro.py", g0, "aot_eager"), ("g0/repro.py", g0, "eager")]
    for path, case in early.cases.items():  # (each one's vouching stage "still running" when the program ended)
        handle = session.start(functools.partial(run_case, case, DECOMP, accuracy=False), f"{case.label()} decomp")
        early._running.append((path, DECOMP, handle, case))
    waited, wait = [], executor.wait
    monkeypatch.setattr(executor, "wait", lambda handles, *a, **k: (waited.extend(h.label for h in handles), wait(handles, *a, **k))[1])
    early._await_vouchers()
    assert waited == ["g0 decomp"]  # (nothing of g1's is queued: its query goes on beside the bisection)
    assert early.outcomes["g0/repro.py"][DECOMP].passed
    assert early._vouched("g0/repro.py", g0, "eager") and early._vouched("g0/repro.py", g0, "aot_eager")


def test_the_answers_replace_the_implied_cells_and_a_failure_after_all_is_said():
    case = _case()
    outcomes = {
        "eager": Outcome("eager", None, 0.0, implied_by="g0 passed aot_eager_decomp_partition"),
        "aot_eager": Outcome("aot_eager", None, 0.0, implied_by="g0 passed aot_eager_decomp_partition"),
        DECOMP: PASSED,
    }
    row = Row("g0", "dynamo", "dynamo", 1, None, outcomes, case)
    report = BisectReport("s.py", "inductor", False, None, None, rows=[row])  # type: ignore[arg-type]
    cells = implied(report)
    assert cells == [(row, "eager"), (row, "aot_eager")]
    notes = take_answers(cells, {(id(case), "eager"): Outcome("eager", BROKEN, 0.1)})  # (aot_eager: unanswered)
    assert row.outcomes["eager"].failure == BROKEN and row.outcomes["eager"].implied_by is None
    assert row.outcomes["aot_eager"].implied_by is not None  # (still says what vouched for it)
    assert len(notes) == 1 and "g0 fails at eager" in notes[0] and "though g0 passed" in notes[0]
    assert implied(report) == [(row, "aot_eager")]


#: Two graphs: the first compiles and runs, then the program sleeps (its early stages may pass meanwhile: at the
#: lowest CPU priority, on a loaded machine they may not), then the second fails to compile (planted: it holds a cos).
TWO_GRAPHS = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
import planted  # noqa: F401


def f(x, w):
    y = (x @ w).sin()
    time.sleep(3)  # (a graph break)
    return y.cos().sum()


if __name__ == "__main__":
    print(torch.compile(f, backend="planted_compile_error")(torch.randn(4, 8), torch.randn(8, 8)))
"""


@pytest.mark.e2e
def test_a_run_asks_the_implied_stages_once_its_repro_is_ready(session, tmp_path, monkeypatch):
    from minifier import afterwards
    from minifier.minification import minify_script
    from support.paths import USER_MODULES

    script = tmp_path / "two_graphs.py"
    script.write_text(TWO_GRAPHS.format(tests=str(USER_MODULES)))
    reports, saved, write = [], [], afterwards.write_run_report

    def writing(where, data):  # (each report as written, and what a resumed run would read of the bisection then)
        reports.append(data)
        saved.append(json.loads((where / "bisected.json").read_text()))
        return write(where, data)

    monkeypatch.setattr(afterwards, "write_run_report", writing)
    result = minify_script(session, script, [], out=tmp_path / "runs")
    assert result.after.node_count == 1 and result.bisect is not None
    # at "repro ready": g1 failed compiling in the planted backend, so the program vouched for its lighter stages
    # (and g0's were asked, or implied by its decomposed stage passing while the program slept)
    ready = reports[0]
    assert ready["pending"] == ["lower stages"], ready.get("pending")
    for label in ("g0", "g1"):
        row = next(g for g in ready["graphs"] if g["label"] == label)
        assert row["stages"]["eager"] == row["stages"]["aot_eager"] == "pass", row
    # what a resumed run would report then: the implied cells as not asked (it never asks them), not as passes;
    # once asked, as answered
    g1 = next(g for g in saved[0]["graphs"] if g["label"] == "g1")
    assert g1["stages"]["eager"] is None and g1["stages"]["aot_eager"] is None, g1
    g1 = next(g for g in saved[-1]["graphs"] if g["label"] == "g1")
    assert g1["stages"]["eager"] == g1["stages"]["aot_eager"] == "pass", g1
    # at the end: asked after the reduction, and nothing is pending
    final = json.loads((result.run_dir / "report.json").read_text())
    assert "pending" not in final and not implied(result.bisect)
    steps = [t["step"] for t in final["timeline"]]
    reduced = max(i for i, step in enumerate(steps) if " · " in step)  # (the reducer's last query)
    assert {"eager", "aot_eager"} <= {s.split(" through ")[1] for s in steps[reduced:] if s.startswith("g1 (")}, steps
    assert not [s for s in steps[:reduced] if s.startswith("g1 (") and " through eager" in s], steps


def test_lower_stages_failing_alike_once_asked_get_one_note_and_a_refused_rebuild_is_said_so():
    # (a flex_attention graph: dynamo will not trace pt2kit's rebuild of it, at any stage; three notes said it thrice)
    case = GraphCase(torch.fx.symbolic_trace(lambda x: x + 1), [])
    vouched = "the program's g0.inference reached inductor's own compiler"
    stages = ("eager", "aot_eager", "aot_eager_decomp_partition")
    row = Row("g0", "dynamo", "dynamo", 2, None, {s: Outcome(s, None, 0.0, implied_by=vouched) for s in stages}, case)
    refusal = Failure(Signature("compile_error", "ValueError", "too many values to unpack (expected 7)"), wrapped_in="InternalTorchDynamoError")
    notes = take_answers([(row, s) for s in stages], {(id(case), s): Outcome(s, refusal, 0.1) for s in stages})
    assert notes == [
        "g0 fails at eager, aot_eager and aot_eager_decomp_partition (compile_error: ValueError: too many values to unpack "
        "(expected 7): dynamo refuses pt2kit's rebuild of it, which says nothing of the program's), though the program's "
        "g0.inference reached inductor's own compiler: those stages were asked only once the repro was ready, and the "
        "stage table now says so"
    ]
    assert all(row.outcomes[s].implied_by is None and not row.outcomes[s].passed for s in stages)
