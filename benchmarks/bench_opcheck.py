"""Benchmark for opcheck's two targets (a benchmark, not a timed test).

1. N calls of the same signature cost one check, not N: a recorded test makes N
   identical calls, then opcheck checks what it recorded. Measured through the
   runner the plugin drives, and end to end through ``pytest --opcheck``.
2. Per distinct signature, opcheck's checks cost within 1.2x of calling
   ``torch.library.opcheck`` directly on the same call, with the same five
   checks (``test_utils="ALL"``: torch's default four plus
   ``test_aot_dispatch_static``, which opcheck also runs). Both are timed in one
   process, warm, interleaved, and the ratio of medians is printed.

Run: ``TORCHINDUCTOR_CACHE_DIR=.cache/inductor .venv/bin/python benchmarks/bench_opcheck.py``
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import Tensor

from opcheck.checks import run_checks, warm_up
from opcheck.failures import TestId
from opcheck.runner import OpcheckRunner

REPEATS = 25
TARGET_RATIO = 1.2


@torch.library.custom_op("bench_opcheck::scaled_tanh", mutates_args=())
def scaled_tanh(x: Tensor, scale: float) -> Tensor:
    return torch.tanh(x) * scale


scaled_tanh.register_fake(lambda x, scale: torch.empty_like(x))
scaled_tanh.register_autograd(
    lambda ctx, grad: (grad * ctx.scale * (1 - torch.tanh(ctx.saved_tensors[0]) ** 2), None),
    setup_context=lambda ctx, inputs, output: (ctx.save_for_backward(inputs[0]), setattr(ctx, "scale", inputs[1])),
)


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def n_identical_calls(n: int) -> tuple[float, float, int]:
    """(recording seconds, checking seconds, check rounds) for a test making ``n`` identical calls."""
    runner = OpcheckRunner(sweep=True)
    runner.start()
    test = TestId("bench.py::test_calls", "bench", "test_calls")
    x = torch.randn(16, 16)
    try:
        with runner.recording(test, runner.selector_for(None)):
            record = seconds(lambda: [scaled_tanh(x, 2.0) for _ in range(n)])
            check = seconds(lambda: runner.judge_item(test, completed=True))
    finally:
        runner.stop()
    return record, check, len(runner.records)


def plain_calls(n: int) -> float:
    x = torch.randn(16, 16)
    return seconds(lambda: [scaled_tanh(x, 2.0) for _ in range(n)])


def pytest_run(n: int, workdir: Path) -> float:
    """Wall time of an in-process ``pytest --opcheck`` on a one-test suite making ``n`` identical calls."""
    name = f"test_bench_{n}"
    (workdir / f"{name}.py").write_text(
        textwrap.dedent(f"""
        import torch
        from bench_opcheck import scaled_tanh

        def test_calls():
            x = torch.randn(16, 16)
            for _ in range({n}):
                scaled_tanh(x, 2.0)
        """)
    )
    args = [str(workdir / f"{name}.py"), "--opcheck", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    with contextlib.redirect_stdout(io.StringIO()):  # pytest's own report is not the point here
        return seconds(lambda: pytest.main(args))


def through_runner(args: tuple[object, ...]) -> None:
    """What the plugin does for one fresh signature: record the call, check it, judge the verdicts."""
    runner = OpcheckRunner(sweep=True)
    runner.start()
    test = TestId("bench.py::test_one", "bench", "test_one")
    try:
        with runner.recording(test, runner.selector_for(None)):
            scaled_tanh(*args)
            runner.judge_item(test, completed=True)
    finally:
        runner.stop()


def per_signature(label: str, args: tuple[object, ...]) -> None:
    op = scaled_tanh._opoverload
    plugin, checks_only, torchs = [], [], []
    for _ in range(REPEATS):  # interleaved, so drift in machine load hits all three alike
        plugin.append(seconds(lambda: through_runner(args)))
        checks_only.append(seconds(lambda: run_checks(op, args, {})))
        torchs.append(seconds(lambda: torch.library.opcheck(op, args, test_utils="ALL")))
    plugin_ms, checks_ms, torch_ms = (statistics.median(t) * 1e3 for t in (plugin, checks_only, torchs))
    ratio = plugin_ms / torch_ms
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(
        f"  {label:<36} {plugin_ms:7.1f} ms {checks_ms:9.1f} ms {torch_ms:8.1f} ms   "
        f"{ratio:4.2f}x ({verdict} the {TARGET_RATIO}x target)"
    )


def main() -> None:
    # One intra-op thread: on a small shared machine, a second busy process makes
    # multi-threaded kernels stall unpredictably, which would swamp what we measure.
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; warming up ...", flush=True)
    warm_up()
    n_identical_calls(1)

    print("\n1. N identical calls through the runner (record, then check what was recorded)")
    print(f"  {'N':>6} {'plain calls':>12} {'recording':>11} {'checking':>10} {'check rounds':>13}")
    for n in (1, 100, 10_000):
        record, check, rounds = n_identical_calls(n)
        print(f"  {n:>6} {plain_calls(n) * 1e3:9.1f} ms {record * 1e3:8.1f} ms {check * 1e3:7.1f} ms {rounds:>13}")

    print("\n   end to end: pytest --opcheck on one test making N identical calls (in-process)")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        sys.path.insert(0, str(Path(__file__).parent))  # the suites import scaled_tanh from this module
        sys.modules.setdefault("bench_opcheck", sys.modules["__main__"])
        timings = {n: pytest_run(n, workdir) for n in (1, 10_000)}
    print(f"  N=1: {timings[1]:.2f} s   N=10000: {timings[10_000]:.2f} s   (whole pytest session, checks included)")

    print("\n2. per distinct signature: opcheck vs torch.library.opcheck(test_utils='ALL'), medians of", REPEATS)
    print(f"  {'call':<36} {'plugin':>10} {'run_checks':>12} {'torch':>11}   plugin/torch")
    per_signature("scaled_tanh(Tensor[16, 16], 2.0)", (torch.randn(16, 16), 2.0))
    per_signature("scaled_tanh(Tensor[16, 16] rg, 2.0)", (torch.randn(16, 16, requires_grad=True), 2.0))


if __name__ == "__main__":
    main()
