"""replay/: failing frames recorded with real dynamo, replayed in isolation, bit for bit.

Frames come from ``replay_programs.py`` and fail under small purpose-built backends
(``planted.py``), so recording runs in this process (fast) and each replay runs in a
child forked from it (:func:`replay_forked`: ``replay.runner.replay_here``, what the
``python -m replay run`` child does). The tests that start fresh torch processes (the
command line and its ``python -P -m replay`` child, the autoload ``.pth`` line) are ``e2e``;
real Inductor, the replay script and ``replay minify`` are ``slow``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import replay_programs as P
import torch
import torch.nn.functional as F
from support.paths import REPO, USER_MODULES

import replay
from pt2kit.errors import CorruptRecord, UnknownBackend, UserFacingError
from replay import rebuild, runner
from replay.records import PartialRecord, _file_sha256


def record_failing(out: Path, call) -> list[replay.Record]:
    """Run ``call`` with recording armed from a clean dynamo; swallow what it raises."""
    torch._dynamo.reset()
    with replay.recording(out=out, quiet=True) as recorder, contextlib.suppress(Exception):
        call()
    return recorder.records


def replay_forked(path: Path, **options) -> dict:
    """``replay_here`` in a child forked from this (warm) process; its JSON result.

    Where this process cannot fork safely (a CUDA build ran autograd: its device
    threads are up), in a fresh process instead, as ``python -m replay run`` does.
    """
    from minifier.isolation.warmup import autograd_is_fork_safe

    if not autograd_is_fork_safe():
        try:
            return runner.run(path, **options).to_json()
        except UserFacingError as e:
            return {"status": "error", "exit_code": e.exit_code, "message": str(e)}
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        try:
            data = runner.replay_here(path, **options).to_json()
        except UserFacingError as e:
            data = {"status": "error", "exit_code": e.exit_code, "message": str(e)}
        except BaseException:  # noqa: BLE001
            data = {"status": "crash", "message": traceback.format_exc()}
        with os.fdopen(write_fd, "w") as f:
            f.write(json.dumps(data, default=str))
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def sha(value) -> str:
    return rebuild.digest(value)["sha256"]


def node(record: replay.Record, value_node):
    """Follow a reference in a record's value tree."""
    if isinstance(value_node, dict) and value_node.get("t") == "ref":
        return record.manifest["objects"][value_node["id"]]
    return value_node


# -- the done criteria -------------------------------------------------------------------


def test_the_api_names_stay_the_api_after_its_modules_load():
    """``replay.record`` is the function on every access: no submodule of the package shadows a public name
    once the recorder has been imported (it was the module ``record.py`` from the second access on)."""
    import importlib

    for module in ("recorder", "records", "runner"):
        importlib.import_module(f"replay.{module}")
    for _ in range(2):
        assert [callable(replay.record), replay.load.__module__, replay.run.__module__] == [True, "replay.records", "replay.runner"]
        assert replay.record.__name__ == "record_call"
    assert set(replay.__all__).isdisjoint(p.stem for p in Path(replay.__file__).parent.glob("*.py"))


def test_backend_error_is_recorded_once_and_replays_under_its_backend_and_eager(tmp_path):
    frame = P.make_frame(torch.ones(4))
    torch.manual_seed(0)
    x = torch.randn(4)
    expected = frame(x, 2, 0.5, P.TABLE)
    compiled = torch.compile(frame, backend="planted_compile_error")

    def twice():
        for _ in range(2):
            with contextlib.suppress(Exception):
                compiled(x, 2, 0.5, P.TABLE)

    records = record_failing(tmp_path, twice)
    assert len(records) == 1, "the same failure of the same frame is recorded once"
    record = replay.load(records[0].path)
    assert record.status == "complete" and record.function == "frame"
    assert record.failure["kind"] == "compile_error" and "planted: cannot compile aten.cos" in record.failure["message"]
    args = record.manifest["frame"]["args"]
    assert node(record, args["x"])["t"] == "tensor" and args["n"] == 2 and args["alpha"] == 0.5
    assert node(record, args["nested"])["t"] == "dict"
    assert node(record, record.manifest["frame"]["closure"]["bias"])["t"] == "tensor"
    recorded_globals = record.manifest["namespaces"][record.manifest["frame"]["namespace"]]["globals"]
    assert recorded_globals["F"] == {"t": "pymodule", "name": "torch.nn.functional"}, (
        "a module alias is recorded by name"
    )
    assert recorded_globals["SCALE"] == 3.0 and node(record, recorded_globals["helper"])["source"] is not None
    assert "TABLE" in recorded_globals

    own = replay_forked(record.path)
    assert own["status"] == "reproduced", own
    eager = replay_forked(record.path, backend="eager")
    assert eager["status"] == "passed", eager
    assert eager["outputs"][0]["sha256"] == sha(expected), "eager replay gives the program's own eager bits"


def test_module_forward_replays_without_init_with_exact_parameters_and_buffers(tmp_path):
    torch.manual_seed(1)
    block = P.make_block()
    x = torch.randn(2, 4)
    expected = block(x)
    records = record_failing(tmp_path, lambda: torch.compile(block, backend="planted_runtime_error")(x))
    assert len(records) == 1
    record = replay.load(records[0].path)
    assert record.function == "forward" and record.failure["kind"] == "runtime_error"
    module = node(record, record.manifest["frame"]["args"]["self"])
    assert module["t"] == "module"
    state = module["state"]
    parameters = node(record, node(record, state["_modules"])["items"][0][1])["state"]["_parameters"]
    assert [k for k, _ in node(record, parameters)["items"]] == ["weight", "bias"]
    assert [k for k, _ in node(record, state["_buffers"])["items"]] == ["scale", "offset"]
    # Block.__init__ raises outside make_block(): a replay that ran it would not reproduce
    assert replay_forked(record.path)["status"] == "reproduced"
    eager = replay_forked(record.path, backend="eager")
    assert eager["status"] == "passed", eager
    assert eager["outputs"][0]["sha256"] == sha(expected)


def test_fullgraph_graph_break_reproduces_and_passes_without_fullgraph(tmp_path):
    x = torch.randn(3)
    records = record_failing(tmp_path, lambda: torch.compile(P.breaks_graph, backend="eager", fullgraph=True)(x))
    assert len(records) == 1
    record = replay.load(records[0].path)
    assert record.failure["exception"] == "Unsupported" and record.manifest["compile"]["fullgraph"] is True
    assert replay_forked(record.path)["status"] == "reproduced"
    passed = replay_forked(record.path, fullgraph=False)
    assert passed["status"] == "passed", passed
    assert passed["outputs"][0]["sha256"] == sha(P.breaks_graph(x))


def test_a_graph_break_that_only_skips_the_frame_is_not_a_failure(tmp_path):
    records = record_failing(tmp_path, lambda: torch.compile(P.breaks_graph, backend="eager")(torch.randn(3)))
    assert records == []


def test_failure_only_on_the_dynamic_recompile_reproduces_in_one_call_and_passes_static(tmp_path):
    compiled = torch.compile(P.grows, backend="fails_when_dynamic")
    big = torch.randn(6, 3)

    def calls():
        compiled(torch.randn(4, 3))
        compiled(big)

    records = record_failing(tmp_path, calls)
    assert len(records) == 1
    record = replay.load(records[0].path)
    assert record.manifest["frame"]["compile_id"] == "0/1", "the recompile failed, not the first compile"
    assert record.manifest["dynamic"]["automatic"], "what automatic dynamic had seen is recorded"
    reproduced = replay_forked(record.path)
    assert reproduced["status"] == "reproduced", reproduced
    static = replay_forked(record.path, static=True)
    assert static["status"] == "passed", static
    assert static["outputs"][0] == {"shape": [6, 3], "dtype": "float32", "sha256": sha(P.grows(big))}


@pytest.mark.e2e
def test_the_replay_script_of_a_recompiled_frame_restores_what_automatic_dynamic_had_seen(tmp_path):
    # (hunt 13) the script copied the seam's restore() without its helper code_id(): a NameError before any
    # compile, for every frame a recompile failed in, and `replay minify` on it ended in exit 3
    from replay.script import write_script

    compiled = torch.compile(P.grows, backend="fails_when_dynamic")
    records = record_failing(tmp_path / "records", lambda: (compiled(torch.randn(4, 3)), compiled(torch.randn(6, 3))))
    assert replay.load(records[0].path).manifest["dynamic"]["automatic"]
    script = write_script(records[0].path, tmp_path / "replay_frame.py")
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    done = subprocess.run([sys.executable, "-P", str(script)], check=False, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode != 0 and "NameError" not in done.stderr, done.stderr[-2000:]
    assert "fails_when_dynamic" in done.stderr, done.stderr[-2000:]
    # sent on with its tensors.pt and without the record (trial 13: it read only the record's absolute path)
    assert "Run: python replay_frame.py" in script.read_text()
    shutil.copy(records[0].path / "tensors.pt", tmp_path / "tensors.pt")
    (tmp_path / "records").rename(tmp_path / "gone")
    alone = subprocess.run([sys.executable, "-P", str(script)], check=False, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert alone.returncode != 0 and "fails_when_dynamic" in alone.stderr and "FileNotFoundError" not in alone.stderr, alone.stderr[-2000:]


def test_mark_dynamic_marks_are_recorded_with_the_tensor_and_static_drops_them(tmp_path):
    x = torch.randn(5, 3)
    torch._dynamo.mark_dynamic(x, 0)
    records = record_failing(tmp_path, lambda: torch.compile(P.grows, backend="fails_when_dynamic")(x))
    assert len(records) == 1
    record = replay.load(records[0].path)
    assert "_dynamo_dynamic_indices" in node(record, record.manifest["frame"]["args"]["x"])["attrs"]
    assert replay_forked(record.path)["status"] == "reproduced"
    assert replay_forked(record.path, static=True)["status"] == "passed"


def test_rng_and_aliasing_replay_bit_for_bit_twice(tmp_path):
    def inputs():
        torch.manual_seed(5)
        x = torch.randn(6)
        return x, x[2:]

    expected = [sha(o) for o in P.random_and_aliased(*inputs())]
    compiled = torch.compile(P.random_and_aliased, backend="planted_compile_error")
    records = record_failing(tmp_path, lambda: compiled(*inputs()))
    assert len(records) == 1
    record = replay.load(records[0].path)
    view = node(record, record.manifest["frame"]["args"]["view"])
    assert "view" in view and view["view"]["base"] == record.manifest["frame"]["args"]["x"], "the view keeps its base"
    first = replay_forked(record.path, backend="eager")
    second = replay_forked(record.path, backend="eager")
    assert first["status"] == second["status"] == "passed", (first, second)
    assert [o["sha256"] for o in first["outputs"]] == [o["sha256"] for o in second["outputs"]] == expected


def test_generator_and_lock_are_named_unrecordable_and_the_record_is_partial(tmp_path):
    compiled = torch.compile(P.uses_unrecordable, backend="planted_compile_error")
    records = record_failing(tmp_path, lambda: compiled(torch.randn(3), P.counter()))
    assert len(records) == 1
    record = replay.load(records[0].path)
    assert record.status == "partial"
    named = {(u["name"], u["type"]) for u in record.unrecordable}
    assert ("gen", "generator") in named and ("global LOCK", "lock") in named
    with pytest.raises(PartialRecord) as refused:
        replay.run(record.path)
    assert refused.value.exit_code == 8
    allowed = replay_forked(record.path, allow_partial=True, backend="eager")
    assert allowed["status"] == "passed", allowed


def test_pickle_bomb_and_truncated_tensors_are_refused_with_nothing_executed(tmp_path):
    records = record_failing(
        tmp_path / "records", lambda: torch.compile(P.big_values_fail, backend="planted_compile_error")(torch.ones(3))
    )
    good = records[0].path
    marker = tmp_path / "pwned"

    class Bomb:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    bomb = tmp_path / "bomb"
    shutil.copytree(good, bomb)
    torch.save([torch.ones(1), Bomb()], bomb / "tensors.pt")
    _fix_checksum(bomb)  # an attacker controls the manifest too
    with pytest.raises(CorruptRecord, match="unsafe to load"):
        replay.load(bomb)
    assert not marker.exists()

    truncated = tmp_path / "truncated"
    shutil.copytree(good, truncated)
    data = (truncated / "tensors.pt").read_bytes()
    (truncated / "tensors.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptRecord, match="checksum"):
        replay.load(truncated)
    _fix_checksum(truncated)
    with pytest.raises(CorruptRecord, match="truncated or corrupt"):
        replay.load(truncated)

    cut_manifest = tmp_path / "cut-manifest"
    shutil.copytree(good, cut_manifest)
    text = (cut_manifest / "manifest.json").read_text()
    (cut_manifest / "manifest.json").write_text(text[: len(text) // 3])
    with pytest.raises(CorruptRecord, match="not valid JSON"):
        replay.load(cut_manifest)


@pytest.mark.e2e
def test_a_pickle_bomb_through_the_command_line_is_one_line_and_exit_6(tmp_path):
    records = record_failing(
        tmp_path / "records", lambda: torch.compile(P.big_values_fail, backend="planted_compile_error")(torch.ones(3))
    )
    marker = tmp_path / "pwned"

    class Bomb:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    bomb = tmp_path / "bomb"
    shutil.copytree(records[0].path, bomb)
    torch.save([torch.ones(1), Bomb()], bomb / "tensors.pt")
    _fix_checksum(bomb)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "run", "--json", str(bomb)],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PT2KIT_AUTOLOAD": "0"},
    )
    assert done.returncode == 6, done.stderr
    assert json.loads(done.stdout)["exit_code"] == 6
    assert "unsafe to load" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()


def _fix_checksum(directory: Path) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["tensors"]["sha256"] = _file_sha256(directory / "tensors.pt")
    (directory / "manifest.json").write_text(json.dumps(manifest))


# -- beyond the done criteria ------------------------------------------------------------


def test_dataclass_namedtuple_and_enum_values_replay(tmp_path):
    pair = P.Pair(torch.randn(3), 2.0)
    settings = P.Settings(P.Mode.SCALE, 0.5, [1.5])
    expected = P.structured(pair, settings)
    records = record_failing(
        tmp_path, lambda: torch.compile(P.structured, backend="planted_compile_error")(pair, settings)
    )
    record = replay.load(records[0].path)
    args = record.manifest["frame"]["args"]
    assert args["pair"]["t"] == "namedtuple" and node(record, args["settings"])["t"] == "object"
    assert node(record, args["settings"])["state"]["mode"]["t"] == "enum"
    eager = replay_forked(record.path, backend="eager")
    assert eager["status"] == "passed", eager
    assert eager["outputs"][0]["sha256"] == sha(expected)


def test_a_resume_function_after_a_graph_break_is_recorded_and_replayed(tmp_path):
    x = torch.randn(3)
    records = record_failing(
        tmp_path, lambda: torch.compile(P.breaks_then_fails, backend="planted_compile_error")(x, 2.0)
    )
    call, resumed = (replay.load(r.path) for r in records)
    assert resumed.function == "breaks_then_fails" and resumed.manifest["frame"]["resume"]
    assert resumed.manifest["frame"]["code_name"].startswith("torch_dynamo_resume_in_breaks_then_fails")
    assert replay_forked(resumed.path)["status"] == "reproduced"
    eager = replay_forked(resumed.path, backend="eager")
    assert eager["outputs"][0]["sha256"] == sha(torch.cos(x.sin() * 2.0) + x)
    # the call that led to it is recorded too, whole: the same failure, the same answer under eager
    assert (call.summary()["role"], resumed.summary()["role"]) == ("call", "resume")
    assert call.manifest["frame"]["code_name"] == "breaks_then_fails" and call.manifest["snapshot"] == "frame-entry"
    assert str(call.path) in resumed.manifest["notes"][-1]
    assert replay_forked(call.path)["status"] == "reproduced"
    assert replay_forked(call.path, backend="eager")["outputs"][0]["sha256"] == eager["outputs"][0]["sha256"]


def test_a_wrong_value_made_before_a_graph_break_is_replayed_as_the_call_that_made_it(tmp_path):
    """The frame after the break fails under every backend (its input is already wrong: pytorch#191308's
    shape); the call record compiles the graph that made it too, so only the guilty backend reproduces."""
    x = torch.zeros(3)
    records = record_failing(
        tmp_path, lambda: torch.compile(P.wrong_value_crosses_a_break, backend="planted_wrong_cos")(x)
    )
    by_role = {r.summary()["role"]: replay.load(r.path) for r in records}
    assert sorted(by_role) == ["call", "resume"]
    assert replay_forked(by_role["resume"].path, backend="aot_eager")["status"] == "reproduced"
    assert replay_forked(by_role["call"].path)["status"] == "reproduced"
    passed = replay_forked(by_role["call"].path, backend="aot_eager")
    assert passed["status"] == "passed" and passed["outputs"][0]["sha256"] == sha(P.wrong_value_crosses_a_break(x))


def test_a_later_call_that_fails_at_run_time_is_snapshotted_when_it_fails(tmp_path):
    compiled = torch.compile(P.big_values_fail, backend="planted_value")

    def calls():
        compiled(torch.ones(3))
        compiled(torch.full((3,), 200.0))

    records = record_failing(tmp_path, calls)
    assert len(records) == 1
    record = replay.load(records[0].path)
    assert record.manifest["snapshot"] == "at-failure" and record.failure["kind"] == "runtime_error"
    assert replay_forked(record.path)["status"] == "reproduced"


def test_a_compiled_optimizer_step_is_recorded_complete_and_replays(tmp_path):
    # torch.compile(opt.step) (pytorch#197094): the frame is torch's own SGD.step, ``self`` an optimizer.
    # It was unrecordable (Optimizer defines __setstate__), and the step's module was copied as source.
    from torch._dynamo import register_backend

    def refuses_foreach(gm, example_inputs):
        if any("_foreach_" in str(n.target) for n in gm.graph.nodes):
            raise RuntimeError("test backend: cannot compile a _foreach op")
        return gm.forward

    register_backend(refuses_foreach, name="pt2kit_test_refuses_foreach")
    p = torch.nn.Parameter(torch.randn(3, 2))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, foreach=True)
    p.grad = torch.ones_like(p)
    opt.step()  # (a momentum buffer in its state, keyed by the parameter)
    before = p.detach().clone()
    records = record_failing(tmp_path, lambda: torch.compile(opt.step, backend="pt2kit_test_refuses_foreach")())
    record = replay.load(records[0].path)
    assert record.status == "complete" and record.function == "step", record.manifest["unrecordable"]
    assert replay_forked(record.path)["status"] == "reproduced"
    assert replay_forked(record.path, backend="eager")["status"] == "passed"
    assert torch.equal(p.detach(), before)  # (the replays ran elsewhere: the program's parameter is as it was)


def test_a_script_error_no_frame_raised_points_a_wrong_answer_to_minify_accuracy_and_explain():
    from replay.report import no_record_message

    said = no_record_message({"script_error": "AssertionError: call 1"})
    assert said.startswith("nothing was recorded: the script raised AssertionError: call 1, but not while")
    assert "minify run --accuracy" in said and "python -m explain" in said
    assert no_record_message({}) == "no frame failed: nothing was recorded"


def test_an_unknown_backend_is_one_line_with_exit_4(tmp_path):
    records = record_failing(
        tmp_path, lambda: torch.compile(P.big_values_fail, backend="planted_compile_error")(torch.ones(3))
    )
    with pytest.raises(UnknownBackend) as unknown:
        runner.replay_here(records[0].path, backend="no_such_backend")
    assert unknown.value.exit_code == 4 and "no_such_backend" in str(unknown.value)


def test_a_healthy_program_runs_unchanged_while_recording(tmp_path):
    x = torch.randn(5)
    expected = P.grows(x)
    torch._dynamo.reset()
    with replay.recording(out=tmp_path, quiet=True) as recorder:
        got = torch.compile(P.grows, backend="aot_eager")(x)
        again = torch.compile(P.grows, backend="aot_eager")(x)
    assert torch.equal(got, expected) and torch.equal(again, expected)
    assert recorder.records == [] and recorder.frames_seen >= 1
    assert not any(tmp_path.iterdir()), "nothing is written for frames that do not fail"


@pytest.mark.e2e
@pytest.mark.matrix
def test_run_from_the_command_line_prints_one_json_document_and_exits_1_when_reproduced(tmp_path):
    records = record_failing(
        tmp_path,
        lambda: torch.compile(P.make_frame(torch.ones(4)), backend="planted_compile_error")(
            torch.randn(4), 2, 0.5, P.TABLE
        ),
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    ran = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "run", "--json", str(records[0].path)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert ran.returncode == 1, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "reproduced" and result["failure"]["message"] == "planted: cannot compile aten.cos"
    assert result["backend"] == "planted_compile_error" and result["record"] == str(records[0].path)


@pytest.mark.slow
def test_record_from_the_command_line(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\nimport torch\nimport replay_programs as P\n"
        "frame = P.make_frame(torch.ones(4))\n"
        "torch.compile(frame, backend='planted_compile_error')(torch.randn(4), 2, 0.5, P.TABLE)\n"
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    recorded = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "record", "--json", "--out", str(tmp_path / "out"), str(script)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert recorded.returncode == 0, recorded.stderr
    summary = json.loads(recorded.stdout)
    assert summary["status"] == "recorded" and len(summary["records"]) == 1
    entry = summary["records"][0]
    assert entry["function"] == "frame" and entry["status"] == "complete" and entry["unrecordable"] == []
    assert Path(entry["path"]).name.startswith("rec-frame-")
    assert set(os.listdir(entry["path"])) == {"manifest.json", "tensors.pt"}
    healthy = tmp_path / "healthy.py"
    healthy.write_text("import torch\nprint(torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)))\n")
    nothing = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "record", "--json", "--out", str(tmp_path / "out2"), str(healthy)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert nothing.returncode == 1 and json.loads(nothing.stdout) == {"status": "no-failure", "records": []}
    early = tmp_path / "early.py"
    early.write_text("raise ValueError('before any compile')\n")
    raised = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "record", str(early)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert raised.returncode == 3 and "before torch.compile compiled anything" in raised.stderr
    taken = tmp_path / "a-file"  # --out where no record can be written: said in one line, the file kept
    taken.write_text("the user's")
    unwritable = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "record", "--out", str(taken / "records"), str(script)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert unwritable.returncode == 1 and taken.read_text() == "the user's", unwritable.stderr
    assert "nothing was recorded: a compiled frame failed, but its record could not be written (frame: " in unwritable.stdout + unwritable.stderr
    assert "replay/records.py" not in unwritable.stderr, unwritable.stderr  # (the recorder's error in one line)


@pytest.mark.slow
def test_real_inductor_failure_replays_with_its_recorded_config(tmp_path):
    """examples/relu_compile_error.py plants an Inductor codegen bug through a config flag."""
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    recorded = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "replay",
            "record",
            "--json",
            "--out",
            str(tmp_path),
            str(REPO / "examples" / "relu_compile_error.py"),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    path = json.loads(recorded.stdout)["records"][0]["path"]
    manifest = replay.load(path).manifest
    assert manifest["config"]["torch._inductor.config"]["cpp.inject_relu_bug_TESTING_ONLY"] == "compile_error"
    assert manifest["compile"]["backend"]["name"] == "inductor"
    reproduced = replay.run(path)
    assert reproduced.status == "reproduced" and reproduced.failure["exception"] == "CppCompileError"
    assert replay.run(path, backend="eager").status == "passed"


@pytest.mark.e2e
def test_torch_replay_record_enabled_switch_records_once_pt2kit_is_installed(tmp_path):
    script = tmp_path / "switch.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\nimport torch\nimport replay_programs as P\n"
        "x = torch.ones(2)\nprint(torch.equal(torch.compile(P.grows, backend='eager')(x), P.grows(x)))  # healthy, switch off\n"
        "print(torch._dynamo.convert_frame._compile.__module__)  # nothing of pt2kit in the compile path yet\n"
        "torch._dynamo.config.replay_record_enabled = True\n"
        "torch.compile(P.big_values_fail, backend='planted_compile_error')(torch.ones(3))\n"
    )
    pth = (REPO / "pt2kit" / "pt2kit-autoload.pth").read_text().strip()
    startup = f"{pth}\nimport runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')"
    env = {**os.environ, "TORCHDYNAMO_REPRO_DIR": str(tmp_path / "records")}
    env.pop("PT2KIT_AUTOLOAD", None)
    done = subprocess.run(
        [sys.executable, "-c", startup], check=False, capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode != 0 and "planted: cannot compile aten.cos" in done.stderr
    assert done.stdout.split() == ["True", "torch._dynamo.convert_frame"], "the healthy call ran as without pt2kit"
    records = list((tmp_path / "records").iterdir())
    assert len(records) == 1 and records[0].name.startswith("rec-big_values_fail-"), records
    assert replay.load(records[0]).failure["message"] == "planted: cannot compile aten.cos"
    assert not list(tmp_path.rglob("*.rec")), "torch's own (broken) recorder stayed out"


@pytest.mark.slow
def test_replay_script_needs_only_torch_and_fails_the_same_way(tmp_path):
    records = record_failing(
        tmp_path / "records",
        lambda: torch.compile(P.make_frame(torch.ones(4)), backend="planted_compile_error")(
            torch.randn(4), 2, 0.5, P.TABLE
        ),
    )
    from replay.script import write_script

    script = write_script(records[0].path, tmp_path / "replay_frame.py")
    text = script.read_text()
    assert (
        "import replay" not in text
        and "from replay" not in text
        and "minifier" not in text.split("# --- rebuilding")[1]
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    failed = subprocess.run([sys.executable, "-P", str(script)], check=False, capture_output=True, text=True, env=env)
    assert failed.returncode != 0 and "planted: cannot compile aten.cos" in failed.stderr
    passed = subprocess.run(
        [sys.executable, "-P", str(script), "--backend", "eager"], check=False, capture_output=True, text=True, env=env
    )
    assert passed.returncode == 0, passed.stderr
    assert "sha256" in passed.stdout


@pytest.mark.slow
def test_replay_minify_turns_a_recorded_frame_into_a_minimal_repro(tmp_path):
    records = record_failing(
        tmp_path / "records",
        lambda: torch.compile(P.make_frame(torch.ones(4)), backend="planted_compile_error")(
            torch.randn(4), 2, 0.5, P.TABLE
        ),
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "replay",
            "minify",
            "--json",
            "--out",
            str(tmp_path / "runs"),
            str(records[0].path),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "minified" and report["ops_after"] == ["aten.cos.default"]
    assert Path(report["repro"]).is_file()


@pytest.mark.slow
def test_show_lists_what_the_record_holds(tmp_path):
    records = record_failing(
        tmp_path,
        lambda: torch.compile(P.make_frame(torch.ones(4)), backend="planted_compile_error")(
            torch.randn(4), 2, 0.5, P.TABLE
        ),
    )
    done = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "show", "--json", str(records[0].path)],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PT2KIT_AUTOLOAD": "0"},
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["args"]["x"] == "tensor float32[4]" and data["closure"]["bias"] == "tensor float32[4]"
    assert data["globals"]["F"] == "module torch.nn.functional" and data["stage"] == "backend compile"


def test_records_are_never_overwritten_and_identical_ones_are_reused(tmp_path):
    first = record_failing(
        tmp_path, lambda: torch.compile(P.big_values_fail, backend="planted_compile_error")(torch.ones(3))
    )
    second = record_failing(
        tmp_path, lambda: torch.compile(P.big_values_fail, backend="planted_compile_error")(torch.ones(3))
    )
    assert first[0].path == second[0].path
    assert [p.name for p in tmp_path.iterdir()] == [first[0].path.name], "no staging directories are left behind"
    pickle.dumps(first[0].manifest)  # the manifest is plain data


def test_the_value_tree_round_trips_identity_views_cycles_and_structured_values(tmp_path):
    """Encoder -> manifest pieces + tensors.pt (weights_only) -> Decoder, without compiling anything."""
    import collections
    import functools

    import numpy as np

    from replay import values

    base = torch.arange(12.0).reshape(3, 4).clone()
    weight = torch.nn.Parameter(torch.randn(2, 2))
    weight.grad = torch.ones(2, 2)
    marked = torch.zeros(5, 2)
    torch._dynamo.mark_dynamic(marked, 0)
    cyclic: list = [1]
    cyclic.append(cyclic)
    shared = {"a": 1}
    generator = torch.Generator().manual_seed(3)
    linear = torch.nn.Linear(2, 3)
    original = {
        "base": base,
        "view": base[1:, ::2],
        "transposed": base.t(),
        "weight": weight,
        "marked": marked,
        "cyclic": cyclic,
        "shared": (shared, shared),
        "floats": (float("nan"), float("inf"), -0.0, 1e300),
        "misc": (b"\x00\xff", slice(1, None, 2), range(0, 10, 3), 2 + 3j, ..., frozenset({1, 2}), {3, 4}),
        "torch": (
            torch.float16,
            torch.device("cpu"),
            torch.Size([2, 3]),
            torch.channels_last,
            torch.ops.aten.add.Tensor,
        ),
        "collections": (collections.OrderedDict(b=1, a=2), collections.defaultdict(list, {"k": [1]})),
        "structured": (P.Pair(base, 2.0), P.Settings(P.Mode.SHIFT, 0.5, [base]), P.Mode.SCALE),
        "callables": (functools.partial(P.helper, base), linear.forward, torch.sin, F.relu, torch.Tensor.add, P.helper),
        "module": linear,
        "generator": generator,
        "numpy": np.arange(4, dtype=np.float32),
        "subclass": P.ScaledTensor(torch.ones(3), 2.5),
    }
    encoder = values.Encoder(source_modules={"replay_programs": None})
    root = encoder.encode(original, "value")
    encoder.finish()
    assert encoder.unrecordable == [], encoder.unrecordable
    torch.save(encoder.tensors, tmp_path / "t.pt")
    tensors = torch.load(tmp_path / "t.pt", weights_only=True)
    manifest = json.loads(
        json.dumps({"objects": encoder.objects, "sources": encoder.sources, "namespaces": encoder.namespaces})
    )
    decoded = rebuild.Decoder(manifest, tensors).value(json.loads(json.dumps(root)))

    assert torch.equal(decoded["base"], base) and torch.equal(decoded["view"], base[1:, ::2])
    assert decoded["view"]._base is decoded["base"] and decoded["transposed"]._base is decoded["base"]
    decoded["base"][2, 0] = 100.0
    assert decoded["view"][1, 0] == 100.0, "a view still shares its base's storage"
    assert type(decoded["weight"]) is torch.nn.Parameter and decoded["weight"].requires_grad
    assert torch.equal(decoded["weight"], weight) and torch.equal(decoded["weight"].grad, weight.grad)
    assert decoded["marked"]._dynamo_dynamic_indices == {0}
    assert decoded["cyclic"][1] is decoded["cyclic"]
    assert decoded["shared"][0] is decoded["shared"][1]
    nan, inf, negative_zero, big = decoded["floats"]
    assert math.isnan(nan) and inf == float("inf") and str(negative_zero) == "-0.0" and big == 1e300
    assert decoded["misc"] == original["misc"]
    assert decoded["torch"] == original["torch"]
    assert decoded["collections"][0] == original["collections"][0] and list(decoded["collections"][0]) == ["b", "a"]
    assert decoded["collections"][1]["missing"] == [] and decoded["collections"][1]["k"] == [1]
    pair, settings, mode = decoded["structured"]
    assert type(pair).__name__ == "Pair" and pair.second == 2.0 and pair.first is decoded["base"]
    assert settings.mode.name == "SHIFT" and settings.extra[0] is decoded["base"] and mode.name == "SCALE"
    partial, method, sin, relu, add, helper = decoded["callables"]
    assert partial.args[0] is decoded["base"] and partial.func.__code__.co_code == P.helper.__code__.co_code
    assert method.__self__ is decoded["module"] and sin is torch.sin and relu is F.relu and add is torch.Tensor.add
    assert helper.__globals__["SCALE"] == 3.0, "a function from source gets the recorded globals it reads"
    module = decoded["module"]
    assert (
        type(module) is torch.nn.Linear
        and torch.equal(module.weight, linear.weight)
        and torch.equal(module(torch.ones(2)), linear(torch.ones(2)))
    )
    assert torch.equal(torch.rand(3, generator=decoded["generator"]), torch.rand(3, generator=generator))
    assert decoded["numpy"].tolist() == [0.0, 1.0, 2.0, 3.0]
    subclass = decoded["subclass"]
    assert (
        type(subclass).__name__ == "ScaledTensor"
        and subclass.scale == 2.5
        and torch.equal(subclass.data_, torch.ones(3))
    )



def test_tensors_sharing_a_storage_as_other_dtypes_are_saved_once_and_still_share_it(tmp_path):
    # pytorch#194747's inputs: torch.save refuses one storage seen as two dtypes, and the bug is the aliasing
    from replay import rebuild, values

    base = torch.arange(8.0)
    original = {
        "x": base,
        "y": base.view(torch.int32),  # a view of another dtype (its _base is x)
        "tail": base[4:].view(torch.int16),  # the same, on part of the storage
        "set": torch.empty(0, dtype=torch.uint8).set_(base.untyped_storage(), 8, (4,), (1,)),  # no _base at all
    }
    encoder = values.Encoder()
    root = encoder.encode(original, "value")
    torch.save(encoder.tensors, tmp_path / "t.pt")
    assert len(encoder.tensors) == 1, "one storage, saved once"
    tensors = torch.load(tmp_path / "t.pt", weights_only=True)
    decoded = rebuild.Decoder(json.loads(json.dumps({"objects": encoder.objects})), tensors).value(root)
    for name, value in original.items():
        assert decoded[name].dtype == value.dtype and torch.equal(decoded[name], value), name
    decoded["x"].add_(1)
    assert torch.equal(decoded["y"], (base + 1).view(torch.int32)), "the int32 alias sees the float write"
    assert torch.equal(decoded["tail"], (base + 1)[4:].view(torch.int16))
    assert decoded["set"].untyped_storage().data_ptr() == decoded["x"].untyped_storage().data_ptr()

# -- backends carried as source, through every door ------------------------------------------

#: A user's script whose frames fail under a backend of each shape the record carries as source.
SHAPES_SCRIPT = """
import functools

import torch
from torch._dynamo import register_backend

import user_backends


def no_cos(gm, example_inputs, scale=1):
    if any(n.target is torch.cos for n in gm.graph.nodes):
        raise RuntimeError("no_cos: cannot compile cos")
    return gm.forward


def make_backend(word):
    def closure_backend(gm, example_inputs):
        if any(word in str(n.target) for n in gm.graph.nodes):
            raise RuntimeError("no_cos: cannot compile " + word)
        return gm.forward

    return closure_backend


@register_backend(name="script_registered")
def script_registered(gm, example_inputs):
    return no_cos(gm, example_inputs)
"""

#: A module of the user's beside the script.
USER_BACKENDS = """
import torch


def no_cos(gm, example_inputs, scale=1):
    if any(n.target is torch.cos for n in gm.graph.nodes):
        raise RuntimeError("no_cos: cannot compile cos")
    return gm.forward
"""

BACKEND_SHAPES = {
    "function": "no_cos",
    "lambda": "lambda gm, example_inputs: no_cos(gm, example_inputs)",
    "partial": "functools.partial(no_cos, scale=2)",
    "closure": "make_backend('cos')",
    "registered": "'script_registered'",
    "module_partial": "functools.partial(user_backends.no_cos, scale=3)",
}


@pytest.fixture(scope="module")
def shape_records(tmp_path_factory):
    """``replay record`` on a script with one failing frame per backend shape: {shape: record path}."""
    directory = tmp_path_factory.mktemp("shapes")
    (directory / "user_backends.py").write_text(USER_BACKENDS)
    text = SHAPES_SCRIPT
    for shape, backend in BACKEND_SHAPES.items():
        text += f"\n\ndef frame_{shape}(x):\n    return torch.cos(x.sin()) + 1\n\n\ntry:\n    torch.compile(frame_{shape}, backend={backend})(torch.randn(4))\nexcept RuntimeError:\n    pass\n"
    script = directory / "shapes.py"
    script.write_text(text)
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "record", "--json", "--out", str(directory / "records"), str(script)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=directory,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    records = {entry["function"].removeprefix("frame_"): entry for entry in summary["records"]}
    assert sorted(records) == sorted(BACKEND_SHAPES) == sorted(e["function"][6:] for e in summary["records"]), (
        summary,
        done.stderr[-6000:],
    )
    for shape, entry in records.items():
        assert entry["status"] == "complete" and entry["failure"]["message"] == "no_cos: cannot compile cos", (
            shape,
            entry,
        )
    return {shape: Path(entry["path"]) for shape, entry in records.items()}


@pytest.mark.e2e
@pytest.mark.parametrize(
    "shape",
    # a backend defined in the script (the shape users hit) in make test; each other shape, half a minute of minify,
    # in the slow group
    [shape if shape == "function" else pytest.param(shape, marks=pytest.mark.slow) for shape in BACKEND_SHAPES],
)
def test_replay_minify_carries_a_backend_of_every_shape_into_the_repro(shape_records, shape, tmp_path):
    """The replay script holds the backend's definitions as its own code, so minify carries them on."""
    backend = replay.load(shape_records[shape]).manifest["compile"]["backend"]
    assert backend["name"] and backend["why"] is None, backend
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "minify", "--json", "--out", str(tmp_path), str(shape_records[shape])],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "minified", report
    assert report["failure"]["message"] == "no_cos: cannot compile cos" and report["ops_after"] == ["torch.cos"]
    repro = Path(report["repro"])
    beside_the_script = str(shape_records[shape].parent.parent)  # user_backends.py: repro.py imports it from PYTHONPATH
    ran = subprocess.run(
        [sys.executable, "-P", str(repro)],
        check=False,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": beside_the_script},
        cwd=tmp_path,
    )
    assert ran.returncode != 0 and "no_cos: cannot compile cos" in ran.stderr, ran.stderr[-3000:]


def test_the_replay_script_keeps_its_machinery_apart_from_the_backends_definitions(tmp_path, monkeypatch, capsys):
    """The carried definitions bind ``main`` and ``resolve`` at the script's top level, as the script's machinery names its own."""
    import runpy

    from replay.script import write_script

    compiled = torch.compile(P.big_values_fail, backend=P.make_rejecting_backend("cos"))
    records = record_failing(tmp_path / "records", lambda: compiled(torch.ones(3)))
    backend = replay.load(records[0].path).manifest["compile"]["backend"]
    assert "def main(" in backend["definitions"] and "import resolve" in backend["definitions"], backend
    script = write_script(records[0].path, tmp_path / "replay_frame.py")
    monkeypatch.setattr(sys, "argv", [str(script)])
    with pytest.raises(Exception, match="rejecting backend: cannot compile cos"):
        runpy.run_path(str(script), run_name="__main__")
    monkeypatch.setattr(sys, "argv", [str(script), "--backend", "eager"])
    runpy.run_path(str(script), run_name="__main__")
    assert f"output 0: {rebuild.digest(P.big_values_fail(torch.ones(3)))}" in capsys.readouterr().out


@pytest.mark.e2e
def test_replay_minify_refuses_what_it_cannot_compile_in_one_line(tmp_path):
    """A backend the record cannot carry (exit 4) and a partial record (exit 8): refused before minify runs."""
    scale = torch.ones(1)

    def closes_over_a_tensor(gm, example_inputs):  # a closure over a tensor has no source form
        raise RuntimeError(f"cannot compile (scale {float(scale)})")

    records = record_failing(
        tmp_path / "a", lambda: torch.compile(P.big_values_fail, backend=closes_over_a_tensor)(torch.ones(3))
    )
    assert replay.load(records[0].path).manifest["compile"]["backend"]["name"] is None
    partial = record_failing(
        tmp_path / "b",
        lambda: torch.compile(P.uses_unrecordable, backend="planted_compile_error")(torch.randn(3), P.counter()),
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    for path, code, words in ((records[0].path, 4, "cannot be rebuilt"), (partial[0].path, 8, "--allow-partial")):
        done = subprocess.run(
            [sys.executable, "-P", "-m", "replay", "minify", "--json", "--out", str(tmp_path / "runs"), str(path)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == code, done.stderr[-3000:]
        assert json.loads(done.stdout)["exit_code"] == code
        assert done.stderr.count("\n") == 1 and words in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists(), "minify never ran"


# -- what the rich views and their JSON twins show -------------------------------------------


def _rendered(printer, data, width: int) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    printer(data, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def test_show_lists_a_module_frames_parameters_buffers_attributes_and_children(tmp_path):
    from replay.report import print_show, show_data

    torch.manual_seed(1)
    block = P.make_block()
    block.note = "kept [s0]"
    block.shared = block.lin  # the same child module twice
    records = record_failing(tmp_path, lambda: torch.compile(block, backend="planted_runtime_error")(torch.randn(2, 4)))
    data = json.loads(json.dumps(show_data(replay.load(records[0].path))))
    state = data["state"]["self"]
    assert state["kind"] == "nn.Module" and state["class"].startswith("Block")
    assert state["parameters"] == {}
    assert (
        state["buffers"]["scale"].startswith("tensor float32[4]") and "non-persistent" not in state["buffers"]["scale"]
    )
    assert state["buffers"]["offset"].startswith("tensor float32[4]") and state["buffers"]["offset"].endswith(
        "(non-persistent)"
    )
    assert state["attributes"]["training"] == "True" and state["attributes"]["note"] == "'kept [s0]'"
    assert not any(name.endswith("hooks") for name in state["attributes"]), "empty bookkeeping is left out"
    lin = state["modules"]["lin"]
    assert lin["class"] == "Linear from torch.nn.modules.linear" and list(lin["parameters"]) == ["weight", "bias"]
    assert lin["parameters"]["weight"].startswith("tensor float32[4, 4] (Parameter")
    assert lin["attributes"]["in_features"] == "4" and lin["modules"] == {}
    assert list(state["modules"]) == ["lin", "shared"] and state["modules"]["shared"] == "same object as self.lin"
    text = _rendered(print_show, data, 60)
    for expected in (
        "self: Block",
        "offset: tensor float32[4]",
        "(non-persistent)",
        "lin: Linear",
        "weight: tensor",
        "note: 'kept [s0]'",
    ):
        assert expected in text, (expected, text)


def test_show_lists_the_state_of_an_object_argument(tmp_path):
    from replay.report import show_data

    settings = P.Settings(P.Mode.SCALE, 0.5, [1.5])
    records = record_failing(
        tmp_path,
        lambda: torch.compile(P.structured, backend="planted_compile_error")(P.Pair(torch.randn(3), 2.0), settings),
    )
    state = show_data(replay.load(records[0].path))["state"]
    assert set(state) == {"settings"}, "a NamedTuple is shown in the arguments; objects and modules get their state"
    assert state["settings"]["kind"] == "object" and "modules" not in state["settings"]
    assert state["settings"]["attributes"] == {"mode": "Mode (source).SCALE", "factor": "0.5", "extra": "list[1] (1.5)"}


def test_record_prints_every_record_path_whole_at_any_width():
    from replay.report import print_records, print_result

    path = "/home/someone/experiments/2026-11-28/long-running-job/torch_compile_debug/rec-forward_with_a_long_name-0123456789ab"
    summary = {
        "status": "recorded",
        "records": [
            {
                "path": path,
                "function": "forward_with_a_long_name",
                "file": "/home/someone/experiments/train.py",
                "line": 120,
                "status": "complete",
                "unrecordable": [],
                "failure": {
                    "kind": "compile_error",
                    "exception": "RuntimeError",
                    "message": "expected [s0, 4] got [/]",
                },
            }
        ],
    }
    for width in (40, 60, 140):
        text = _rendered(print_records, summary, width)
        assert path in text.splitlines() or any(line.strip().endswith(path) for line in text.splitlines()), (
            width,
            text,
        )
    assert "expected [s0, 4] got [/]" in _rendered(print_records, summary, 200), "a message is not read as markup"
    result = runner.ReplayResult(
        "reproduced",
        {"kind": "compile_error", "exception": "RuntimeError", "message": "expected [s0, 4] got [/]"},
        {"kind": "compile_error", "exception": "RuntimeError", "message": "expected [s0, 4] got [/]"},
        backend="[bold]x",
    )
    text = _rendered(print_result, result, 200)
    assert text.count("expected [s0, 4] got [/]") == 2 and "[bold]x" in text


def recorded_once(script, out):
    """``python -m replay record --json`` of ``script`` into ``out``, which records one frame: that record."""
    from click.testing import CliRunner

    from replay.cli import main

    torch._dynamo.reset()
    result = CliRunner().invoke(main, ["record", "--json", "--out", str(out), str(script)])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["records"]
    return replay.load(entry["path"])


def test_a_frame_whose_backward_fails_is_recorded_and_replays_through_a_backward(tmp_path):
    """AOTAutograd compiles the backward during loss.backward(), outside the frame: the frame's first backward
    is watched, the frame it broke in is recorded, and its replay runs a backward through its outputs."""


    script = tmp_path / "backward.py"
    script.write_text(
        "import torch\nimport planted  # noqa: F401\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "torch.compile(lambda t: t.cos().sum(), backend='planted_backward_error')(x).backward()  # a healthy backward first\n"
        "torch.compile(lambda t: torch.tanh(t.sin()).sum(), backend='planted_backward_error')(x).backward()\n"
    )
    record = recorded_once(script, tmp_path / "records")
    assert record.failure["stage"] == "backward" and "planted: cannot compile aten.tanh_backward" in record.failure["message"]
    assert "tanh" in record.manifest["sources"][0]["text"], "the frame whose backward broke, not the healthy one before it"
    replayed = replay_forked(record.path)
    assert replayed["status"] == "reproduced", replayed
    passed = replay_forked(record.path, backend="aot_eager")
    assert passed["status"] == "passed" and len(passed["outputs"]) == 1, passed


def test_a_model_class_of_the_script_is_recorded_when_its_backward_fails_after_the_frame_returned(tmp_path):
    """A training loop's model, defined at the top of the script: its backward fails after the frame returned and
    the script raised, when runpy has put ``__main__`` back. The class is found through the frame's own globals
    and its file, not ``sys.modules["__main__"]`` (which is replay's by then): the record is complete."""


    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nimport planted  # noqa: F401\n\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.a = torch.nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return torch.tanh(self.a(x))\n\n\n"
        "model = Net()\n"
        "for _ in range(2):\n"
        "    torch.compile(model, backend='planted_backward_error')(torch.randn(2, 4)).sum().backward()\n"
    )
    record = recorded_once(script, tmp_path / "records")
    assert record.manifest["status"] == "complete", record.manifest.get("unrecordable")
    assert any(s["kind"] == "class" and s["name"] == "Net" for s in record.manifest["sources"])
    replayed = replay_forked(record.path)
    assert replayed["status"] == "reproduced", replayed


def test_a_healthy_backward_is_unchanged_and_a_later_error_outside_any_frame_is_said_and_not_recorded(tmp_path):
    """The hooks on a compiled first call's backward node change no gradient; an error after it ended is no frame's."""
    from click.testing import CliRunner

    from replay.cli import main

    script = tmp_path / "healthy.py"
    script.write_text(
        "import torch\n"
        "x = torch.randn(5, requires_grad=True)\n"
        "expected = torch.autograd.grad(torch.tanh(x.sin()).sum() * 3, x)[0]\n"
        "(torch.compile(lambda t: torch.tanh(t.sin()).sum(), backend='aot_eager')(x) * 3).backward()\n"
        "assert torch.equal(x.grad, expected), 'the gradient changed'\n"
        "raise ValueError('the program fails after its backward ended')\n"
    )
    torch._dynamo.reset()
    result = CliRunner().invoke(main, ["record", "--out", str(tmp_path / "records"), str(script)])
    assert result.exit_code == 1, result.output
    assert "the script raised ValueError: the program fails after its backward ended" in result.output
    assert "ran its first backward" in result.output and "the gradient changed" not in result.output
    assert not (tmp_path / "records").exists() or not any((tmp_path / "records").iterdir())


# -- the program's changes to torch ---------------------------------------------------------

PATCHING_SCRIPT = """\
import torch
import torch._inductor.compile_fx as compile_fx
import torch._inductor.decomposition as decomposition

aten = torch.ops.aten


def broken_decompositions(*args):
    raise RuntimeError("planted: the program's patch of torch")


{patch}


def f(x):
    return torch.sin(x) + 1


torch.compile(f, backend="aot_eager_decomp_partition")(torch.ones(4))
"""

#: How the script patches torch, and the torch target the record names.
PATCHES = {
    "attribute": (
        "compile_fx.select_decomp_table = broken_decompositions",
        "torch._inductor.compile_fx.select_decomp_table",
    ),
    "table": (
        "decomposition.decompositions[aten.sin.default] = broken_decompositions",
        "torch._inductor.decomposition.decompositions[aten.sin.default]",
    ),
    "lambda": ("compile_fx.select_decomp_table = lambda: 1 / 0", "torch._inductor.compile_fx.select_decomp_table"),
}


def record_patching_script(tmp_path: Path, patch: str) -> replay.Record:
    """``replay record`` (in this process) of a script that patches torch, then torch as it was before it."""
    from click.testing import CliRunner
    from torch._inductor import compile_fx, decomposition

    from pt2kit.seams import compiler_state
    from replay.cli import main

    script = tmp_path / "patching.py"
    script.write_text(PATCHING_SCRIPT.format(patch=patch))
    attribute, table = compile_fx.select_decomp_table, dict(decomposition.decompositions)
    torch._dynamo.reset()
    compiler_state.refresh()  # (Inductor's copy of its table, from an earlier test, would hide the script's change)
    try:
        result = CliRunner().invoke(main, ["record", "--json", "--out", str(tmp_path / "records"), str(script)])
    finally:
        compile_fx.select_decomp_table = attribute
        decomposition.decompositions.clear()
        decomposition.decompositions.update(table)
        compiler_state.refresh()
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["records"]
    return replay.load(entry["path"])


@pytest.mark.parametrize("how", ["attribute", "table"])
def test_a_script_that_patches_torch_replays_with_its_patch_and_reproduces(tmp_path, how):
    """The user trial's planted lowering bug, in small: the record carries the script's patch of torch
    (its function and the statement installing it) and the replay runs it before compiling; without
    it the replay passed and the user concluded the bug was gone."""
    patch, target = PATCHES[how]
    record = record_patching_script(tmp_path, patch)
    assert record.failure["message"] == "planted: the program's patch of torch"
    assert record.failure["stage"] == "backend compile"
    state = record.manifest["program_state"]
    assert state["patches"] == {target: "broken_decompositions"} and state["missing"] == []
    assert "def broken_decompositions" in state["carried"] and patch in state["carried"]
    assert "torch.compile(f" not in state["carried"], "the script's own run is not carried"
    replayed = replay_forked(record.path)
    assert replayed["status"] == "reproduced", replayed
    assert replayed["state_missing"] == [] and replayed["caveat"] is None
    from replay.script import script_text

    text = script_text(record.path, record.manifest, record.path / "tensors.pt")
    assert f"\n{patch}\n" in text, "the replay script runs the patch as its own top-level code (minify run slices it)"


def test_a_patch_of_torch_by_a_lambda_is_named_missing_and_a_passing_replay_says_so(tmp_path):
    from replay.report import print_result, print_show, show_data

    patch, target = PATCHES["lambda"]
    record = record_patching_script(tmp_path, patch)
    assert record.failure["exception"] == "ZeroDivisionError"
    missing = [f"{target} = __main__.<lambda>"]
    assert record.manifest["program_state"]["missing"] == missing and record.summary()["state_missing"] == missing
    assert "not recorded: the program's change to torch " + missing[0] in _rendered(print_show, show_data(record), 300)
    replayed = replay_forked(record.path)
    assert replayed["status"] == "passed" and replayed["state_missing"] == missing
    assert missing[0] in replayed["caveat"] and "the failure may need them" in replayed["caveat"]
    line = _rendered(print_result, runner.ReplayResult.from_json(replayed), 400).splitlines()[0]
    assert line.startswith("passed with backend aot_eager_decomp_partition") and missing[0] in line
    assert "the record lacks the program's changes to torch" in line


@pytest.mark.slow
def test_the_user_trials_planted_lowering_bug_reproduces_from_the_command_line_and_the_script(tmp_path):
    """The trial's script replaces Inductor's relu lowering with one that raises: `replay run` passed, exit 0."""
    script = tmp_path / "lowering_bug.py"
    script.write_text(
        "import torch\nfrom torch._inductor import lowering\naten = torch.ops.aten\n\n\n"
        "def broken_relu(x):\n    raise RuntimeError('planted lowering bug')\n\n\n"
        "lowering.lowerings[aten.relu.default] = broken_relu\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
        "torch.compile(model)(torch.randn(2, 4)).sum().backward()\n"
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    command = [sys.executable, "-P", "-m", "replay"]
    recorded = subprocess.run(
        [*command, "record", "--json", "--out", str(tmp_path / "records"), str(script)],
        check=False, capture_output=True, text=True, env=env,
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    path = json.loads(recorded.stdout)["records"][0]["path"]
    record = replay.load(path)
    assert record.failure["stage"] == "backend compile", "Inductor's errors come without BackendCompilerFailed"
    assert record.manifest["program_state"]["patches"] == {
        "torch._inductor.lowering.lowerings[aten.relu.default]": "broken_relu"
    }
    ran = subprocess.run([*command, "run", "--json", path], check=False, capture_output=True, text=True, env=env)
    assert ran.returncode == 1 and json.loads(ran.stdout)["status"] == "reproduced", ran.stdout + ran.stderr[-3000:]
    from replay.script import write_script

    replay_script = write_script(path, tmp_path / "replay_frame.py")
    failed = subprocess.run([sys.executable, "-P", str(replay_script)], check=False, capture_output=True, text=True, env=env)
    assert failed.returncode != 0 and "planted lowering bug" in failed.stderr


CUSTOM_OPS_SCRIPT = """
import torch

lib = torch.library.Library("pt2kit_replay_ops", "DEF")
lib.define("halve(Tensor x) -> Tensor")
lib.impl("halve", lambda x: x / 2, "CompositeExplicitAutograd")


@torch.library.custom_op("pt2kit_replay_ops::rowsum", mutates_args=())
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=1)


@rowsum.register_fake
def _(x):
    return x.new_empty(x.shape[0] + 1)  # one row too many: the failure


def f(x):
    return rowsum(torch.ops.pt2kit_replay_ops.halve(x)) + torch.ones(x.shape[0])


torch.compile(f, backend="eager")(torch.randn(4, 8))
"""


def test_a_frame_calling_the_scripts_custom_ops_carries_their_definitions_into_the_replay_script(tmp_path):
    """A record named the op and lost its definition (``'_OpNamespace' has no attribute``, pytorch#190908's
    record), and a ``custom_op`` function as a global was unrecordable: the record was partial."""

    from replay.script import write_script

    script = tmp_path / "custom_ops.py"
    script.write_text(CUSTOM_OPS_SCRIPT)
    record = recorded_once(script, tmp_path / "records")
    assert record.manifest["status"] == "complete", record.manifest["unrecordable"]
    assert record.manifest["namespaces"]["__main__"]["globals"]["rowsum"] == {
        "t": "op",
        "name": "pt2kit_replay_ops.rowsum.default",
    }
    carried = record.manifest["program_state"]["carried"]
    assert 'lib.define("halve' in carried and "def rowsum" in carried and "register_fake" in carried
    assert "def f(" not in carried and "torch.compile(f" not in carried, "the program itself is not carried"
    # a fresh process with torch alone, where neither op exists until the script defines it
    replay_script = write_script(record.path, tmp_path / "elsewhere" / "replay_frame.py")
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    ran = subprocess.run(
        [sys.executable, "-P", str(replay_script)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path / "elsewhere",
    )
    assert ran.returncode != 0 and "Attempting to broadcast a dimension of length 4" in ran.stderr, ran.stderr[-2000:]


def test_a_replay_of_a_refused_recompile_that_passes_says_a_replay_never_recompiles():
    """A frame recorded as dynamo refusing a recompile (error_on_recompile) compiles once when replayed: it passes."""
    for exception, message in (
        ("RecompileError", "Recompiling function f in x.py:3 triggered by the following guard failure(s)"),
        ("RuntimeError", "Detected recompile when torch.compile stance is 'fail_on_recompile'. filename: 'x.py'"),
    ):
        recorded = {"kind": "compile_error", "exception": exception, "message": message}
        passed = runner.ReplayResult("passed", None, recorded)
        assert "never recompiles" in passed.caveat and "python -m explain" in passed.caveat
        assert runner.ReplayResult("reproduced", recorded, recorded).caveat is None
    other = {"kind": "compile_error", "exception": "RuntimeError", "message": "something else"}
    assert runner.ReplayResult("passed", None, other).caveat is None


@pytest.mark.e2e
def test_a_function_of_the_scripts_main_inlined_from_torchs_own_frame_replays_under_a_healthy_backend(tmp_path):
    """``torch.compile(torch.func.grad(loss))`` compiles torch's wrapper frame; dynamo reads ``loss``'s globals through
    ``__main__`` imported by name (a guard on ``G['__import___main__'].torch``), which in a replay was the replay's own
    module: every healthy backend "failed" with AttributeError (hunt 12, pytorch#194706's jacfwd)."""
    script = tmp_path / "prog.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\nimport torch\nimport planted  # noqa: F401\n"
        "def loss(x):\n    return torch.cos(x).sum()\n"
        "torch.compile(torch.func.grad(loss), backend='planted_compile_error')(torch.randn(4))\n"
    )
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
    recorded = subprocess.run(
        [sys.executable, "-P", "-m", "replay", "record", "--json", "--out", str(tmp_path / "out"), str(script)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    (entry,) = json.loads(recorded.stdout)["records"]
    assert "__main__" in replay.load(entry["path"]).manifest["namespaces"], "the script's loss is read from __main__"
    assert replay_forked(Path(entry["path"]))["status"] == "reproduced"
    healthy = replay_forked(Path(entry["path"]), backend="eager")
    assert healthy["status"] == "passed", healthy
    assert healthy["outputs"][0]["shape"] == [4]
