"""Repro files: written, read back, run as their reader runs them; the Python API that saves them."""

import ast
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

import minifier
from minifier.unit.case import GraphCase, GraphInput, TensorMeta
from minifier.unit.copies import clone_tensor
from minifier.unit.runtime import rand_tensor
from pt2kit.errors import CorruptRecord
from minifier.repro.files import load_repro, trace_module, write_repro
from minifier.repro.writer import render


# --------------------------------------------------------------------------- #
# Repro files
# --------------------------------------------------------------------------- #


class Model(torch.nn.Module):
    def forward(self, x, w, n):
        zero = torch.ops.aten.full.default([], 0.0)  # a call with no graph inputs
        return (torch.relu(x @ w) * n + zero,)


def test_repro_round_trip_keeps_graph_inputs_and_config(tmp_path):
    x = torch.randn(1, 5).expand(4, 5)  # an overlapping layout
    w = torch.randn(5, 3, requires_grad=True)
    gm = trace_module(Model())
    case = GraphCase(
        gm,
        [GraphInput("x", x, TensorMeta.of(x)), GraphInput("w", w, TensorMeta.of(w), seed=7), GraphInput("n", 3, None)],
        config={"torch._inductor.config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}},
        backend="aot_eager",
    )
    path = write_repro(case, tmp_path, stage="aot_eager")
    # saved before any verdict: the header does not say it fails
    assert "# the dynamo graph as captured, for aot_eager (not known to fail)\n" in path.read_text()
    loaded = load_repro(path)
    assert loaded.case.gm.code == case.gm.code  # the full() call was not folded into a constant
    assert loaded.case.op_names() == ["aten.full.default", "operator.matmul", "torch.relu", "operator.mul", "operator.add"]
    x_back, w_back, n_back = loaded.case.inputs
    assert x_back.value.stride() == (0, 1) and torch.equal(x_back.value, x)
    assert w_back.seed == 7 and w_back.meta.requires_grad and n_back.value == 3
    assert loaded.case.config == case.config
    # the real tensor is few values: literals in the repro (its storage, then its view), no data file
    assert list(tmp_path.glob("inputs-*.pt")) == [] and ".as_strided((4, 5), (0, 1), 0)" in path.read_text()


def test_real_values_are_literals_bit_for_bit_up_to_the_limit_and_a_data_file_past_it(tmp_path):
    from minifier.repro.inputs import INLINE_LIMIT

    odd = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45, 3.0000001], dtype=torch.float32)
    half = (torch.randn(8) * 1e3).to(torch.bfloat16)
    window = torch.arange(12, dtype=torch.int64)[3:9:2]  # a view into more memory than its strides reach
    inputs = [GraphInput("x", odd, TensorMeta.of(odd)), GraphInput("w", half, TensorMeta.of(half)), GraphInput("n", window, TensorMeta.of(window))]
    gm = torch.fx.symbolic_trace(lambda x, w, n: (x + 1, w * 2, n - 1))
    path = write_repro(GraphCase(gm, inputs), tmp_path / "small", stage="eager")
    assert list(path.parent.glob("inputs-*.pt")) == []
    for before, after in zip(inputs, load_repro(path).case.inputs):
        v, w = before.value, after.value
        assert (w.dtype, w.shape) == (v.dtype, v.shape)
        assert torch.equal(w.view(torch.int32), v.view(torch.int32)) if v.dtype == torch.float32 else torch.equal(w, v)  # (NaN too: bits)
    big = torch.randn(INLINE_LIMIT + 1)
    path = write_repro(GraphCase(gm, [GraphInput("x", big, TensorMeta.of(big)), *inputs[1:]]), tmp_path / "big", stage="eager")
    (data_file,) = path.parent.glob("inputs-*.pt")  # (a model's values: a data file, loaded with weights_only)
    assert set(torch.load(data_file, weights_only=True)) == {"input:x", "input:w", "input:n"}
    assert torch.equal(load_repro(path).case.inputs[0].value, big)


def test_a_function_no_import_reaches_is_defined_from_its_source_and_read_back(tmp_path):
    # dynamo writes ``x.data = y`` as a call of a function it defines inside another
    # (``_lower_version_count_by_1``, pytorch#94773), and a method as ``TensorBase.set_``:
    # FX's import block raised for both, and the capture's error became the program's.
    from torch import fx

    def _halved(t: torch.Tensor) -> torch.Tensor:
        return t * 0.5

    graph = fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    set_ = graph.call_function(torch.Tensor.set_, (x, y))
    graph.output((graph.call_function(_halved, (set_,)),))
    a, b = torch.randn(2), torch.randn(3)
    case = GraphCase(fx.GraphModule(torch.nn.Module(), graph), [GraphInput("x", a, TensorMeta.of(a)), GraphInput("y", b, TensorMeta.of(b))])
    text = write_repro(case, tmp_path, stage="eager").read_text()
    assert "def _halved(t: torch.Tensor)" in text and "TensorBase.set_ as" not in text
    loaded = load_repro(tmp_path / "repro.py")
    y = torch.randn(3)
    assert torch.equal(loaded.case.gm(torch.randn(2), y)[0], y * 0.5)
    again = write_repro(loaded.case, tmp_path / "again", stage="eager")  # (written again from the repro's own function)
    assert "def _halved(t: torch.Tensor)" in again.read_text()
    assert torch.equal(load_repro(again).case.gm(torch.randn(2), y)[0], y * 0.5)


def test_repro_imports_only_torch_stdlib_and_user_modules(tmp_path):
    x = torch.randn(4, 5)
    case = GraphCase(trace_module(Model()), [GraphInput("x", x, TensorMeta.of(x)), GraphInput("w", x.t(), TensorMeta.of(x.t())), GraphInput("n", 2, None)], modules=[("mylib", "/src")])
    tree = ast.parse(render(case, stage="inductor", accuracy=True))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"torch", "sys", "pathlib", "mylib"}


@pytest.mark.parametrize("ready", [False, True], ids=["fresh", "ready"])
def test_small_user_modules_and_packages_are_copied_beside_the_repro_and_import_from_there(tmp_path, ready):
    src = tmp_path / "src"
    (src / "mypkg" / "inner").mkdir(parents=True)
    (src / "mypkg" / "__init__.py").write_text("from .inner.ops import TWO\n")
    (src / "mypkg" / "inner" / "__init__.py").write_text("")
    (src / "mypkg" / "inner" / "ops.py").write_text("TWO = 2\n")
    (src / "single.py").write_text("THREE = 3\n")
    (src / "withext").mkdir()
    (src / "withext" / "__init__.py").write_text("")
    (src / "withext" / "_native.so").write_bytes(b"\x7fELF")  # a compiled extension: a copy would not import
    x = torch.randn(4, 5)
    inputs = [GraphInput("x", x, TensorMeta.of(x)), GraphInput("w", x.t(), TensorMeta.of(x.t())), GraphInput("n", 2, None)]
    modules = [("mypkg.inner.ops", str(src)), ("single", str(src)), ("withext", str(src))]
    out = tmp_path / "out"
    write_repro(GraphCase(trace_module(Model()), inputs, modules=modules), out, stage="eager")
    assert (out / "mypkg" / "inner" / "ops.py").is_file() and (out / "single.py").is_file()
    assert not (out / "withext").exists()
    probe = "import mypkg, single; print(mypkg.TWO + single.THREE)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=out, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "5", done.stderr
    # and the repro, run as its reader runs it (another directory, PYTHONPATH unset), imports them from its side
    # (whether in a fresh interpreter or in one that imported torch beforehand, in a directory of its own)
    from minifier.stages.elsewhere import INDUCTOR_MODULES, ReadyInterpreter, run_elsewhere

    alone = tmp_path / "alone"
    path = write_repro(GraphCase(trace_module(Model()), inputs, modules=modules[:2]), alone, stage="eager")
    # (the graph runs, then the file says what it saw: pt2kit unimportable, a cache of its own, no PYTHONPATH)
    probe = (
        "import os as _os, sys as _sys\n"
        "try:\n    import minifier\nexcept ImportError:\n"
        "    _sys.exit(40 + ('TORCHINDUCTOR_CACHE_DIR' in _os.environ) + 2 * ('PYTHONPATH' not in _os.environ))\n"
        "_sys.exit(1)\n"
    )
    path.write_text(path.read_text().replace('    print(\'did not fail\')\n', probe.replace("\n", "\n    ").join(["    ", "\n"])))
    interpreter = ReadyInterpreter(INDUCTOR_MODULES) if ready else None  # (Inductor imported before the cache is set)
    ran = run_elsewhere(path, 120, ready=interpreter)
    assert ran.returncode == 43 and "ModuleNotFoundError" not in ran.stderr, (ran.returncode, ran.stderr[-2000:])
    if interpreter is not None:
        assert interpreter.process.returncode == 43  # it ran this repro, not a fresh interpreter
        interpreter.close()
        assert not interpreter.where.exists()


def test_the_ready_interpreter_asks_inductors_cpu_probes_ahead_and_a_repros_own_config_still_decides(tmp_path):
    # the probes are the machine's (about 1.5 s of child processes): asked ahead in pt2kit's cache, they leave
    # the repro its own cache and its own cpp.vec_isa_ok
    from minifier.stages.elsewhere import INDUCTOR_MODULES, ReadyInterpreter

    probes, cache = tmp_path / "probes", tmp_path / "cache"
    probes.mkdir()
    interpreter = ReadyInterpreter(INDUCTOR_MODULES, probes=probes)
    (interpreter.where / "repro.py").write_text(
        "import os, sys\n"
        "import torch._inductor.config as config\n"
        "from torch._inductor import cpu_vec_isa\n"
        "config.cpp.vec_isa_ok = False  # (as a repro that needs the scalar path carries)\n"
        "vectorized = bool(cpu_vec_isa.pick_vec_isa())\n"
        f"own_cache = os.environ.get('TORCHINDUCTOR_CACHE_DIR') == {str(cache)!r}\n"
        f"sys.exit(40 + own_cache + 2 * (not vectorized) + 4 * any(os.scandir({str(probes)!r})))\n"
    )
    try:
        assert interpreter.order("repro.py", str(cache))
        assert interpreter.process.wait(timeout=120) == 47, interpreter.err.seek(0) or interpreter.err.read()[-2000:]
    finally:
        interpreter.close()


@pytest.mark.parametrize("ending", ["returns", "raises", "exits 3", "exits with a message", "interrupted"])
def test_a_repro_run_elsewhere_ends_as_python_would_without_tearing_its_modules_down(tmp_path, ending):
    # RUN_THEN_EXIT skips only the modules' teardown: the exit status, the traceback, a
    # non-daemon thread's last words, atexit's and a file left open are as `python repro.py` has them
    import subprocess
    import sys

    from minifier.stages.elsewhere import RUN_WITH_TORCH_ALONE

    (tmp_path / "repro.py").write_text(
        "import atexit, sys, threading, time\n"
        "log = open('left-open.txt', 'w')\n"
        "log.write('written, never closed')\n"
        "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread ended', file=sys.stderr))).start()\n"
        + {
            "returns": "",
            "raises": "raise ValueError('boom')\n",
            "exits 3": "sys.exit(3)\n",
            "exits with a message": "sys.exit('a message')\n",
            "interrupted": "raise KeyboardInterrupt\n",
        }[ending]
    )

    def ran(command):
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        lines = [line for line in done.stderr.splitlines() if not line.startswith((" ", "Traceback"))]
        return done.returncode, lines, (tmp_path / "left-open.txt").read_text()

    plainly = ran([sys.executable, "repro.py"])
    assert ran([sys.executable, "-P", "-c", RUN_WITH_TORCH_ALONE, "repro.py"]) == plainly
    assert plainly[1][-2:] == ["thread ended", "atexit ran"] and plainly[2] == "written, never closed"


def test_a_run_elsewhere_killed_from_outside_is_asked_again_not_blamed_on_the_repro(session, tmp_path, monkeypatch):
    # a cleanup's SIGTERM (or the OOM killer) ends the run elsewhere: that is not what the repro does
    from minifier.stages.elsewhere import ReadyInterpreter, verify
    from minifier.stages.run import ask
    from minifier.unit.check import Check

    monkeypatch.delenv("PT2KIT_VERIFY_ELSEWHERE", raising=False)  # (the suite's default skips the run elsewhere)
    session.worker.slots = 2
    x = torch.randn(4, 4)
    relu_bug = {"torch._inductor.config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}}
    gm = trace_module(type("Relu", (torch.nn.Module,), {"forward": lambda self, x: (torch.relu(x),)})())
    path = write_repro(GraphCase(gm, [GraphInput("x", x, TensorMeta.of(x))], config=relu_bug), tmp_path, stage="inductor")
    case = load_repro(path).case
    failure = ask(session, case, Check("inductor", None), "the failure").failure  # type: ignore[arg-type]
    assert failure is not None and failure.signature.exception == "CppCompileError", failure
    killed = []

    def kill_it(case, check, done):
        killed.append(interpreter.process.pid)
        interpreter.process.terminate()
        while not done():
            time.sleep(0.05)

    interpreter = session.ready = ReadyInterpreter()
    session.while_verifying = kill_it
    verified, why = verify(session, path, Check("inductor", failure.signature), case)
    assert killed and interpreter.process.returncode == -15
    assert verified and why is None, why
    steps = {step.step: step for step in session.timeline.steps}
    assert "running repro.py elsewhere again: the first run was killed from outside" in steps
    # with two jobs, the run here went side by side with the first run elsewhere
    here, elsewhere = steps["checking the written repro fails the same way"], steps[next(s for s in steps if s.startswith("running repro.py elsewhere:"))]
    assert session.jobs == 2 and here.ended > elsewhere.ended - elsewhere.seconds  # (one after the other: it ends before)


def test_rand_tensor_keeps_layout_and_is_reproducible():
    a = rand_tensor((3, 4), (1, 3), torch.float32, True, seed=3)
    b = rand_tensor((3, 4), (1, 3), torch.float32, True, seed=3)
    assert a.stride() == (1, 3) and a.requires_grad and a.is_leaf and torch.equal(a, b)
    index = rand_tensor((100,), (1,), torch.int64, seed=1, low=0, high=9)
    assert int(index.min()) >= 0 and int(index.max()) <= 9
    assert clone_tensor(a).stride() == (1, 3)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("PT2KIT = {", "not valid Python"),
        ("x = 1\n", "no PT2KIT header"),
        ("PT2KIT = {'version': 99}\n", "unsupported pt2kit repro version 99"),
        ("PT2KIT = {'version': 1, 'x': open('/etc/passwd')}\n", "not a plain literal"),
    ],
)
def test_corrupt_repros_are_reported_without_running_them(tmp_path, text, error):
    path = tmp_path / "repro.py"
    path.write_text(text)
    with pytest.raises(CorruptRecord, match=error):
        load_repro(path)


def test_corrupt_data_file_is_reported(tmp_path):
    x = torch.randn(40, 50)  # (past the literals' limit: a data file)
    case = GraphCase(trace_module(Model()), [GraphInput("x", x, TensorMeta.of(x)), GraphInput("w", x.t(), TensorMeta.of(x.t())), GraphInput("n", 2, None)])
    path = write_repro(case, tmp_path, stage="eager")
    (data_file,) = tmp_path.glob("inputs-*.pt")
    data_file.write_bytes(b"not a tensor file")
    with pytest.raises(CorruptRecord, match="cannot load"):
        load_repro(path)


# --------------------------------------------------------------------------- #
# The Python API
# --------------------------------------------------------------------------- #


@pytest.mark.e2e
def test_save_repro_then_minify_from_python(tmp_path):
    import planted  # noqa: F401  registers planted_compile_error here

    def step(x, w):
        return torch.cos((x @ w).sin() * 2).exp().sum(0)

    x, w = torch.randn(8, 16), torch.randn(16, 16)
    run_dir = minifier.save_repro(step, x, w, backend="planted_compile_error", out=tmp_path)
    saved = run_dir / "g0" / "repro.py"
    assert load_repro(saved).case.op_names() == ["operator.matmul", "Tensor.sin", "operator.mul", "torch.cos", "Tensor.exp", "Tensor.sum"]
    ran = subprocess.run([sys.executable, str(saved)], capture_output=True, text=True, timeout=300)
    assert "planted: cannot compile aten.cos" in ran.stderr

    report = minifier.minify(step, x, w, backend="planted_compile_error", out=tmp_path)
    assert report["status"] == "minified" and report["ops_after"] == ["aten.cos.default"]


def test_a_repro_of_a_cuda_graph_waits_on_the_device_before_it_says_it_passed():
    """Kernels run asynchronously: without a wait, a kernel's device error could go unseen at exit."""
    x = torch.randn(2, 4)
    on_cpu = GraphCase(trace_module(torch.nn.ReLU()), [GraphInput("x", None, TensorMeta.of(x), seed=7)])
    on_cuda = replace(on_cpu, inputs=[GraphInput("x", None, replace(TensorMeta.of(x), device="cuda:0"), seed=7)])
    main = render(on_cuda, stage="aot_eager").split('if __name__ == "__main__":')[1]
    assert "device='cuda:0'" in render(on_cuda, stage="aot_eager")
    assert main.index("run(Repro(data), inputs)") < main.index("torch.cuda.synchronize()") < main.index("did not fail")
    assert "synchronize" not in render(on_cpu, stage="aot_eager")


def test_a_body_calling_a_factory_with_symbolic_sizes_as_varargs_is_written_so_fx_traces_it_again():
    import torch.fx as fx

    from minifier.repro.graph import _sizes_as_lists
    from minifier.unit.runtime import graph_module

    g = fx.Graph()
    x = g.placeholder("x")
    rows = g.call_function(torch.ops.aten.sym_size.int, (x, 0))
    cols = g.call_function(torch.ops.aten.sym_size.int, (x, 1))
    g.output((g.call_function(torch.ones, (rows, cols)),))
    written = _sizes_as_lists(g).python_code(root_module="self").src
    assert "torch.ones([sym_size_int, sym_size_int_1])" in written
    namespace: dict = {"torch": torch}
    exec("class Body(torch.nn.Module):\n" + "\n".join("    " + line for line in written.splitlines()), namespace)
    traced = graph_module(namespace["Body"]())  # (raised TypeError with the sizes as varargs)
    assert torch.equal(traced(torch.zeros(2, 3))[0], torch.ones(2, 3))
    assert "torch.ones(sym_size_int, sym_size_int_1)" in g.python_code(root_module="self").src  # the graph is left as it was


def test_an_unread_item_of_a_tuple_is_dropped_from_a_graph_traced_again():
    import operator

    import torch.fx as fx

    from minifier.unit.runtime import drop_unread_items

    g = fx.Graph()
    x = g.placeholder("x")
    parts = g.call_function(torch.ops.aten.sort.default, (x,))
    values = g.call_function(operator.getitem, (parts, 0))
    g.call_function(operator.getitem, (parts, 1))  # read by nothing
    g.output((values,))
    gm = drop_unread_items(fx.GraphModule(torch.nn.Module(), g))
    assert [n.args[1] for n in gm.graph.nodes if n.target is operator.getitem] == [0]
    assert torch.equal(gm(torch.tensor([3.0, 1.0]))[0], torch.tensor([1.0, 3.0]))


def test_a_graph_that_reads_a_bodys_constant_inlined_is_read_back_with_it_under_its_path():
    # (a cond inlined through a branch reads true_graph_0._tensor_constant0 from the root)
    import torch.fx as fx

    from minifier.unit.graphio import dump_graph, load_graph

    g = fx.Graph()
    x = g.placeholder("x")
    index = g.get_attr("true_graph_0._tensor_constant0")
    g.output((g.call_function(torch.ops.aten.index_select.default, (x, 0, index)),))
    root = torch.nn.Module()
    root.add_module("true_graph_0", torch.nn.Module())
    root.true_graph_0.register_buffer("_tensor_constant0", torch.tensor([2, 0]))
    constants = {"true_graph_0._tensor_constant0": torch.tensor([2, 0])}
    gm = load_graph(dump_graph(fx.GraphModule(root, g)), constants)
    assert torch.equal(gm(torch.tensor([5.0, 6.0, 7.0]))[0], torch.tensor([7.0, 5.0]))


def _reads_a_spec(x, spec):
    return x + len(spec.children_specs)


def test_a_graph_that_reads_a_constant_no_repro_holds_is_a_corrupt_record(tmp_path):
    # pytorch#195327's aot graph: auto_functionalized_v2 of a while_loop reads a pytree TreeSpec
    # (its op schema) with get_attr; pt2kit writes tensors only, so reading the repro back must
    # say so (the bisection then leaves that graph out), never fail inside pt2kit
    import torch.utils._pytree as pytree

    root = torch.nn.Module()
    root._tree_spec_constant0 = pytree.tree_flatten((1, 2))[1]
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    out = graph.call_function(_reads_a_spec, (x, graph.get_attr("_tree_spec_constant0")))
    graph.output((out,))
    t = torch.randn(3)
    path = write_repro(GraphCase(torch.fx.GraphModule(root, graph), [GraphInput("x", t, TensorMeta.of(t))]), tmp_path, stage="eager")
    with pytest.raises(CorruptRecord, match="cannot be rebuilt.*_tree_spec_constant0"):
        load_repro(path)


def test_a_repros_data_file_is_found_beside_it_and_without_a_file_in_the_working_directory(tmp_path, monkeypatch):
    """``python /elsewhere/repro.py`` reads the file beside the repro; pasted into a notebook or ``exec``'d (no
    ``__file__``, hunt h's check), the one in the working directory, not a NameError."""
    import pathlib

    from minifier.repro.inputs import data_function

    beside, cwd = tmp_path / "run", tmp_path / "cwd"
    beside.mkdir(), cwd.mkdir()
    torch.save({"input:x": torch.ones(2)}, beside / "inputs-1.pt")
    torch.save({"input:x": torch.zeros(3)}, cwd / "inputs-1.pt")
    source = data_function("inputs-1.pt")
    monkeypatch.chdir(cwd)
    as_a_file = {"torch": torch, "pathlib": pathlib, "__file__": str(beside / "repro.py")}
    exec(source, as_a_file)
    assert as_a_file["load_data"]()["input:x"].tolist() == [1.0, 1.0]
    pasted = {"torch": torch, "pathlib": pathlib}
    exec(source, pasted)
    assert pasted["load_data"]()["input:x"].tolist() == [0.0, 0.0, 0.0]
