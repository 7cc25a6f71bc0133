"""Minification of a program's captured graphs on real dynamo/AOTAutograd, with planted backend bugs (tests/support/user_modules/planted.py).

What the reducer keeps for each bug is tested in-process (tests/minifier/test_reduce_inprocess.py);
here are the boundaries that need processes: the program's capture (its failing compile
trusted, not paid for again), crashes and hangs in compiled code, the repro run by plain
torch, Ctrl-C and resume.
"""

import json
import math

import pytest

from pt2kit.errors import Interrupted
from minifier.minification import minify_script
from minifier.isolation.inprocess import InProcessExecutor
from minifier.isolation.session import Session
from minifier.repro.files import load_repro
from support.running import run_repro_without_pt2kit

# Every test here runs the program end to end, with pt2kit's capture armed. The tests of a
# crash and a hang keep pt2kit's worker processes (the ``session`` fixture); the others ask
# their queries in-process (``in_process``), as what they check is decided from the answers.
pytestmark = pytest.mark.e2e


def minify(session, script, tmp_path, **options):
    return minify_script(session, script, [], out=tmp_path / "runs", **options)


def test_single_culprit_takes_logarithmic_queries_and_no_duplicate_compiles(in_process, model_script, tmp_path, monkeypatch):
    session, _ = in_process
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("PLANTED_LOG", str(log))
    result = minify(session, model_script("planted_compile_error"), tmp_path)

    assert result.after.op_names() == ["aten.cos.default"]
    n = result.before.node_count
    assert n >= 15
    # one binary search (truncation), one "the last node alone" query, one to randomize
    # the inputs and one to shrink every size to 1: log2(n) + 3, where two binary
    # searches would take 2·log2(n)
    assert result.reduction_queries <= math.log2(n) + 4, result.timeline
    # every graph the reducer asked about was compiled once: no two compiles in the
    # reduction phase saw the same graph (the bisection and the final check re-run
    # the same graph on purpose, so look at the reduction's share of the log)
    compiles = log.read_text().splitlines()
    reduction = compiles[-(result.reduction_queries + 1) : -1]  # the last compile is the final check
    assert len(reduction) == len(set(reduction)) == result.reduction_queries
    # the full graph's failing compile happened once, in the program: pt2kit did not pay for it again
    full = compiles[0].split(" | inputs ")[0]
    assert [line.split(" | inputs ")[0] for line in compiles].count(full) == 1, compiles
    assert not [step for step in (t.step for t in result.timeline) if "through planted_compile_error" in step], result.timeline

    data = json.loads((result.run_dir / "report.json").read_text())
    assert data["status"] == "minified"
    assert data["failure"] == {"kind": "compile_error", "stage": "planted_compile_error", "exception": "RuntimeError", "message": "planted: cannot compile aten.cos"}
    assert data["stages"] == {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "pass", "planted_compile_error": "fail"}
    assert data["graph"] == {"boundary": "aot", "index": 0, "kind": "inference"}
    assert (data["nodes_before"], data["nodes_after"], data["ops_after"]) == (n, 1, ["aten.cos.default"])
    assert data["verified"] is True and data["inputs"] == "random"


def test_an_aot_graph_that_fails_only_inside_torch_compile_falls_back_to_the_dynamo_graph(in_process, model_script, tmp_path):
    session, _ = in_process
    # The program failed compiling its aot graph; alone (no tracing context) that graph
    # compiles fine, so the reducer cannot confirm it, and the dynamo graph is minified.
    result = minify(session, model_script("planted_in_context"), tmp_path)
    data = json.loads((result.run_dir / "report.json").read_text())
    assert data["graph"]["boundary"] == "dynamo", data
    assert data["failure"]["message"] == "planted: cos needs the tracing context"
    assert data["verified"] is True and result.after.node_count == 1
    assert "cos" in result.after.op_names()[0]
    alone = [step for step in (t.step for t in result.timeline) if step.startswith("g0.inference") and step.endswith("through planted_in_context")]
    assert len(alone) == 1, result.timeline  # compiled alone once: by the fallback, after the reducer's doubt


def test_repro_runs_with_plain_torch_and_fails_the_same_way(in_process, model_script, tmp_path):
    session, _ = in_process
    result = minify(session, model_script("planted_compile_error"), tmp_path)
    source = result.repro.read_text()
    assert "import minifier" not in source and "from minifier" not in source
    assert "run_repro" not in source and "torch._dynamo.repro" not in source
    assert list(result.repro.parent.glob("inputs-*.pt")) == []  # random inputs reproduce it

    done = run_repro_without_pt2kit(result.repro)
    assert done.returncode != 0
    assert "RuntimeError: planted: cannot compile aten.cos" in done.stderr


def test_segfaulting_backend_is_minified(session, model_script, tmp_path):
    result = minify(session, model_script("planted_segfault"), tmp_path)
    signature = result.failure.failure.signature
    assert (signature.kind, signature.exception) == ("crash", "SIGSEGV")
    assert result.after.op_names() == ["aten.cos.default"]
    assert run_repro_without_pt2kit(result.repro).returncode == -11


def test_hanging_backend_is_minified_as_a_timeout(tmp_path, model_script):
    session = Session("hang", out=tmp_path / "runs", timeout=6, quiet=True)
    result = minify(session, model_script("planted_hang"), tmp_path)
    assert result.failure.failure.signature.kind == "timeout"
    assert result.after.op_names() == ["aten.cos.default"]


def test_interrupted_run_leaves_a_repro_and_a_rerun_resumes(in_process, model_script, tmp_path, monkeypatch):
    # A KeyboardInterrupt raised between the reducer's questions, as Ctrl-C is (the real
    # signal to the CLI: tests/minifier/test_minifier_cli.py); the answers are asked in-process
    session, _ = in_process
    script = model_script("planted_compile_error")
    real_query_all = Session.query_all
    calls = {"n": 0}

    def query_then_ctrl_c(self, queries, **kwargs):
        if any("queries" in label for _, label in queries):  # the reducer's questions
            calls["n"] += 1
            if calls["n"] == 4:
                raise KeyboardInterrupt
        return real_query_all(self, queries, **kwargs)

    monkeypatch.setattr(Session, "query_all", query_then_ctrl_c)
    with pytest.raises(Interrupted, match="run the same command again to resume"):
        minify(session, script, tmp_path)
    first_run = session.run_dir
    checkpoint = json.loads((first_run / "checkpoint.json").read_text())
    assert checkpoint["status"] == "interrupted"
    partial = load_repro(first_run / "repro.py").case
    assert partial.node_count < 30  # the best so far, usable as it is
    cached = len(checkpoint["cache"])

    monkeypatch.setattr(Session, "query_all", real_query_all)
    rerun = Session("test", out=tmp_path / "runs", quiet=True, executor=InProcessExecutor())
    result = minify(rerun, script, tmp_path)
    rerun.close()
    assert rerun.run_dir != first_run  # a new directory: nothing is overwritten
    assert result.resumed_from == str(first_run)
    assert result.after.op_names() == ["aten.cos.default"]
    # the resumed run skips capture and bisection and reuses the cached answers
    assert result.queries < 20 and cached >= 3
    # and its report still holds the program's stage table, as the interrupted run saved it
    record = result.record()
    assert record.script == str(script) and record.graphs, record
    assert record.graphs[0].stages["planted_compile_error"] == "compile_error", record.graphs
    asked = {"aot_eager_decomp_partition": "pass", "planted_compile_error": "fail"}
    assert {s: v for s, v in record.stages.items() if s in asked} == asked, record.stages
    # the lighter stages the failing compile vouched for were to be asked after the repro, which the interrupted
    # run never reached: left out (not asked), never said to pass; asked while the program ran, they passed
    assert all(record.stages.get(s, "pass") == "pass" for s in ("eager", "aot_eager")), record.stages
