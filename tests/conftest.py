"""Shared test setup.

Every test process (and every process pt2kit starts) uses one Inductor cache for
the whole run, so each distinct kernel is compiled once per run.
"""
import os
import sys

from support.paths import REPO, USER_MODULES
from support.programs import MODEL, MODEL_FUNCTION
from support.scheduling import program_scope

# The test programs' own modules (``import planted``), importable as a user's program's are.
sys.path.insert(0, str(USER_MODULES))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(REPO / ".cache" / "inductor"))
# Every minification ends by running its repro.py in a fresh process elsewhere (torch
# alone, another directory, no warm cache): a few seconds each, over a hundred runs
# here. The tests of that step turn it back on (test_real_bug_shapes.py,
# test_state_outside_graph.py); the rest check "verified here" only, and
# test_real_bugs.py runs each repro elsewhere itself.
os.environ.setdefault("PT2KIT_VERIFY_ELSEWHERE", "0")
# ``minify run`` then goes below the stage (the subsystem, a workaround: a dozen small
# queries and a rerun of the program). tests/minifier/test_subsystem.py and the CompilerBisector
# scenarios and the genuine bugs whose CASE names a subsystem turn it on; the rest stop
# at the repro.
os.environ.setdefault("PT2KIT_SUBSYSTEM", "0")
# Where it goes below, the program's run with the workaround is waited for, so a test reads
# the whole report when ``minify run`` exits; test_subsystem.py's background test unsets it.
os.environ.setdefault("PT2KIT_WAIT", "1")
# issue.md's environment block runs torch.utils.collect_env (pip, lscpu, gcc: 2 s of CPU per
# command); tests/minifier/test_releases.py turns it back on where it checks the block.
os.environ.setdefault("PT2KIT_COLLECT_ENV", "0")

pytest_plugins = ["pytester"]

import pytest


@pytest.fixture(autouse=True)
def _torch_process_state_restored():
    """Every test starts from the process's own torch state, whatever the test before it set.

    A test in a pytest-xdist worker runs after others in the same process; one that sets the
    thread count (or the default dtype, matmul precision, ...) and a later one that reads the
    program's context (CompileContext) would otherwise pass alone and fail in CI.
    """
    import torch

    saved = (
        torch.get_num_threads(), torch.get_default_dtype(), torch.is_grad_enabled(),
        torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
    )
    yield
    threads, dtype, grad, precision, deterministic = saved
    torch.set_num_threads(threads)
    torch.set_default_dtype(dtype)
    torch.set_grad_enabled(grad)
    torch.set_float32_matmul_precision(precision)
    torch.use_deterministic_algorithms(deterministic)


def pytest_runtest_setup(item):
    """Skip a test marked ``torch_since(version, why)`` on a torch older than that release."""
    for mark in item.iter_markers("torch_since"):
        version, why = mark.args
        from pt2kit import seams

        if seams.torch_version() < tuple(int(part) for part in version.split(".")):
            pytest.skip(f"needs torch {version} or newer: {why}")


def pytest_collection_modifyitems(config, items):
    """Order the tests for pytest-xdist.

    The tests marked ``long`` first (a minute or more each), then the other end-to-end tests,
    in-process ones last: pytest-xdist hands tests out in this order.

    An end-to-end test takes seconds to a minute, an in-process one well under a second.
    With the short ones last, they fill in while the last long ones finish, so no worker
    idles at the end (longest first, the classic rule for scheduling). That needs xdist to
    hand tests out a few at a time (the Makefile's ``--maxschedchunk 1``), not a quarter of
    the suite per worker up front. The sort is stable and the same in every worker, as xdist
    requires.
    """
    items.sort(key=lambda item: (
        item.get_closest_marker("long") is None,
        item.get_closest_marker("e2e") is None and item.get_closest_marker("slow") is None,
    ))


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` (``make slow``) hands out each :func:`program_scope` as one unit.

    pytest-xdist's own scopes are too coarse here: a whole module is one unit, so the genuine bugs and
    the scenarios (20 and 28 programs of up to a few minutes each) would run on one worker each.
    (``--dist loadgroup`` with an ``xdist_group`` per program would say the same, but pytest 9.2's
    node ids no longer take xdist's group suffix.) Units go out in collection order
    (``--no-loadscope-reorder``): :func:`pytest_collection_modifyitems`'s, the long tests first.
    """
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ProgramScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return program_scope(nodeid)

    return ProgramScheduling(config, log)


@pytest.fixture
def model_script(tmp_path):
    """Write a small model compiled with a planted backend; returns its path.

    ``train=True`` also runs backward; ``scale`` multiplies the input (the
    ``planted_value`` bug needs values above 100); ``after`` is extra code at the end.
    """

    def write(backend, *, train=False, scale=1, after="", name="model.py"):
        if train and not after:
            after = "out.sum().backward()"
        path = tmp_path / name
        path.write_text(MODEL.format(tests=str(USER_MODULES), function=MODEL_FUNCTION, backend=backend, train=train, scale=scale, after=after or "print(out.sum())"))
        return path

    return write


@pytest.fixture
def session(tmp_path):
    """A pt2kit session in this (fork-safe, single-threaded) test process."""
    from minifier.isolation.session import Session

    s = Session("test", out=tmp_path / "runs", timeout=60, quiet=True)
    s.warm_up(inductor=False)
    yield s
    s.close()


@pytest.fixture
def in_process(tmp_path):
    """A session whose queries run in this test's own process (decisions only: no isolation, no timeouts)."""
    from minifier.isolation.executor import Executor
    from minifier.isolation.inprocess import InProcessExecutor
    from minifier.isolation.session import Session

    executor = InProcessExecutor()
    assert isinstance(executor, Executor)
    session = Session("in-process", out=tmp_path / "runs", quiet=True, executor=executor)
    yield session, executor
    session.close()
