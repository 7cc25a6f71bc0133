"""The minifier's building blocks: signatures, the accuracy rule, the worker, repro files, the API."""

import ast
import functools
import math
import operator
import os
import subprocess
import sys
import threading
from dataclasses import replace

import pytest
import torch

import minifier
from minifier.unit.case import GraphCase, GraphId, GraphInput, TensorMeta, clone_tensor
from minifier.unit.runtime import rand_tensor
from pt2kit.errors import CorruptRecord
from minifier.unit.accuracy import accuracy_category, accuracy_divergence
from pt2kit.signature import innermost_exception, normalize_message, signature_of_exception
from minifier.isolation.worker import Worker
from minifier.repro.files import load_repro, trace_module, write_repro
from minifier.repro.writer import render

from support.paths import REPO

# --------------------------------------------------------------------------- #
# Signatures
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("message", "normalized"),
    [
        ("C++ compile error\n\nCommand:\ng++ /tmp/x/abc.cpp", "C++ compile error"),
        ("bad pointer 0x7ffd3a2b in /tmp/torchinductor_root/xk/cxk2tiw6ldlulrtgaorpqlhfk.cpp:78", "bad pointer 0x? in <path>:78"),
        ("arg0_1 and add_3 into buf12 via tmp3 for s0", "arg_# and add_# into buf# via tmp# for s#"),
        ("expected float32 but got float64 for shape [4, 16]", "expected float32 but got float64 for shape [4, 16]"),
    ],
)
def test_messages_are_normalized_but_keep_what_distinguishes_bugs(message, normalized):
    assert normalize_message(message) == normalized


def test_wrapped_backend_errors_keep_their_own_signature():
    def broken_backend(gm, example_inputs):
        raise ValueError("cannot lower aten.sin at 0xdeadbeef")

    with pytest.raises(Exception) as info:
        torch.compile(lambda x: x.sin(), backend=broken_backend)(torch.ones(3))
    assert type(info.value).__name__ == "BackendCompilerFailed"
    assert isinstance(innermost_exception(info.value), ValueError)
    signature = signature_of_exception(info.value).signature
    assert (signature.kind, signature.exception, signature.message) == ("compile_error", "ValueError", "cannot lower aten.sin at 0x?")


def test_a_cpp_compile_error_is_known_by_the_compilers_first_diagnostic():
    from torch._inductor.exc import CppCompileError

    output = (
        "/tmp/torchinductor_u/hq/chq.main.cpp: In function 'void kernel(const at::Half*)':\n"
        "/tmp/torchinductor_u/hq/chq.main.cpp:115:26: error: conflicting declaration \u2018auto at_Half_tmp_acc0_vec\u2019\n"
        "/tmp/torchinductor_u/hq/chq.main.cpp:124:26: error: something after it\n"
    )
    first = signature_of_exception(CppCompileError(["g++", "x.cpp"], output)).signature
    assert first.message == "C++ compile error | error: conflicting declaration 'auto at_Half_tmp_acc#_vec'"
    renumbered = signature_of_exception(CppCompileError(["g++", "y.cpp"], output.replace("acc0", "acc3").replace(":115:", ":9:"))).signature
    assert renumbered == first
    other = signature_of_exception(CppCompileError(["g++", "x.cpp"], "/t/a.cpp:3:1: error: no matching function for call to 'convert<double, 2, int32_t, 1>'")).signature
    assert other != first and other.message.endswith("convert<double, 2, int32_t, 1>'")


STICKY = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
)


def test_a_sticky_device_error_is_one_crash_wherever_and_however_it_surfaces():
    """Kernels run asynchronously: the same illegal access surfaces in a compile (autotuning ran the kernel)
    or at a later call, as a RuntimeError or an AcceleratorError. Every later call of that process fails."""
    from pt2kit.signature import DEVICE_ERROR, Signature, mark_compile_phase, shows_failure

    in_compile = RuntimeError(STICKY)
    mark_compile_phase(in_compile)
    at_run = getattr(torch, "AcceleratorError", RuntimeError)(STICKY)
    wrapped = RuntimeError("while handling the output")
    wrapped.__cause__ = at_run
    signatures = {signature_of_exception(e).signature for e in (in_compile, at_run, wrapped)}
    assert signatures == {Signature("crash", DEVICE_ERROR, STICKY.splitlines()[0])}
    assert signature_of_exception(RuntimeError("CUDA error: device-side assert triggered")).signature not in signatures
    assert signature_of_exception(RuntimeError("CUDA error: out of memory")).signature.kind == "runtime_error"  # (not sticky)

    (target,) = signatures
    shown = "Traceback (most recent call last):\n  ...\ntorch.AcceleratorError: " + STICKY + "\n"
    assert shows_failure(1, shown, target) and shows_failure(-6, shown, target)
    assert not shows_failure(0, shown, target) and not shows_failure(None, shown, target)
    assert not shows_failure(1, shown.replace("an illegal memory access was encountered", "device-side assert triggered"), target)


def test_an_error_of_tritons_compiler_is_a_compile_error_also_at_a_kernels_first_launch():
    from pt2kit.signature import mark_compile_phase

    # (Triton's own class, as its compiler raises it where no GPU is at hand to make it for real)
    CompilationError = type("CompilationError", (Exception,), {"__module__": "triton.compiler.errors"})
    error = CompilationError("at 12:8: unsupported tensor index")
    assert signature_of_exception(error).signature.kind == "compile_error"
    at_launch = RuntimeError("launch failed")  # an error raised from it is of the compile too
    at_launch.__cause__ = error
    assert signature_of_exception(at_launch).signature.kind == "compile_error"
    assert signature_of_exception(RuntimeError("launch failed")).signature.kind == "runtime_error"
    compiled_for_launch = CompilationError("at 12:8: unsupported tensor index")
    mark_compile_phase(compiled_for_launch)
    assert signature_of_exception(compiled_for_launch).signature == signature_of_exception(error).signature


def test_plain_exception_is_a_runtime_error():
    signature = signature_of_exception(IndexError("index 7 is out of bounds")).signature
    assert (signature.kind, signature.exception) == ("runtime_error", "IndexError")


# --------------------------------------------------------------------------- #
# Accuracy against fp64
# --------------------------------------------------------------------------- #


def test_accuracy_forgives_eager_rounding_but_not_a_real_error():
    generator = torch.Generator().manual_seed(0)
    truth = torch.randn(2000, dtype=torch.float64, generator=generator)

    def rounded(scale):  # truth plus rounding noise of a given size, in float32
        return (truth + scale * 1e-3 * torch.randn(2000, dtype=torch.float64, generator=generator)).float()

    eager, compiled, wrong = [rounded(1)], [rounded(1)], [rounded(10)]
    assert not torch.allclose(eager[0], compiled[0], atol=1e-4, rtol=1e-4)  # a fixed tolerance would flag it
    assert accuracy_divergence(eager, compiled, [truth]) is None  # no worse than eager's own error
    assert accuracy_divergence(eager, wrong, [truth]).startswith("output 0: RMSE vs fp64")


def test_accuracy_catches_nan_shape_and_integer_mismatches():
    ones = torch.ones(4)
    assert "non-finite" in accuracy_divergence([ones], [torch.tensor([1.0, float("nan"), 1.0, 1.0])], [ones.double()])
    assert "float32(2,)" in accuracy_divergence([ones], [torch.ones(2)], [ones.double()])
    ints = torch.arange(4)
    assert accuracy_divergence([ints], [ints + torch.tensor([0, 0, 1, 0])], [ints]) == "output 0: 1 of 4 values differ from eager"
    # a NaN or an inf that eager and fp64 agree on is the answer: a compiler that swallows it is wrong
    # (softshrink's NaN -> 0), one that keeps it is right, and one eager alone gives is eager's own error
    nan_first = torch.tensor([float("nan"), 1.0, float("inf"), 0.5])
    swallowed = accuracy_divergence([nan_first], [torch.tensor([0.0, 1.0, float("inf"), 0.5])], [nan_first.double()])
    assert swallowed == "output 0: 1 values differ where eager and fp64 agree on a non-finite one"
    assert accuracy_category(swallowed) == "non-finite values"
    assert accuracy_divergence([nan_first], [nan_first.clone()], [nan_first.double()]) is None
    assert "non-finite" in accuracy_divergence([nan_first], [nan_first.nan_to_num(posinf=1.0)], [nan_first.double()])
    overflowed = torch.tensor([float("inf"), 1.0])  # eager's fp16 overflow, say: fp64 is finite, a finite result is fine
    assert accuracy_divergence([overflowed], [torch.tensor([7e4, 1.0])], [torch.tensor([7e4, 1.0], dtype=torch.float64)]) is None


def test_a_compiled_run_is_judged_from_its_own_random_state_and_leaves_the_programs_alone():
    # --accuracy under capture: a compiled run of a graph with dropout, judged against eager
    # and fp64 runs that start from the random state the compiled run started from; the
    # program's own random stream goes on as if nothing had been judged
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.unit.accuracy import judge_compiled_run

    def f(x):
        return (torch.nn.functional.dropout(x, 0.5, training=True) * 3,)

    x = torch.randn(64)
    gm = make_fx(f)(x)
    torch.manual_seed(7)
    state = torch.random.get_rng_state()
    right = gm(x)  # what a correct compiler returns from that state
    after = torch.random.get_rng_state()
    assert judge_compiled_run(gm, [x], right, rng=state) is None
    assert torch.equal(torch.random.get_rng_state(), after)
    wrong = judge_compiled_run(gm, [x], [right[0] + 0.5], rng=state)
    # (float64 draws other random numbers: eager, from the same state, is the reference)
    assert wrong is not None and wrong.signature.kind == "accuracy" and "no fp64 reference" in wrong.details
    assert torch.equal(torch.random.get_rng_state(), after)


# --------------------------------------------------------------------------- #
# The worker
# --------------------------------------------------------------------------- #


def _spin() -> None:
    while True:
        pass


@pytest.mark.matrix
@pytest.mark.e2e  # pt2kit's worker processes (a zygote, its children, a program)
def test_worker_returns_values_and_survives_crashes_and_hangs(tmp_path):
    worker = Worker(log_dir=tmp_path, timeout=3)
    try:
        assert worker.run(functools.partial(operator.mul, 6, 7)).value == 42
        assert worker.run(os.abort).failure.signature.exception == "SIGABRT"
        # the crash's Python stack lands in that query's log
        assert "Fatal Python error: Aborted" in (tmp_path / "0002-query.log").read_text()
        hung = worker.run(_spin)
        assert hung.failure.signature.kind == "timeout" and hung.seconds < 10
        assert worker.run(functools.partial(os._exit, 3)).failure.signature.message == "process exited with status 3"
        # what the child inherited is frozen: its collections skip torch's heap (and leave its pages shared)
        import gc

        assert worker.run(gc.get_freeze_count).value > 10_000
    finally:
        worker.close()


@pytest.mark.matrix
@pytest.mark.e2e  # compiles in pt2kit's worker processes
def test_a_warm_worker_has_pt2kit_query_code_loaded_before_a_child_unpickles_its_query(tmp_path):
    # Every reducer query pickles a function of minifier.minification by name: a cold
    # zygote made each child import some thirty pt2kit modules again (0.1 s a query
    # without a bytecode cache). The query here names a builtin, so unpickling it
    # imports nothing: the module is there only if the warm-up preloaded it.
    worker = Worker(log_dir=tmp_path, timeout=60)
    try:
        loaded = functools.partial(eval, "'minifier.minification' in __import__('sys').modules")
        assert worker.run(loaded).value is False  # (a cold zygote: not yet)
        worker.warm_up("eager", wait=True)
        assert worker.run(loaded).value is False  # warm, but nobody named it
        worker.warm_up("eager", preload=["minifier.minification"], wait=True)
        assert worker.run(loaded).value is True
    finally:
        worker.close()


def _training_backward_in_a_child() -> float:
    x = torch.randn(3, requires_grad=True)
    torch.compile(lambda t: t.sin().sum(), backend="aot_eager")(x).backward()
    return float(x.grad.abs().sum())


def test_the_zygote_refuses_to_fork_once_cuda_was_initialized_in_it(monkeypatch):
    """A CUDA query runs in its forked child, which initializes CUDA itself; a zygote that had
    initialized CUDA would fork children that cannot use it. (Simulated: no GPU here.)"""
    from minifier.isolation import zygote

    monkeypatch.setattr(zygote, "native_thread_count", lambda: 1)
    assert zygote.fork_unsafe() is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert "initialized CUDA" in zygote.fork_unsafe()
    monkeypatch.setattr(zygote, "native_thread_count", lambda: 3)
    assert "runs 3 threads" in zygote.fork_unsafe()


@pytest.mark.matrix
@pytest.mark.e2e  # compiles in pt2kit's worker processes
def test_a_warm_worker_stays_fork_safe_for_autograd_on_this_build(tmp_path):
    # A CUDA build (what a plain `pip install torch` gives, GPU or not) starts autograd's
    # device threads at the first use of autograd after a compile; a zygote that warmed
    # up with a training step then restarted cold, and its children could not run
    # backward. The warm-up must leave one thread, and a child must run a training step.
    from minifier.isolation.warmup import autograd_is_fork_safe

    probe = (
        "import os, torch\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "torch.compile(lambda t: t.sin().sum(), backend='aot_eager')(x).backward()\n"
        "names = [open(f'/proc/self/task/{t}/comm').read() for t in os.listdir('/proc/self/task')]\n"
        "print(sum(n.startswith('pt_autograd') for n in names))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (int(done.stdout.split()[-1]) == 0) == autograd_is_fork_safe(), done.stdout + done.stderr
    worker = Worker(log_dir=tmp_path, timeout=120)
    try:
        worker.warm_up("eager", wait=True)
        assert worker.run(_training_backward_in_a_child).value > 0
        assert not any("cold" in note or "restarted" in note for note in worker.notes), worker.notes
    finally:
        worker.close()


@pytest.mark.matrix
@pytest.mark.e2e  # pt2kit's worker processes (a zygote, its children, a program)
def test_the_timeline_puts_each_query_of_a_batch_where_it_ended(tmp_path):
    # Queries asked side by side end apart; the report's timeline ("where the time
    # went") is their critical path only if each ends where it did, not where the
    # batch did.
    import time

    from minifier.isolation.session import Session

    session = Session("timeline", out=tmp_path / "runs", timeout=60, quiet=True)
    try:
        session.query_all([(functools.partial(time.sleep, 0.1), "short"), (functools.partial(time.sleep, 1.5), "long")])
        ended = {step.step: step.ended for step in session.timeline.steps}
        assert ended["long"] - ended["short"] >= 1.0, session.timeline.steps
    finally:
        session.close()


@pytest.mark.parametrize(
    ("program", "backend", "warms_inductor"),
    [
        ("torch.compile(f, backend='planted_runtime_error')(x)", None, False),
        ("def mine(gm, ex):\n    return gm\ntorch.compile(f, backend=mine)(x)\nm.compile(backend=lambda gm, ex: gm)", None, False),
        ("torch.compile(f, backend=make_backend('x'))(x)", None, False),
        ("torch.compile(f)(x)", None, True),  # the default backend
        ("torch.compile(f, backend='eager')(x)\ntorch.compile(g, mode='max-autotune')(x)", None, True),
        ("torch.compile(f, backend='inductor')(x)", None, True),
        ("@torch.compile\ndef g(x):\n    return x\ntorch.compile(f, backend='eager')(x)", None, True),
        ("torch.compile(f, backend=args.backend)(x)", None, True),  # could be anything
        ("import train\ntrain.main()", None, True),  # its modules compile
        ("torch.compile(f, backend='eager'", None, True),  # does not parse
        ("torch.compile(f)(x)", "aot_eager", False),  # --backend decides
        ("torch.compile(f, backend='eager')(x)", "inductor", True),
    ],
)
def test_the_worker_warms_inductor_up_unless_the_program_plainly_compiles_with_another_backend(
    tmp_path, program, backend, warms_inductor
):
    from minifier.capture.program import ProgramRun

    script = tmp_path / "program.py"
    script.write_text(program + "\n")
    assert ProgramRun(script, backend=backend).warms_inductor is warms_inductor


def _child_threads() -> tuple[int, int, str | None]:
    import numpy

    return torch.get_num_threads(), int(numpy.ones((64, 64)).dot(numpy.ones(64)).sum()), os.environ.get("OMP_NUM_THREADS")


@pytest.mark.matrix
@pytest.mark.e2e  # pt2kit's worker processes (a zygote, its children, a program)
def test_worker_works_from_a_process_running_threads_openmp_and_numpy(tmp_path):
    """A training job calls pt2kit: OpenMP pool live, a data-loader thread, numpy loaded."""
    numpy = pytest.importorskip("numpy")
    torch.set_num_threads(2)
    torch.randn(256, 256) @ torch.randn(256, 256)  # starts the OpenMP pool
    numpy.ones((128, 128)) @ numpy.ones((128, 128))  # and OpenBLAS's
    release = threading.Event()
    loader = threading.Thread(target=release.wait, name="data-loader")
    loader.start()
    worker = Worker(log_dir=tmp_path, timeout=60, threads=3)
    try:
        threads, total, omp = worker.run(_child_threads).value
        assert (threads, total) == (3, 64 * 64)
        assert omp == os.environ.get("OMP_NUM_THREADS")  # the program's environment, not the pinned one
    finally:
        release.set()
        loader.join()
        worker.close()
        torch.set_num_threads(1)


class _CountingWorker(Worker):
    """A real worker that remembers the labels it was asked to run."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.labels: list[str] = []

    def start(self, fn, *, timeout=None, label="query", threads=None):
        self.labels.append(label)
        return super().start(fn, timeout=timeout, label=label, threads=threads)


@pytest.mark.matrix
@pytest.mark.e2e  # pt2kit's worker processes (a zygote, its children, a program)
def test_a_session_sends_every_query_to_the_executor_it_is_given(tmp_path):
    from minifier.isolation.executor import Executor
    from minifier.isolation.session import Session

    executor = _CountingWorker(log_dir=tmp_path / "logs", timeout=30)
    assert isinstance(executor, Executor)
    session = Session("exec", out=tmp_path / "runs", quiet=True, executor=executor)
    try:
        assert session.query(functools.partial(operator.add, 2, 3), "one").value == 5
        both = session.query_all([(functools.partial(operator.mul, 2, 3), "two"), (os.abort, "three")])
        assert both[0].value == 6 and both[1].failure.signature.exception == "SIGABRT"
        assert executor.labels == ["one", "two", "three"] and session.queries == 3
    finally:
        session.close()


@pytest.mark.matrix
@pytest.mark.e2e  # pt2kit's worker processes (a zygote, its children, a program)
def test_a_started_program_is_run_once_and_one_nobody_waits_for_is_killed(tmp_path):
    # minify run starts the program before its own process imports torch; the capture
    # then waits for that very process instead of starting a second one, a command with
    # other options starts afresh, and a program nobody waits for dies with the session
    import time

    from minifier.isolation.session import Session

    runs = tmp_path / "runs.txt"
    command = [sys.executable, "-c", f"open({str(runs)!r}, 'a').write('ran\\n')"]
    log = tmp_path / "logs" / "program.log"
    session = Session("prog", out=tmp_path / "out", quiet=True)
    try:
        session.start_program(command, log=log)
        assert session.run_program(command, "the program", log=log) is None
        assert runs.read_text() == "ran\n"
        other = [sys.executable, "-c", f"import time; time.sleep(2); open({str(runs)!r}, 'a').write('other\\n')"]
        session.start_program(other, log=log)
        assert session.run_program(command, "the program", log=log) is None
        time.sleep(3)
        assert runs.read_text() == "ran\nran\n"  # not the one started with other options: that one was killed
        sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
        session.start_program(sleeper, log=log)
        (process,) = session.programs.started()
    finally:
        session.close()
    deadline = time.monotonic() + 10
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.returncode == -9


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
    loaded = load_repro(path)
    assert loaded.case.gm.code == case.gm.code  # the full() call was not folded into a constant
    assert loaded.case.op_names() == ["aten.full.default", "operator.matmul", "torch.relu", "operator.mul", "operator.add"]
    x_back, w_back, n_back = loaded.case.inputs
    assert x_back.value.stride() == (0, 1) and torch.equal(x_back.value, x)
    assert w_back.seed == 7 and w_back.meta.requires_grad and n_back.value == 3
    assert loaded.case.config == case.config
    # the data file holds only the real tensor, and loads with weights_only
    (data_file,) = tmp_path.glob("inputs-*.pt")
    assert set(torch.load(data_file, weights_only=True)) == {"input:x"}


def test_repro_imports_only_torch_stdlib_and_user_modules(tmp_path):
    x = torch.randn(4, 5)
    case = GraphCase(trace_module(Model()), [GraphInput("x", x, TensorMeta.of(x)), GraphInput("w", x.t(), TensorMeta.of(x.t())), GraphInput("n", 2, None)], modules=[("mylib", "/src")])
    tree = ast.parse(render(case, stage="inductor", accuracy=True))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"torch", "sys", "pathlib", "mylib"}


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
    x = torch.randn(4, 5)
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


# --------------------------------------------------------------------------- #
# Carrying the user's definitions
# --------------------------------------------------------------------------- #

SCRIPT_WITH_A_LIBRARY = '''
import torch
from torch.library import Library
test_ns = "_pt2kit_slice"
lib = Library(test_ns, "FRAGMENT")
lib.define("foo(Tensor a) -> Tensor")
def foo_impl(a):
    return a * 2
lib.impl("foo", foo_impl, "CPU")
model = torch.nn.Linear(2, 2)
print(torch.ops._pt2kit_slice.foo(torch.ones(2)))
'''


def test_a_custom_op_whose_namespace_is_in_a_variable_is_carried_with_its_library():
    from minifier.capture.extract import slice_script

    carried = slice_script(SCRIPT_WITH_A_LIBRARY, (), ["_pt2kit_slice"])
    assert 'lib = Library(test_ns, "FRAGMENT")' in carried and 'lib.impl("foo", foo_impl, "CPU")' in carried
    assert "def foo_impl" in carried and "model =" not in carried and "print(" not in carried
    namespace: dict = {}
    exec(compile(carried, "<carried>", "exec"), namespace)  # the op exists after the slice alone runs
    assert torch.equal(torch.ops._pt2kit_slice.foo(torch.ones(2)), torch.full((2,), 2.0))


def test_carried_definitions_that_set_config_leave_the_reading_process_config_as_it_was():
    """A script's pass class is carried with the line that assigns it to Inductor's config; reading the repro (pt2kit's
    own process, a query's child, a test calling pt2kit in-process) binds the class but sets no config: the case's
    apply_config() does."""
    import torch._inductor.config as inductor_config

    from minifier.repro.files import exec_repro

    block = (
        "class PassCarriedForTheConfigTest:\n"
        "    def __call__(self, graph):\n"
        "        pass\n"
        "\n"
        "\n"
        "torch._inductor.config.post_grad_custom_post_pass = PassCarriedForTheConfigTest()"
    )
    source = f"import torch\nimport torch._inductor.config\n\n{block}\n\nREAD = True\n"
    before = inductor_config.post_grad_custom_post_pass
    namespace = exec_repro(source, meta={"definitions": block})
    assert namespace["READ"] and isinstance(namespace["PassCarriedForTheConfigTest"], type)
    assert inductor_config.post_grad_custom_post_pass is before


class Dropout(torch.nn.Module):
    def forward(self, x):
        return (torch.nn.functional.dropout(x, 0.5, training=True) * 2,)


@pytest.mark.matrix
@pytest.mark.e2e  # compiles in pt2kit's worker processes
def test_an_accuracy_repro_of_a_random_graph_runs_every_side_from_one_seed(tmp_path):
    # eager and compiled each draw their dropout mask: from different RNG states they differ
    # on a healthy backend, and a strict (bit for bit) repro would report a bug that is not there
    x = torch.randn(64, 64)
    case = GraphCase(trace_module(Dropout()), [GraphInput("x", x, TensorMeta.of(x))], backend="aot_eager")
    path = write_repro(case, tmp_path, stage="aot_eager", accuracy=True, strict=True)
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "no divergence" in ran.stdout, ran.stderr[-2000:]


class _CosHidden(torch.nn.Module):
    def forward(self, x):
        return (x.cos() * 0.0 + x,)  # whatever cos computes, the output never shows it


class _CosAlone(torch.nn.Module):
    def forward(self, x):
        return (x.cos(),)


def test_a_divergence_the_original_outputs_cannot_see_is_not_the_failure_and_only_it_reads_the_original():
    # A candidate's wrong cos is the bug only if it reaches the original's outputs: here
    # it is multiplied by zero, so it is another failure. Reading the original graph is
    # work that grows with it; a candidate that does not diverge never pays for it.
    import planted  # noqa: F401  registers planted_accuracy (its compiled cos is off by a half)
    from minifier.stages.run import UNSEEN_MESSAGE, Reach, run_case

    x = torch.randn(4, 5)
    origin = GraphCase(trace_module(_CosHidden()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    candidate = GraphCase(trace_module(_CosAlone()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    reads: list[int] = []

    def load_origin():
        reads.append(1)
        return origin

    healthy = run_case(candidate, "eager", accuracy=True, reach=Reach(load_origin, ("cos",)))
    assert healthy.failure is None and reads == []
    hidden = run_case(candidate, "planted_accuracy", accuracy=True, reach=Reach(load_origin, ("cos",)))
    assert hidden.failure is not None and hidden.failure.signature.message == UNSEEN_MESSAGE and reads == [1]
    seen = run_case(candidate, "planted_accuracy", accuracy=True)  # (no origin to ask: the candidate is the program)
    assert seen.failure is not None and seen.failure.signature.kind == "accuracy" and seen.failure.signature.message != UNSEEN_MESSAGE


def test_the_originals_reference_outputs_are_computed_by_the_first_diverging_query_only(tmp_path, monkeypatch):
    # They are the same for every candidate: later queries read them back instead of
    # running the original in working precision and in float64 again.
    import planted  # noqa: F401
    import minifier.stages.run as stages

    computed: list[int] = []
    real = stages.reference_outputs
    monkeypatch.setattr(stages, "reference_outputs", lambda *a, **k: computed.append(1) or real(*a, **k))
    x = torch.randn(4, 5)
    origin = GraphCase(trace_module(_CosHidden()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    candidate = GraphCase(trace_module(_CosAlone()), [GraphInput("x", x, TensorMeta.of(x))], backend="planted_accuracy")
    reach = stages.Reach(lambda: origin, ("cos",), tmp_path / "references.pt")
    verdicts = [stages.run_case(candidate, "planted_accuracy", accuracy=True, reach=reach).failure.signature.message for _ in range(2)]
    assert verdicts == [stages.UNSEEN_MESSAGE] * 2 and computed == [1]
    (tmp_path / "references.pt").write_bytes(b"not a tensor file")  # a damaged file is computed again
    assert stages.run_case(candidate, "planted_accuracy", accuracy=True, reach=reach).failure.signature.message == stages.UNSEEN_MESSAGE
    assert computed == [1, 1]


def _wrong_cos_case(fn, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [f"{n}_1" for n in ("x", "y")[: len(inputs)]]
    return GraphCase(make_fx(fn)(*inputs), [GraphInput(n, t, TensorMeta.of(t)) for n, t in zip(names, inputs)], backend="planted_wrong_cos")


def _in_process_query(origin, asked=None, keep_diverging=True):
    """The reducer's query, run here: each candidate's cut inputs from the original, through planted_wrong_cos."""
    from minifier.stages.profile import realize
    from minifier.stages.run import run_case

    def query(candidates):
        if asked is not None:
            asked.append(len(candidates))
        outcomes = [run_case(realize(c, origin), "planted_wrong_cos", accuracy=True) for c, _, _ in candidates]
        return outcomes if keep_diverging else [replace(o, diverging=()) for o in outcomes]

    return query


def test_an_accuracy_query_says_which_outputs_are_wrong_and_the_reducer_keeps_the_first_of_them():
    # Only cos is compiled wrong. The query names the outputs that diverge, each judged
    # alone: cos, and exp, which reads it. The narrowed candidate keeps cos only: exp
    # inherits its error, sin is right, and rand (kept by dead-code removal, for the
    # random numbers later ops would draw) is read by nothing kept.
    import planted  # noqa: F401  registers planted_wrong_cos
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from minifier.stages.run import run_case

    aten = torch.ops.aten

    def g(x, y):
        c = aten.cos.default(x)
        aten.rand.default([4])
        return (c, aten.exp.default(c), aten.sin.default(y))

    case = _wrong_cos_case(g, torch.randn(4), torch.randn(4))
    outcome = run_case(case, "planted_wrong_cos", accuracy=True)
    assert outcome.failure is not None and outcome.failure.signature.kind == "accuracy"
    assert outcome.diverging == (0, 1)

    reducer = Reducer(case, profile_case(case), outcome.failure.signature, _in_process_query(case))
    assert "rand" in reducer.best.kept and reducer.narrowed(reducer.best) is None  # (not asked yet)
    assert reducer.consider(reducer.best)
    narrowed = reducer.narrowed(reducer.best)
    assert narrowed is not None and (narrowed.kept, narrowed.outputs) == (("cos",), ("cos",))
    assert reducer.consider(narrowed) and reducer.best == narrowed
    assert reducer.narrowed(narrowed) is None  # every output of it diverges first-hand


def test_a_sample_half_with_a_wrong_answer_is_narrowed_in_one_query_not_halved():
    # 60 nodes: sin, exp, tanh, sigmoid and neg in turn, with a cos (compiled wrong) and
    # an abs that reads it. The sample's failing half holds neg, sigmoid, cos and abs,
    # of which cos and abs diverge, and abs only through cos: one query on cos ends it,
    # where halving took two rounds more.
    import planted  # noqa: F401
    from minifier.reduce.passes import sample_op_kinds
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from minifier.stages.run import run_case

    aten = torch.ops.aten
    kinds = [aten.sin.default, aten.exp.default, aten.tanh.default, aten.sigmoid.default, aten.neg.default]
    ops = [kinds[i % 5] for i in range(60)]
    ops[37], ops[38] = aten.cos.default, aten.abs.default
    case = _chain(ops, torch.randn(4, 4) * 0.1)
    case = case.replace(backend="planted_wrong_cos")
    target = run_case(case, "planted_wrong_cos", accuracy=True).failure.signature
    asked = {True: [], False: []}
    for keep in (True, False):
        reducer = Reducer(case, profile_case(case), target, _in_process_query(case, asked[keep], keep_diverging=keep))
        sample_op_kinds(reducer)
        assert reducer.best.kept == ("cos",), (keep, reducer.best.kept)
    assert asked[True] == [2, 1], asked  # the halves, then cos alone
    assert asked[False] == [2, 2, 2], asked


def _relu_judge(target):
    """A query that fails exactly when the candidate still computes a relu (the reducer's logic alone, in process)."""
    from pt2kit.signature import Failure
    from minifier.stages.run import Outcome

    def query(candidates):
        return [Outcome("judge", Failure(target) if "aten.relu.default" in case.op_names() else None, 0.0) for case, _, _ in candidates]

    return query


def test_halving_keeps_a_multi_output_node_with_its_parts_and_stops():
    # relu feeds max_pool2d_with_indices, whose two parts come out through getitems. A
    # split between the pool and its getitems would leave the pool (and the relu it
    # reads) dead code in both halves; the split moves to the nearest point that keeps
    # them together, either way (ResNet's last four nodes need "relu | pool and parts").
    # When no split can keep the pool whole, the halving stops (it used to spin there).
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.reduce.passes import _keep_failing_half, _split_point
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Signature

    def f(x):
        y = torch.ops.aten.relu.default(x)
        pooled, indices = torch.ops.aten.max_pool2d_with_indices.default(y, [1, 1])
        return (pooled.cos(), indices)

    def pool_only(x):
        return torch.ops.aten.max_pool2d_with_indices.default(x, [1, 1])

    x = torch.randn(1, 2, 4, 4)
    target = Signature("compile_error", "RuntimeError", "relu")

    def reducer_for(fn):
        case = GraphCase(make_fx(fn)(x), [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor")
        return Reducer(case, profile_case(case), target, _relu_judge(target))

    reducer = reducer_for(f)
    kept = reducer.best.kept
    assert [n.split("_")[0] for n in kept] == ["relu", "max", "getitem", "getitem", "cos"], kept
    assert [_split_point(reducer, kept, at) for at in range(1, 5)] == [1, 1, 4, 4]  # never 2 or 3
    assert _split_point(reducer, kept[:4], 2) == 1  # relu | the pool and its parts

    _keep_failing_half(reducer)
    assert [n.split("_")[0] for n in reducer.best.kept] == ["relu"]
    assert reducer.queries == 2  # one round: both halves side by side

    pool = reducer_for(pool_only)
    assert _split_point(pool, pool.best.kept, 1) == len(pool.best.kept) == 3
    _keep_failing_half(pool)
    assert pool.queries == 0 and len(pool.best.kept) == 3


def _chain(ops, x):
    """A graph applying ``ops`` (aten overloads, one argument each) in turn, every result returned."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(t):
        outs = []
        for op in ops:
            t = op(t)
            outs.append(t)
        return tuple(outs)

    return GraphCase(make_fx(f)(x), [GraphInput("t_1", x, TensorMeta.of(x))], backend="inductor")


def test_a_large_graph_is_asked_as_the_two_halves_of_its_sample_not_the_sample_first():
    # 60 nodes of 6 kinds, one relu among them: the sample (one node per kind) is never
    # asked whole, its halves go out first, side by side, and halving ends at the relu.
    from minifier.reduce.passes import sample_op_kinds
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Signature

    aten = torch.ops.aten
    kinds = [aten.sin.default, aten.cos.default, aten.exp.default, aten.tanh.default, aten.sigmoid.default]
    ops = [kinds[i % 5] for i in range(59)]
    ops.insert(41, aten.relu.default)
    case = _chain(ops, torch.randn(4, 4))
    target = Signature("compile_error", "RuntimeError", "relu")
    asked: list[list[int]] = []
    judge = _relu_judge(target)

    def query(candidates):
        asked.append([c.node_count for c, _, _ in candidates])
        return judge(candidates)

    reducer = Reducer(case, profile_case(case), target, query)
    sample_op_kinds(reducer)
    assert [n.split("_")[0] for n in reducer.best.kept] == ["relu"]
    assert asked[0] == [3, 3] and all(len(batch) == 2 for batch in asked), asked  # never the 6-node sample
    assert reducer.queries == 2 * len(asked) <= 6


def test_when_neither_half_of_the_sample_fails_the_whole_sample_is_asked():
    # The failure needs a sin and a relu to meet: neither half of the sample has both,
    # so the sample is asked whole, and stays the best for the searches that follow.
    from minifier.reduce.passes import sample_op_kinds
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    aten = torch.ops.aten
    kinds = [aten.sin.default, aten.cos.default, aten.exp.default, aten.tanh.default]
    ops = [kinds[i % 4] for i in range(56)] + [aten.relu.default]
    case = _chain(ops, torch.randn(4, 4))
    target = Signature("compile_error", "RuntimeError", "sin meets relu")

    def query(candidates):
        return [Outcome("judge", Failure(target) if {"aten.sin.default", "aten.relu.default"} <= set(c.op_names()) else None, 0.0) for c, _, _ in candidates]

    reducer = Reducer(case, profile_case(case), target, query)
    sample_op_kinds(reducer)
    assert reducer.queries == 3 and len(reducer.best.kept) == 5


def test_inputs_already_small_keep_their_sizes():
    # A failure that needs the sizes it has (a kernel big enough to run threaded): a
    # 2x16x32 input is not shrunk at all (no query); a large input is still searched.
    from minifier.reduce.passes import SMALL_INPUTS, shrink_shapes
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    target = Signature("crash", "SIGABRT", "process killed by SIGABRT")

    def reducer_for(shape):
        case = _chain([torch.ops.aten.relu.default], torch.randn(*shape))
        query = lambda candidates: [Outcome("judge", Failure(target) if math.prod(c.inputs[0].meta.shape) >= 1024 else None, 0.0) for c, _, _ in candidates]  # noqa: E731
        reducer = Reducer(case, profile_case(case), target, query)
        reducer.best = replace(reducer.best, random=frozenset({"t_1"}))
        return reducer

    small = reducer_for((2, 16, 32))
    assert 2 * 16 * 32 <= SMALL_INPUTS
    shrink_shapes(small)
    assert small.queries == 0 and not small.best.shapes

    large = reducer_for((2, 64, 64))
    shrink_shapes(large)
    assert large.queries > 1 and dict(large.best.shapes)["t_1"] != (2, 64, 64)


@pytest.mark.parametrize(("shape", "ends_at"), [((64, 128), (1, 1)), ((2, 16, 32), (2, 16, 32))])
def test_the_finishing_tries_go_out_together_and_end_the_reduction_in_one_round(shape, ends_at):
    # A one-node graph whose failure needs the config but not the values or sizes: the
    # finishing passes' "everything at once" tries (random, size 1 unless the input is
    # small already, and without config) are one round of two queries, and nothing is
    # asked after it.
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from minifier.reduce.engine import Reducer
    from pt2kit.signature import Failure, Signature
    from minifier.stages.run import Outcome

    key = "cpp.inject_relu_bug_TESTING_ONLY"
    x = torch.randn(*shape)
    case = GraphCase(
        make_fx(lambda x: (torch.ops.aten.relu.default(x),))(x),
        [GraphInput("x_1", x, TensorMeta.of(x))],
        config={"torch._inductor.config": {key: "compile_error"}},
        backend="inductor",
    )
    target = Signature("compile_error", "RuntimeError", "relu")
    rounds: list[list[GraphCase]] = []

    def query(candidates):
        rounds.append([c for c, _, _ in candidates])
        return [Outcome("judge", Failure(target) if key in c.config.get("torch._inductor.config", {}) else None, 0.0) for c, _, _ in candidates]

    reducer = Reducer(case, profile_case(case), target, query)
    best = reducer.run(PASSES)
    assert best.random == {"x_1"} and dict(best.shapes).get("x_1", shape) == ends_at and best.config
    last = rounds[-1]
    assert len(last) == 2 and {bool(c.config) for c in last} == {True, False}
    assert all(c.inputs[0].meta.shape == ends_at for c in last)


def test_a_run_still_going_is_not_resumed_by_a_second_one_beside_it(tmp_path):
    # Two runs of one command into one --out: the second must not resume (and write
    # into) the checkpoint the first is still writing. Once the first is gone, however
    # it ended (here: SIGKILL), its checkpoint is resumable again.
    import json
    import signal

    from minifier.reduce.checkpoint import CHECKPOINT, find_checkpoint, holding

    run = tmp_path / "out" / "run-20260101-000000-model"
    run.mkdir(parents=True)
    (run / CHECKPOINT).write_text(json.dumps({"fingerprint": "same-command", "status": "running"}))
    assert find_checkpoint(tmp_path / "out", "same-command") == run / CHECKPOINT

    with holding(run):
        assert find_checkpoint(tmp_path / "out", "same-command") is None
    assert find_checkpoint(tmp_path / "out", "same-command") == run / CHECKPOINT
    assert not (run / ".running").exists()

    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys, time; from pathlib import Path; from minifier.reduce.checkpoint import holding\nwith holding(Path({str(run)!r})):\n    print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert find_checkpoint(tmp_path / "out", "same-command") is None
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert find_checkpoint(tmp_path / "out", "same-command") == run / CHECKPOINT


def test_a_rank_holds_its_error_while_another_rank_of_its_launcher_is_still_minifying(tmp_path, monkeypatch):
    import time

    from minifier.stages.distributed import MINIFYING, minifying, wait_for_other_ranks

    monkeypatch.setenv("LOCAL_RANK", "0")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    threading.Thread(target=other.wait, daemon=True).start()  # reaped when it ends, as torchrun reaps a rank
    sibling, stranger, mine = (tmp_path / f"run-{name}" for name in ("rank1", "other-job", "rank0"))
    for run in (sibling, stranger, mine):
        run.mkdir()
    (sibling / MINIFYING).write_text(f'{{"pid": {other.pid}, "launcher": {os.getppid()}}}')
    (stranger / MINIFYING).write_text(f'{{"pid": {other.pid}, "launcher": {os.getppid() + 1}}}')
    with minifying(mine):
        assert (mine / MINIFYING).is_file()
        started = time.monotonic()
        wait_for_other_ranks(tmp_path, poll=0.05)  # its own marker is not waited for
    assert not (mine / MINIFYING).exists()
    assert time.monotonic() - started > 0.5 and other.poll() is not None  # waited until the other rank was done

    (sibling / MINIFYING).write_text("not json")  # an unreadable marker is never waited for
    monkeypatch.delenv("LOCAL_RANK")
    started = time.monotonic()
    wait_for_other_ranks(tmp_path, poll=0.05)
    assert time.monotonic() - started < 0.5


def test_a_graph_id_reads_back_what_it_writes_and_knows_its_dynamo_graph():
    for text in ("g0", "g12.forward", "g3.backward2", "g1.inference"):
        assert str(GraphId.parse(text)) == text
    assert GraphId.parse("g3.backward2") == GraphId(3, "backward", 2)
    assert GraphId.parse("g3.backward2").owner == GraphId(3) and str(GraphId(3)) == "g3"
    assert str(GraphId(0, "forward", 1)) == "g0.forward"  # the first of its kind has no number
    for bad in ("", "3", "g", "gx.forward", "g0.", "g0.forward.x"):
        with pytest.raises(ValueError):
            GraphId.parse(bad)
    # a case's label is its id: an aot case names its dynamo graph, not its own index
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    case = GraphCase(gm=gm, inputs=[], boundary="aot", kind="forward", index=5, parent=2)
    assert case.label() == "g2.forward" and case.graph_id.owner == GraphId(2)


def test_every_capture_event_reads_back_as_it_was_written_and_a_cut_line_is_skipped(tmp_path):
    from minifier.capture import events
    from minifier.capture.result import read_capture
    from pt2kit.signature import Signature

    boom = Signature("compile_error", "RuntimeError", "planted: boom")
    written = [
        events.GraphSaved(0, str(tmp_path / "g0" / "repro.py"), {"name": "f"}, 3, "eager", ["/src"]),
        events.AotGraphSaved(0, "forward", str(tmp_path / "g0.forward" / "repro.py")),
        events.Running("g0.forward"),
        events.Ran("g0.forward"),
        events.AotGraphSaved(0, "forward", str(tmp_path / "g0.forward" / "repro.py"), real=True),
        events.AotInputsNotSaved(None, False, 10**9),
        events.Judged("g0.forward", boom, "RMSE 1.0"),
        events.Judged("g1.forward", error="ValueError: no verdict"),
        events.Patches({"torch.sin": "my_sin"}, False),
        events.StateMissing(["lowerings[aten.sin]"]),
        events.Unrecoverable(0, "a lambda"),
        events.FrameLifted(None, error="TypeError: no"),
        events.Failed(boom, "details", 1, where="backend", graph="g0.forward", kernel="cpp_fused_0"),
        events.Exited("3", 1),
        events.Finished(1),
        events.UnknownBackendNamed("no backend 'x'"),
    ]
    assert {type(e) for e in written} == set(events.Event.__args__)  # every kind is exercised
    lines = [events.to_line(e) for e in written]
    assert [events.parse_event(line) for line in lines] == written
    cut = lines[-1][: len(lines[-1]) // 2]
    assert events.parse_events([*lines, cut, '{"event": "from_the_future"}\n']) == written

    (tmp_path / "events.jsonl").write_text("".join(lines[:-3]) + cut)  # a crash mid-write
    read = read_capture(tmp_path)
    assert read.graph_paths == [tmp_path / "g0" / "repro.py"] and read.roots == ["/src"]
    assert read.failure is not None and read.failure.signature == boom and read.failed_graph == "g0.forward"
    assert read.kernel == "cpp_fused_0" and read.ran == {"g0.forward"}
    assert read.judged == {"g0.forward": read.judged["g0.forward"]} and read.judged["g0.forward"].details == "RMSE 1.0"
    assert [g.real for g in read.aot[0]] == [True]  # the latest version of a graph saved twice
    assert read.patches == {"torch.sin": "my_sin"} and not read.patches_carried
    assert read.state_missing == ["lowerings[aten.sin]"] and read.unrecoverable == ["a lambda"]
    assert read.failed_id == GraphId(0, "forward")
    # a graph pt2kit could not name is known by its label, which is no graph id
    (tmp_path / "events.jsonl").write_text(events.to_line(events.Failed(boom, graph="a inference graph")))
    assert read_capture(tmp_path).failed_graph == "a inference graph" and read_capture(tmp_path).failed_id is None


def _fused_judge(target):
    """Fails while some cos reads a value an op computed from a sin (not one fed in): a fusion bug's shape."""
    from pt2kit.signature import Failure
    from minifier.stages.run import Outcome

    def computed_from_sin(node):
        return node.op == "call_function" and (
            node.target is torch.ops.aten.sin.default or any(computed_from_sin(a) for a in node.all_input_nodes)
        )

    def fails(case):
        cos = case.gm.graph.find_nodes(op="call_function", target=torch.ops.aten.cos.default)
        return any(computed_from_sin(a) for n in cos for a in n.all_input_nodes)

    def query(candidates):
        for case, _, _ in candidates:
            case.gm(*[torch.randn(i.meta.shape) for i in case.inputs])  # every candidate built runs
        return [Outcome("judge", Failure(target) if fails(case) else None, 0.0) for case, _, _ in candidates]

    return query


def test_a_node_whose_readers_need_something_computed_is_replaced_by_its_operand():
    # sin -> abs -> cos fails while cos reads what sin computed. No cut removes abs (cos
    # would read an input), and delta debugging leaves all three: replacing abs by its
    # operand, sin, keeps the failure with two ops, and the repro computes cos(sin(x)).
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.reduce.engine import Candidate, Reducer
    from minifier.reduce.passes import PASSES
    from minifier.stages.profile import profile_case
    from pt2kit.signature import Signature

    x = torch.randn(4)
    gm = make_fx(lambda x: torch.cos(torch.abs(torch.sin(x)) * 1))(x)
    case = GraphCase(gm, [GraphInput("x_1", x, TensorMeta.of(x))], backend="inductor")
    target = Signature("compile_error", "RuntimeError", "fused")
    reducer = Reducer(case, profile_case(case), target, _fused_judge(target))
    best = reducer.run(PASSES)
    assert [n.split("_")[0] for n in best.kept] == ["sin", "cos"], best
    assert {s for s, _ in best.substituted} >= {n for n in reducer.initial().kept if n.startswith(("abs", "mul"))}
    built = reducer.best_case()
    assert torch.equal(built.gm(x)[0], torch.cos(torch.sin(x)))
    assert Candidate.from_json(best.to_json()) == best  # a checkpoint keeps the substitutions
    # the stand-ins are of the node's very shape
    assert all(reducer._meta(s).shape == (4,) for n in best.kept for s in reducer.stand_ins(n, best))


def test_an_aot_graph_that_makes_a_size_from_data_is_traced_on_fakes_in_its_repro(tmp_path):
    # nonzero's size is the data's: make_fx on real tensors refuses such a graph
    # (data-dependent), so its compiler gets fake inputs in a shape environment, static
    # sizes and all, as AOTAutograd handed them in the program. The failure then reproduces.
    import planted  # noqa: F401  registers planted_compile_error (rejects cos)
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.repro.inputs import reads_data
    from minifier.stages.run import run_case

    def f(x):
        return (torch.nonzero(x).float().cos(),)

    x = torch.tensor([0.0, 1.0, 0.0, 2.0])
    gm = make_fx(f, tracing_mode="symbolic")(x)
    case = GraphCase(gm, [GraphInput("x_1", x, TensorMeta.of(x))], boundary="aot", kind="inference", backend="planted_compile_error")
    assert reads_data(case) and not reads_data(_chain([torch.ops.aten.cos.default], x))
    assert "symbolic_inputs(inputs)" in render(case, stage="planted_compile_error")
    outcome = run_case(case, "planted_compile_error")
    assert outcome.failure is not None and "cos" in outcome.failure.signature.message, outcome


def test_a_patch_no_repro_can_carry_is_named_wherever_it_sits(monkeypatch):
    # The script's own functions, installed in torch: a named top-level one is carried as
    # source; a lambda or a nested function has no name to slice out of the script, in
    # a compiler table or as a class attribute alike, and is named in state_missing.
    import torch._inductor.codegen.cpp as cpp
    import torch._inductor.lowering as lowering
    from minifier.capture.patches import program_state

    script: dict = {"__name__": "__main__"}
    exec(
        "def doubled(x):\n    return f'{x} * 2'\n"
        "def outer():\n    def inner(x):\n        return x\n    return inner\n"
        "one = lambda x: f'std::max({x}, 1)'\n",
        script,
    )
    monkeypatch.setattr(cpp.CppOverrides, "relu", staticmethod(script["one"]), raising=False)
    monkeypatch.setattr(cpp.CppOverrides, "abs", staticmethod(script["doubled"]), raising=False)
    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.neg.default, script["outer"]())
    monkeypatch.setattr("minifier.capture.patches.script_source", lambda: None)  # (exec'd: no file to slice)
    state = program_state()
    assert sorted(state.missing) == [
        "torch._inductor.codegen.cpp.CppOverrides.relu = __main__.<lambda>",
        "torch._inductor.lowering.lowerings[aten.neg.default] = __main__.outer.<locals>.inner",
    ]
    assert state.patches == {"torch._inductor.codegen.cpp.CppOverrides.abs": "doubled"}


def test_a_failure_that_shows_otherwise_on_every_look_is_no_flake(in_process):
    # The program failed one way; alone, the graph fails another way on every look: not
    # a failure that comes and goes, but a graph that runs alone otherwise than in the
    # program (exit 5, naming both). One that passes on some looks stays flaky (exit 1).
    import planted  # noqa: F401  registers planted_compile_error (rejects cos)
    from pt2kit.errors import FlakyFailure, NotReproducible
    from minifier.stages.flaky import failure_rate
    from minifier.stages.run import Outcome, run_case
    from pt2kit.signature import Failure, Signature

    session, _ = in_process
    x = torch.randn(4)
    program = Outcome("planted_compile_error", Failure(Signature("runtime_error", "NameError", "name 'u#' is not defined")), 0.0)
    cos = _chain([torch.ops.aten.cos.default], x).replace(backend="planted_compile_error")
    alone = run_case(cos, "planted_compile_error")
    assert alone.failure is not None
    with pytest.raises(NotReproducible, match="in every one of 7 runs"):
        failure_rate(session, cos, "planted_compile_error", program, alone, accuracy=False, label="g0")
    sin = _chain([torch.ops.aten.sin.default], x).replace(backend="planted_compile_error")
    with pytest.raises(FlakyFailure):
        failure_rate(session, sin, "planted_compile_error", program, run_case(sin, "planted_compile_error"), accuracy=False, label="g0")


def test_an_input_the_program_never_gave_a_value_stays_random_when_a_replacement_reads_it_again():
    # A graph whose compile failed has inputs with no real value (random from the start).
    # Dropped once nothing reads it, such an input is read again when a node is replaced
    # by it: it must come back random, never as an input with no value at all.
    from torch.fx.experimental.proxy_tensor import make_fx
    from minifier.reduce.engine import Reducer
    from minifier.stages.profile import profile_case
    from pt2kit.signature import Signature

    x, y = torch.randn(4), torch.randn(4)
    gm = make_fx(lambda x, y: (torch.cos(torch.sin(y)), x.neg()))(x, y)
    case = GraphCase(gm, [GraphInput("x_1", None, TensorMeta.of(x), seed=7), GraphInput("y_1", y, TensorMeta.of(y))], backend="inductor")
    reducer = Reducer(case, profile_case(case.replace(inputs=[replace(case.inputs[0], value=x, seed=None), case.inputs[1]])), Signature("compile_error", "E", "m"), lambda c: [])
    cos_only = reducer.normalize(replace(reducer.best, outputs=tuple(o for o in reducer.best.outputs if o.startswith("cos"))))
    assert reducer.input_names(cos_only.kept) == ["y_1"] and not cos_only.random  # x_1 dropped with neg
    sin = next(n for n in cos_only.kept if n.startswith("sin"))
    replaced = reducer.normalize(replace(cos_only, substituted=frozenset({(sin, "x_1")})))
    built = reducer.build(replaced)
    assert [(i.name, i.is_random) for i in built.inputs] == [("x_1", True)]


def test_a_symbolic_size_whose_tensor_was_cut_away_is_an_int_of_its_own():
    # minify hunt found it: full(x.shape).cumsum(dtype=int32) under dynamic=True, its tensor input cut
    # away by the reducer, left an int input "derived from" a tensor no longer there; the writer raised
    from types import SimpleNamespace

    from minifier.reduce.candidate import derive_sizes
    from minifier.repro.inputs import symbolic_inputs_function
    from minifier.unit.case import GraphInput

    size = GraphInput("arg2_1", 5, None, derived_from=("arg1_1", 0))
    kept = GraphInput("arg0_1", torch.ones(5), None, symbolic_dims=(0,))
    source = symbolic_inputs_function(SimpleNamespace(inputs=[size, kept]))
    assert "SIZES_OF = {}" in source
    assert derive_sizes([size, kept])[0].derived_from is None and derive_sizes([size, kept])[0].symbolic_int


def test_jobs_are_the_cores_or_what_was_asked_never_more_than_the_free_memory_holds(monkeypatch):
    from minifier.isolation import jobs

    gib = 1 << 30
    assert jobs.fitting(8, 6 * gib, 20 * gib) == 3  # children the size of a 6 GiB program
    assert jobs.fitting(8, 0, 20 * gib) == 8 and jobs.fitting(8, 0, 3 * gib) == 3  # (1 GiB each at the least)
    assert jobs.fitting(4, 64 * gib, 2 * gib) == 1 and jobs.fitting(4, gib, None) == 4
    monkeypatch.setenv(jobs.JOBS_ENV, "3")
    monkeypatch.setattr(jobs, "available_memory", lambda: 64 * gib)
    assert jobs.requested() == 3 and jobs.default_jobs() == 3
    for unusable in ("0", "-2", "many", ""):
        monkeypatch.setenv(jobs.JOBS_ENV, unusable)
        assert jobs.requested() is None and jobs.default_jobs() == jobs.cores()


def test_the_jobs_option_reaches_the_processes_a_command_starts(monkeypatch):
    import click
    from click.testing import CliRunner

    from minifier.isolation.jobs import JOBS_ENV, jobs_option

    monkeypatch.setenv(JOBS_ENV, "1")  # (and back to what it was after the test: the option writes os.environ)

    @click.command()
    @jobs_option
    def command() -> None:
        click.echo(os.environ.get(JOBS_ENV, "unset"))

    assert CliRunner().invoke(command, ["--jobs", "5"]).output.strip() == "5"
    assert CliRunner().invoke(command, ["-j", "0"]).exit_code == 2  # (a usage error: at least one)


def test_a_case_moved_to_another_device_holds_nothing_of_its_own_and_runs_there():
    """``minify repro --device``'s move, here from the CPU to ``meta`` (no GPU here; the other way, a meta
    tensor has no data to move): inputs, constants, parameters, the devices nodes name, and the autocast."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from minifier.unit.case import CompileContext
    from minifier.unit.devices import devices_of, moved_to

    def f(x, w):
        made = torch.ones(3, device=x.device) * 2
        return (x @ w + made).to("cpu").relu()

    x, w = torch.randn(2, 4), torch.randn(4, 3)
    gm = make_fx(f)(x, w)
    gm.register_buffer("scale", torch.ones(3))
    inputs = [GraphInput("x_1", x, TensorMeta.of(x)), GraphInput("w_1", None, TensorMeta.of(w), seed=7)]
    context = CompileContext(autocast=(("cpu", "bfloat16"),))
    case = GraphCase(gm, inputs, boundary="aot", kind="inference", constants={"c": torch.ones(2)}, context=context)
    assert devices_of(case) == {"cpu"} and "device(type='cpu')" in gm.code

    moved = moved_to(case, "meta")
    assert devices_of(moved) == {"meta"} and "cpu" not in moved.gm.code and "meta" in moved.gm.code
    assert moved.inputs[0].value.device.type == "meta" and moved.inputs[1].value is None
    assert moved.gm.scale.device.type == "meta" and moved.constants["c"].device.type == "meta"
    assert moved.context.autocast == (("meta", "bfloat16"),)
    assert case.gm.scale.device.type == "cpu" and "meta" not in case.gm.code  # (the original is left as it was)
    out = moved.gm(torch.randn(2, 4, device="meta"), torch.randn(4, 3, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 3)


def test_a_repro_of_a_cuda_graph_waits_on_the_device_before_it_says_it_passed():
    """Kernels run asynchronously: without a wait, a kernel's device error could go unseen at exit."""
    x = torch.randn(2, 4)
    on_cpu = GraphCase(trace_module(torch.nn.ReLU()), [GraphInput("x", None, TensorMeta.of(x), seed=7)])
    on_cuda = replace(on_cpu, inputs=[GraphInput("x", None, replace(TensorMeta.of(x), device="cuda:0"), seed=7)])
    main = render(on_cuda, stage="aot_eager").split('if __name__ == "__main__":')[1]
    assert "device='cuda:0'" in render(on_cuda, stage="aot_eager")
    assert main.index("run(Repro(data), inputs)") < main.index("torch.cuda.synchronize()") < main.index("did not fail")
    assert "synchronize" not in render(on_cpu, stage="aot_eager")
