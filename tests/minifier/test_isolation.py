"""Isolated queries: the worker and its zygote, the session, the program runs, the jobs."""

import functools
import operator
import os
import subprocess
import sys
import threading

import pytest
import torch

from minifier.isolation.worker import Worker


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


@pytest.mark.e2e  # pt2kit's worker processes
def test_a_started_query_waited_for_twice_gives_its_answer_twice_and_one_timeline_step(tmp_path):
    # The bisection's profile of the failing graph is started and handed on as a handle; a
    # flaky graph minified again waits for the same handle. Its result file is read once:
    # the second wait once read "process exited with status 0" and gave up the aot graph.
    from minifier.isolation.session import Session

    session = Session("twice", out=tmp_path / "runs", timeout=60, quiet=True)
    try:
        handle = session.start(functools.partial(operator.mul, 6, 7), "profile")
        assert session.wait(handle).value == 42
        again = session.wait(handle)
        assert again.value == 42 and again.failure is None
        assert [step.step for step in session.timeline.steps].count("profile") == 1
    finally:
        session.close()


@pytest.mark.e2e  # pt2kit's worker processes
def test_a_batch_that_has_its_answer_stops_the_queries_still_running(tmp_path):
    # The reducer's "first half that fails" (CandidateQuery's ``until``) rests on this: once
    # ``enough`` says yes, a query still running is killed, not waited for, and its result is None.
    import time

    from minifier.isolation.session import Session

    session = Session("enough", out=tmp_path / "runs", timeout=120, quiet=True)
    session.worker.slots = 2
    try:
        results = session.query_all(
            [(functools.partial(time.sleep, 0.1), "quick"), (functools.partial(time.sleep, 90), "slow")],
            enough=lambda rs: rs[0] is not None,
        )
        assert results[0] is not None and results[1] is None
        assert "slow" not in {step.step for step in session.timeline.steps}  # (never answered)
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
    previous = torch.get_num_threads()
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
        torch.set_num_threads(previous)


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
