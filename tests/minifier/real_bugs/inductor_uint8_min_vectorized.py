"""Inductor's vectorized CPU min-reduction over uint8 returns 0 for positive values.

`torch.min(x)` of 18 uint8 values in [1, 128) is at least 1, but the compiled reduction
starts its vectorized accumulator from a value that wraps around for an unsigned type
and returns 0 (and `argmin` points at the wrong element).  With fewer than 16 elements
(no vector lanes) the result is right; aot_eager_decomp_partition is right too.

Upstream: https://github.com/pytorch/pytorch/issues/191499
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#191499",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.min.default"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "the C++ vectorized min reduction of an unsigned dtype starts from the wrong identity",
}


def lowest(x):
    return torch.min(x), torch.argmin(x)


torch.manual_seed(0)
x = torch.randint(1, 128, (18,), dtype=torch.uint8)
eager = lowest(x)
compiled = torch.compile(lowest)(x)
print("eager:", eager, "compiled:", compiled)
assert all(torch.equal(e, c) for e, c in zip(eager, compiled)), "min/argmin differ"
