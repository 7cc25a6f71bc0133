"""Reports are data: every report's JSON is its record's, and reads back as an equal record.

Real reports are made in this test's own process, the way tests/minifier/test_bisect_inprocess.py
and tests/minifier/test_reduce_inprocess.py make them (planted backends, real dynamo and
AOTAutograd, :class:`~minifier.isolation.inprocess.InProcessExecutor`). For each:
the record read back from the JSON equals ``report.record()``; its ``to_json()`` is the
report's JSON, every key in the same order; and :func:`~minifier.result.read_report`
of a report.json written by the real writer gives the same record.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

from minifier.bisect.bisection import bisect_case
from minifier.bisect.report import BisectRecord, FailureRecord, GraphRecord, GraphRef
from minifier.bisect.subsystem import Below, Subsystem, Workaround
from pt2kit.errors import CorruptRecord, NoFailure, UsageError
from minifier.pages.minify_page import write_run_report
from minifier.isolation.timeline import TimelineStep
from minifier.result import InputRecord, MinifyRecord, read_report
from pt2kit.signature import Signature

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_bisect_inprocess import saved_case
from test_reduce_inprocess import minified

#: The contract's keys, in order (docs/minify.md): a bisection's, then those written only when set.
BISECT_KEYS = [
    "status", "schema", "script", "backend", "accuracy", "failure", "stages", "graph", "original_failure", "graphs",
    "queries", "seconds", "run_dir", "note", "kernel",
]  # fmt: skip
BISECT_OPTIONAL = ["failure_rate", "distributed", "subsystem", "workaround", "notes"]
GRAPH_KEYS = ["label", "boundary", "kind", "nodes", "frame", "stages", "first_failure", "failure", "repro"]
FAILURE_KEYS = ["stage", "kind", "exception", "message", "details"]
#: report.json of a minification with a bisection before it and nothing optional set.
MINIFY_KEYS = [
    "status", "schema", "failure", "stages", "graph", "nodes_before", "nodes_after", "ops_after", "inputs_after",
    "queries", "reduction_queries", "seconds", "repro", "verified", "subsystem", "workaround", "accuracy",
    "inputs", "config", "config_missing", "run_dir", "resumed_from", "kernel", "notes", "script", "graphs",
    "timeline",
]  # fmt: skip


def round_trip(report, record_type, written: Path):
    """Assert (a) the record read from the JSON equals ``report.record()``, (b) its JSON is the report's, key for
    key and in order, (c) ``read_report`` of report.json as the run writes it gives the same record."""
    record = report.record()
    assert type(record) is record_type
    data = report.to_json()
    text = json.dumps(data)  # plain JSON: no default=str needed
    read = record_type.from_json(json.loads(text))
    assert read == record
    again = read.to_json()
    assert again == data and list(again) == list(data)
    assert json.dumps(again) == text  # nested keys in the same order too
    written.mkdir()
    write_run_report(written, data)
    assert read_report(written / "report.json") == record
    return read


def below() -> Below:
    """What going below a stage finds, as minifier.bisect.subsystem.go_below fills it in."""
    return Below(
        Subsystem("inductor", "lowerings", 1, "aten.cos.default", ("inductor", "fallback_random", True)),
        True,
        Workaround("import torch\n", "let aten.cos.default fall back to ATen", "program"),
        ["a note from below"],
    )


# --------------------------------------------------------------------------- #
# minify bisect
# --------------------------------------------------------------------------- #


def test_a_bisect_report_with_a_culprit_reads_back_as_its_record(in_process, tmp_path):
    session, _ = in_process
    report = bisect_case(session, saved_case(tmp_path, "planted_compile_error"))
    read = round_trip(report, BisectRecord, tmp_path / "written")
    assert read.status == "bisected"
    assert read.graph == GraphRef("aot", report.culprit.case.index, "inference", "g0.inference")
    assert read.failure.signature == report.failure.failure.signature
    assert read.failure == FailureRecord.of(report.failure.failure, report.failure.stage)
    assert [g.label for g in read.graphs] == [row.label for row in report.rows]
    assert all(isinstance(g, GraphRecord) for g in read.graphs)
    assert read.graphs[0].stages["planted_compile_error"] == "compile_error"
    data = report.to_json()
    assert list(data) == BISECT_KEYS  # none of BISECT_OPTIONAL set here: none written
    assert list(data["graph"]) == ["boundary", "index", "kind", "label"]
    assert list(data["failure"]) == FAILURE_KEYS
    assert all(list(g) == GRAPH_KEYS for g in data["graphs"])


def test_a_bisect_report_without_a_culprit_reads_back_as_no_failure(in_process, tmp_path):
    session, _ = in_process
    report = dataclasses.replace(bisect_case(session, saved_case(tmp_path, "planted_compile_error")), culprit=None)
    read = round_trip(report, BisectRecord, tmp_path / "written")
    assert (read.status, read.failure, read.graph, read.stages) == ("no-failure", None, None, {})
    assert len(read.graphs) == len(report.rows) > 0


def test_a_bisect_reports_optional_keys_keep_their_place(in_process, tmp_path):
    session, _ = in_process
    report = dataclasses.replace(
        bisect_case(session, saved_case(tmp_path, "planted_compile_error")),
        failure_rate=0.123456,
        nproc=2,
        rank=1,
        ranks={0: "ok", 1: "failed"},
        below=below(),
        kernel="cpp_fused_cos_0",
    )
    report.rows[0].frame = {"name": "f", "filename": tmp_path / "model.py", "lineno": 3}  # free-form, as captured
    read = round_trip(report, BisectRecord, tmp_path / "written")
    assert read.graphs[0].frame == {"name": "f", "filename": str(tmp_path / "model.py"), "lineno": 3}
    assert list(report.to_json()) == BISECT_KEYS + BISECT_OPTIONAL
    assert read.failure_rate == 0.123
    assert read.distributed == {
        "world_size": 2,
        "rank": 1,
        "process_group": "fake",
        "ranks": {"0": "ok", "1": "failed"},
    }
    assert read.below.subsystem["config"] == ["inductor", "fallback_random", True]  # JSON's list, not a tuple
    assert read.below.workaround["verified"] is True and read.notes == ("a note from below",)


# --------------------------------------------------------------------------- #
# minify run / minify repro
# --------------------------------------------------------------------------- #


def test_a_minified_compile_error_reads_back_as_its_record(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_compile_error")
    read = round_trip(result, MinifyRecord, tmp_path / "written")
    assert read_report(result.run_dir / "report.json") == read  # the report.json the run wrote itself
    data = result.to_json()
    assert list(data) == MINIFY_KEYS
    assert list(data["failure"]) == ["kind", "stage", "exception", "message"]
    assert list(data["graph"]) == ["boundary", "index", "kind"]
    assert list(data["inputs_after"][0]) == ["name", "shape", "stride", "dtype", "dynamic_dims"]
    assert all(list(g) == GRAPH_KEYS for g in data["graphs"])
    assert all(list(step) == ["step", "seconds", "ended"][: len(step)] for step in data["timeline"])
    assert read.failure.kind == "compile_error" and read.ops_after == ("aten.cos.default",)
    assert read.graph == GraphRef(result.before.boundary, result.before.index, result.before.kind)
    assert read.inputs_after == tuple(InputRecord.of(i) for i in result.after.inputs)
    assert read.script == result.bisect.script and len(read.graphs) == len(result.bisect.rows)
    assert read.timeline and all(isinstance(step, TimelineStep) for step in read.timeline)
    assert list(read.timeline) == result.timeline


def test_a_minified_wrong_answer_reads_back_as_its_record(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_accuracy", accuracy=True)
    read = round_trip(result, MinifyRecord, tmp_path / "written")
    assert (read.failure.kind, read.accuracy) == ("accuracy", True)


def test_a_minified_backward_graph_reads_back_as_its_record(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_backward_error", fn=lambda x, w: torch.tanh(x @ w), train=True)
    read = round_trip(result, MinifyRecord, tmp_path / "written")
    assert read.graph.kind == "backward" and read.ops_after == ("aten.tanh_backward.default",)


def test_a_minifications_optional_keys_come_and_go_with_what_they_say(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_compile_error")
    alone = dataclasses.replace(result, bisect=None)  # minify_case on a graph no bisection came before
    read = round_trip(alone, MinifyRecord, tmp_path / "alone")
    assert read.graphs is None and read.kernel is None
    assert list(alone.to_json()) == [k for k in MINIFY_KEYS if k not in ("script", "graphs")]
    assert (read.below.subsystem, read.below.workaround) == (None, None)  # always written, null when not searched
    everything = dataclasses.replace(
        result,
        failure_rate=0.5,
        below=below(),
        notes=["a note"],
        bisect=dataclasses.replace(result.bisect, nproc=2, rank=0, ranks={0: "failed", 1: "ok"}, kernel="k"),
        resumed_from="/elsewhere",
        timeline=[TimelineStep("warming up a worker", 1.5), *result.timeline],  # a warm-up: no end recorded
    )
    read = round_trip(everything, MinifyRecord, tmp_path / "everything")
    assert everything.to_json()["timeline"][0] == {"step": "warming up a worker", "seconds": 1.5}
    keys = MINIFY_KEYS.copy()
    keys.insert(keys.index("verified") + 1, "failure_rate")
    keys.insert(keys.index("inputs") + 1, "distributed")
    assert list(everything.to_json()) == keys
    assert read.distributed["ranks"] == {"0": "failed", "1": "ok"} and read.kernel == "k"
    assert read.below.workaround["what"] == "let aten.cos.default fall back to ATen"
    stopped = dataclasses.replace(result, pending=["below the stage", "torch releases"])  # (written before those)
    read = round_trip(stopped, MinifyRecord, tmp_path / "stopped")
    assert list(stopped.to_json())[-1] == "pending" and read.pending == ("below the stage", "torch releases")


def test_an_older_report_json_without_the_later_keys_still_reads(in_process, tmp_path):
    result = minified(in_process, tmp_path, "planted_compile_error")
    data = result.to_json()
    older = {k: v for k, v in data.items() if k not in {"kernel", "timeline", "config_missing", "resumed_from"}}
    older["inputs_after"] = [{k: v for k, v in i.items() if k != "dynamic_dims"} for i in older["inputs_after"]]
    read = MinifyRecord.from_json(older)
    assert (read.kernel, read.timeline, read.config_missing, read.resumed_from) == (None, (), (), None)
    assert read.inputs_after[0].dynamic_dims == () and read.ops_after == tuple(data["ops_after"])


@pytest.mark.parametrize(
    "part, json_keys",
    [
        (TimelineStep("warming up", 0.5), ["step", "seconds"]),
        (TimelineStep("g0 through eager", 0.25, 3.5), ["step", "seconds", "ended"]),
        (InputRecord("x", (4, 8), (8, 1), "float32", (0,)), ["name", "shape", "stride", "dtype", "dynamic_dims"]),
        (InputRecord("n", None, None, "int"), ["name", "shape", "stride", "dtype", "dynamic_dims"]),
        (GraphRef("aot", 0, "backward"), ["boundary", "index", "kind"]),
        (GraphRef("dynamo", 1, "dynamo", "g1"), ["boundary", "index", "kind", "label"]),
        (FailureRecord("inductor", "crash", "SIGSEGV", "process killed by SIGSEGV", "tail"), FAILURE_KEYS),
    ],
    ids=lambda p: type(p).__name__ if not isinstance(p, list) else "",
)
def test_the_small_records_round_trip_with_their_optional_keys(part, json_keys):
    data = json.loads(json.dumps(part.to_json()))
    assert list(data) == json_keys
    assert type(part).from_json(data) == part


# --------------------------------------------------------------------------- #
# What read_report refuses
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "error, status", [(UsageError("bad --after"), "error"), (NoFailure("g0 passes every stage"), "no-failure")]
)
def test_the_report_of_a_run_without_a_result_is_refused_in_one_line(in_process, error, status):
    from minifier.cli import _write_error_report

    session, _ = in_process
    _write_error_report(session, error)  # what the minify command leaves when it ends in an error
    path = session.run_dir / "report.json"
    assert json.loads(path.read_text())["status"] == status
    with pytest.raises(CorruptRecord, match=f"status '{status}'") as raised:
        read_report(path)
    assert str(error) in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"status": "minified"}'])
def test_a_file_that_is_not_a_report_is_refused(tmp_path, text):
    path = tmp_path / "report.json"
    path.write_text(text)
    with pytest.raises(CorruptRecord, match="report.json") as raised:
        read_report(path)
    assert "\n" not in str(raised.value)


# --------------------------------------------------------------------------- #
# The records that round-tripped already
# --------------------------------------------------------------------------- #


def _older_records():
    from minifier.reduce.engine import Candidate
    from replay.runner import ReplayResult

    return [
        Signature("compile_error", "RuntimeError", "planted: cannot compile aten.cos"),
        Candidate(
            kept=("cos", "sin"),
            outputs=("cos",),
            random=frozenset({"x"}),
            config=frozenset({("torch._inductor.config", "fallback_random")}),
            backward=False,
            merged=frozenset({("y", "x")}),
            static=True,
            shapes=(("x", (2, 3)),),
        ),
        ReplayResult(
            status="reproduced",
            failure={"kind": "compile_error", "exception": "RuntimeError", "message": "boom"},
            recorded={"kind": "compile_error", "exception": "RuntimeError", "message": "boom"},
            outputs=[{"name": "out", "shape": [2, 3]}],
            backend="inductor",
            fullgraph=True,
            static=True,
            seconds=1.25,
            record="failure.pt2rec",
        ),
    ]


@pytest.mark.parametrize("record", _older_records(), ids=lambda r: type(r).__name__)
def test_the_older_records_round_trip_through_json(record):
    data = json.loads(json.dumps(record.to_json()))
    read = type(record).from_json(data)
    assert read == record
    assert read.to_json() == record.to_json()


def test_minify_show_says_in_one_line_when_there_is_no_report_to_show(tmp_path):
    from click.testing import CliRunner

    from minifier.cli import main

    missing = CliRunner().invoke(main, ["show", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "report not found" in missing.stderr and "Traceback" not in missing.output
    (tmp_path / "report.json").write_text('{"status": "minified", "failure": ')
    corrupt = CliRunner().invoke(main, ["show", str(tmp_path)])
    assert corrupt.exit_code == 6 and "not JSON" in corrupt.stderr and len(corrupt.stderr.strip().splitlines()) == 1
    (tmp_path / "report.json").write_text('{"status": "no-failure", "message": "ran to the end without failing"}')
    ended = CliRunner().invoke(main, ["show", "--json", str(tmp_path)])
    assert ended.exit_code == 6 and json.loads(ended.stdout)["exit_code"] == 6


def test_a_checkpoints_state_reads_back_equal_and_keeps_its_keys():
    """The checkpoint's state is a typed record with the keys a checkpoint always had: a run interrupted
    before this change resumes after it, and a status nobody wrote is refused, not guessed."""
    from minifier.reduce.checkpoint import CheckpointState, Status
    from minifier.unit.check import Check

    check = Check("inductor", Signature("accuracy", "AssertionError", "outputs differ"), "strict")
    state = CheckpointState("key", "/runs/run-1/work/origin/repro.py", check).marked(Status.INTERRUPTED)
    data = json.loads(json.dumps(state.to_json()))
    assert list(data) == ["fingerprint", "origin", "stage", "target", "accuracy", "status"]
    assert data["status"] == "interrupted" and data["accuracy"] == "strict"
    assert CheckpointState.from_json(data) == state
    with pytest.raises(ValueError):
        CheckpointState.from_json({**data, "status": "half-done"})
    assert check.judging() == check and check.strict
    crash = Check("inductor", Signature("crash", "SIGSEGV", "signal 11"), True)
    assert crash.judging().accuracy is False and crash.asked(3).tries == 3 and crash.tries == 1


def test_a_report_of_a_newer_schema_is_refused_in_one_line_and_one_without_the_key_is_read(in_process, tmp_path):
    """``"schema"`` says report.json's layout: an older pt2kit refuses a newer report rather than misread it,
    and a report written before the key existed reads as schema 1."""
    from minifier.bisect.report import REPORT_SCHEMA

    report = minified(in_process, tmp_path, "planted_compile_error").record()
    data = report.to_json()
    assert data["schema"] == REPORT_SCHEMA == 1
    (tmp_path / "older.json").write_text(json.dumps({k: v for k, v in data.items() if k != "schema"}))
    assert read_report(tmp_path / "older.json") == report
    (tmp_path / "newer.json").write_text(json.dumps({**data, "schema": REPORT_SCHEMA + 1}))
    with pytest.raises(CorruptRecord, match="newer pt2kit"):
        read_report(tmp_path / "newer.json")


def test_the_stage_table_is_the_aot_culprits_own_where_its_dynamo_graph_fails_otherwise_alone(tmp_path):
    # (a flex_attention graph: dynamo will not trace the dynamo graph again, so it "fails" at eager with pt2kit's
    # rebuild; the aot graph fails at inductor as the program did. One column, inductor, said nothing of what passes)
    from minifier.bisect.report import BisectReport, Row
    from minifier.result import Bisected
    from minifier.stages.run import Outcome
    from minifier.unit.case import GraphCase
    from pt2kit.signature import Failure

    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    rebuild = Failure(Signature("compile_error", "ValueError", "too many values to unpack"))
    program = Failure(Signature("compile_error", "LoweringException", "All the buffers in the score and mask subgraph"))
    dynamo = Row("g0", "dynamo", "dynamo", 3, None, {s: Outcome(s, rebuild, 0.0) for s in ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")}, GraphCase(gm, []))
    aot_case = GraphCase(gm, [], boundary="aot", kind="inference", parent=0)
    aot = Row("g0.inference", "aot", "inference", 3, None, {"aot_eager_decomp_partition": Outcome("aot_eager_decomp_partition", None, 0.0), "inductor": Outcome("inductor", program, 0.0)}, aot_case)
    report = BisectReport("program.py", "inductor", False, tmp_path, program, rows=[dynamo, aot], culprit=aot)
    statuses = Bisected.of(report, aot_case, program.signature).statuses
    assert statuses == {"aot_eager_decomp_partition": "pass", "inductor": "fail"}, statuses


def test_a_graph_that_raises_as_plain_eager_does_is_not_said_to_fail_in_a_way_the_program_never_met():
    # (pytorch#197095: eager's interpolate raises on a zero-width input and the program expects it; compiled returns)
    from minifier.bisect.report import Row, program_failure
    from minifier.stages.run import RAISES_IN_EAGER, Outcome
    from pt2kit.signature import Failure

    eager = Failure(Signature("runtime_error", "RuntimeError", f"{RAISES_IN_EAGER}: Input and output sizes should be greater than 0"))
    wrong = Failure(Signature("accuracy", "AccuracyError", "compiled output diverges from the fp64 reference (eager raises RuntimeError: Input and output sizes)"))
    row = Row("g0", "dynamo", "dynamo", 1, None, {"eager": Outcome("eager", eager, 0.0), "inductor": Outcome("inductor", wrong, 0.0)})
    note = program_failure(row, wrong, True)
    assert note == "g0 raises at eager as plain eager does; it is minified at inductor, where it fails the program's way"
    assert row.program_stage == "inductor"
