"""Steady-state cost of an armed RecompileProfiler: calls of an already compiled function.

explain/ listens only where dynamo handles a cache *miss* (see ``explain/hooks.py``); a call
that hits the cache never runs Python code of ours. This benchmark checks that claim with
timings: it compiles a small function, warms it, then times batches of calls without and
with a ``RecompileProfiler`` armed, interleaved (alternating which goes first) in one
process, and reports the best batch of each (the minimum is the least noisy estimate of
the true cost), their ratio, and the ratio of the medians.

    python benchmarks/bench_explain.py [--calls 2000] [--rounds 15] [--backend eager]

A ratio of 1.00 means no overhead; on a shared 2-core machine expect noise of a few
percent either way. The profiler must also have recorded zero compiles in steady state.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from explain import RecompileProfiler


def small_model(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ x.T).sum(dim=-1) * 0.5


def time_batch(fn, x: torch.Tensor, calls: int) -> float:
    """Seconds per call, over one batch of ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed batch")
    parser.add_argument("--rounds", type=int, default=15, help="batches per configuration, interleaved")
    parser.add_argument("--backend", default="eager", help="torch.compile backend (the call path is the same for all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    compiled = torch.compile(small_model, backend=args.backend)
    x = torch.randn(16, 16)
    for _ in range(200):  # compile, then warm the cache lookup
        compiled(x)

    without: list[float] = []
    armed: list[float] = []
    profiler = RecompileProfiler()

    def run_armed() -> None:
        with profiler:
            armed.append(time_batch(compiled, x, args.calls))

    def run_without() -> None:
        without.append(time_batch(compiled, x, args.calls))

    for round_ in range(args.rounds):
        # alternate which goes first, so neither profits from the other's warm-up
        for run in (run_without, run_armed) if round_ % 2 == 0 else (run_armed, run_without):
            run()

    figures = {
        "backend": args.backend,
        "calls_per_batch": args.calls,
        "rounds": args.rounds,
        "us_per_call_without_profiler": min(without) * 1e6,
        "us_per_call_with_profiler": min(armed) * 1e6,
        "ratio_with_over_without": min(armed) / min(without),
        "median_ratio": sorted(armed)[len(armed) // 2] / sorted(without)[len(without) // 2],
        "compiles_recorded_in_steady_state": len(profiler.records),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"steady-state call of a compiled function (backend={args.backend}, {args.calls} calls x {args.rounds} rounds)"
    )
    print(f"  without profiler: {figures['us_per_call_without_profiler']:8.2f} us/call (best batch)")
    print(f"  profiler armed:   {figures['us_per_call_with_profiler']:8.2f} us/call (best batch)")
    print(
        f"  ratio armed/unarmed: {figures['ratio_with_over_without']:.3f} "
        f"(median of batches: {figures['median_ratio']:.3f})"
    )
    print(f"  compiles recorded while armed: {figures['compiles_recorded_in_steady_state']}")


if __name__ == "__main__":
    main()
