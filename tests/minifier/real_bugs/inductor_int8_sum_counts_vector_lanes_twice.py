"""Inductor's CPU `sum(dtype=torch.int8)` over eight or more small values counts part of them twice.

`x.sum(-1, dtype=torch.int8)` of nine 3s (a uint8 or int8 row) is 27 eagerly: no
overflow anywhere.  Inductor's vectorized kernel returns 51 (= 27 + 8*3): the eight
values of the vector part are added twice, and every further full vector adds eight
more.  Rows of fewer than eight values are right.  Found by `minify hunt` (seed 1);
eager, aot_eager and aot_eager_decomp_partition agree.  The bug is in the 256-bit (AVX2)
kernel: a CPU with AVX-512 picks 512-bit vectors, whose sum is right, so the program asks
for 256-bit ones (`cpp.simdlen`, which the repro must carry).

Upstream: none found (searched: "inductor sum dtype int8 wrong result vectorized cpu";
pytorch#191499 is int8/uint8 min/max polluted by inactive lanes, another reduction).
"""
import torch
import torch._inductor.config

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.sum.dim_IntList"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "vectorized int8 sum accumulates the vector part twice; no overflow involved (27 vs 51)",
}


def row_totals(counts):
    return counts.sum(-1, dtype=torch.int8)


torch._inductor.config.cpp.simdlen = 256
counts = torch.full((2, 9), 3, dtype=torch.uint8)
expected = row_totals(counts)
actual = torch.compile(row_totals)(counts)
torch.testing.assert_close(actual, expected)
