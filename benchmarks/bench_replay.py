"""What recording costs a healthy program: cache hits, and compiles, next to torch's own recorder.

Replay snapshots a frame where dynamo compiles it (a cache *miss*) and wraps the compiled
graph so that a failing run can be recorded. This measures, in one process, on a small
function that never fails:

- **cache hits**: seconds per call of an already compiled function, compiled without
  recording (plain) and compiled while recording (its graph carries replay's wrapper),
  batches interleaved; the best batch of each and their ratio;
- **compiles**: milliseconds per compile of fresh code objects (``backend=eager``), in
  interleaved pairs: switch off against torch's own ``replay_record_enabled`` recorder
  (pt2kit not armed); then, with pt2kit's switch armed, switch off against switch on
  (pt2kit snapshots every frame, torch's recorder stands down); medians and ratios.

    PT2KIT_AUTOLOAD=0 python benchmarks/bench_replay.py [--calls 2000] [--rounds 15] [--compiles 30] [--json]

(``PT2KIT_AUTOLOAD=0`` so that torch's own recorder can be timed alone; the script arms
pt2kit itself for the last configuration.) On a shared 2-core machine expect a few
percent of noise either way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import types

import torch
import torch._dynamo.config as dynamo_config

import replay
import replay.autoload


def small_model(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ x.T).sum(dim=-1) * 0.5


def fresh_copy(fn: types.FunctionType) -> types.FunctionType:
    """The same function with a code object of its own, so dynamo compiles it anew."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__)


def time_batch(fn, x: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls


def compile_times(count: int, x: torch.Tensor) -> list[float]:
    """Seconds for the first call (the compile) of ``count`` fresh copies."""
    times = []
    for _ in range(count):
        compiled = torch.compile(fresh_copy(small_model), backend="eager")
        start = time.perf_counter()
        compiled(x)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed batch")
    parser.add_argument("--rounds", type=int, default=15, help="batches per configuration, interleaved")
    parser.add_argument("--compiles", type=int, default=30, help="fresh compiles per configuration")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if os.environ.get("PT2KIT_AUTOLOAD") != "0":
        parser.error("run with PT2KIT_AUTOLOAD=0 (torch's own recorder is timed alone first)")
    x = torch.randn(16, 16)
    out = tempfile.mkdtemp(prefix="bench-replay-")

    # -- cache hits ------------------------------------------------------------------
    plain = torch.compile(fresh_copy(small_model), backend="eager")
    for _ in range(200):
        plain(x)
    with replay.recording(out=out, quiet=True) as recorder:
        watched = torch.compile(fresh_copy(small_model), backend="eager")
        for _ in range(200):
            watched(x)
        without: list[float] = []
        armed: list[float] = []
        for round_ in range(args.rounds):
            pair = ((without, plain), (armed, watched))
            for samples, fn in pair if round_ % 2 == 0 else pair[::-1]:
                samples.append(time_batch(fn, x, args.calls))
    assert recorder.records == [], "a healthy program leaves no record"

    # -- compiles: interleaved pairs, one fresh code object per compile --------------
    compile_times(3, x)  # warm dynamo's own first-compile costs
    plain_compiles: list[float] = []
    torch_compiles: list[float] = []
    for round_ in range(args.compiles):
        for switch in (False, True) if round_ % 2 == 0 else (True, False):
            dynamo_config.replay_record_enabled = switch
            (torch_compiles if switch else plain_compiles).extend(compile_times(1, x))
    dynamo_config.replay_record_enabled = False
    os.environ["TORCHDYNAMO_REPRO_DIR"] = out
    replay.autoload.arm()  # pt2kit's switch: from now on, with the flag on, pt2kit records
    idle_compiles: list[float] = []
    pt2kit_compiles: list[float] = []
    for round_ in range(args.compiles):
        for switch in (False, True) if round_ % 2 == 0 else (True, False):
            dynamo_config.replay_record_enabled = switch
            (pt2kit_compiles if switch else idle_compiles).extend(compile_times(1, x))
    dynamo_config.replay_record_enabled = False
    assert not os.listdir(out), "nothing is written for frames that compile and run"

    plain_ms = statistics.median(plain_compiles) * 1e3
    figures = {
        "calls_per_batch": args.calls,
        "rounds": args.rounds,
        "us_per_call_plain": min(without) * 1e6,
        "us_per_call_compiled_while_recording": min(armed) * 1e6,
        "cache_hit_ratio_recording_over_plain": min(armed) / min(without),
        "cache_hit_median_ratio": statistics.median(armed) / statistics.median(without),
        "compiles": args.compiles,
        "ms_per_compile_plain": plain_ms,
        "ms_per_compile_torch_replay_record": statistics.median(torch_compiles) * 1e3,
        "ms_per_compile_switch_off_after_arming": statistics.median(idle_compiles) * 1e3,
        "ms_per_compile_pt2kit_switch": statistics.median(pt2kit_compiles) * 1e3,
        "compile_ratio_torch_over_plain": statistics.median(torch_compiles) * 1e3 / plain_ms,
        "compile_ratio_pt2kit_over_switch_off": statistics.median(pt2kit_compiles) / statistics.median(idle_compiles),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"cache hits ({args.calls} calls x {args.rounds} rounds, best batch)")
    print(f"  plain:                       {figures['us_per_call_plain']:8.2f} us/call")
    print(f"  compiled while recording:    {figures['us_per_call_compiled_while_recording']:8.2f} us/call")
    print(
        f"  ratio: {figures['cache_hit_ratio_recording_over_plain']:.3f} (median of batches {figures['cache_hit_median_ratio']:.3f})"
    )
    print(f"compiles of a fresh code object (median of {args.compiles}, backend=eager, pairs interleaved)")
    print(f"  plain (switch off):                       {plain_ms:8.2f} ms")
    print(
        f"  torch's replay_record_enabled:            {figures['ms_per_compile_torch_replay_record']:8.2f} ms  ({figures['compile_ratio_torch_over_plain']:.3f}x plain)"
    )
    print(f"  pt2kit armed, switch off:                 {figures['ms_per_compile_switch_off_after_arming']:8.2f} ms")
    print(
        f"  pt2kit's switch on (records on failure): {figures['ms_per_compile_pt2kit_switch']:8.2f} ms  ({figures['compile_ratio_pt2kit_over_switch_off']:.3f}x switch off)"
    )


if __name__ == "__main__":
    main()
