"""Inductor drops `cumsum`'s `dtype=torch.bfloat16` when it sums a constant tensor.

`torch.ones(shape, dtype=torch.bool).cumsum(1, dtype=torch.bfloat16)` asks for positions
rounded to bfloat16 (above 256, bf16 holds only every other integer, then every fourth).
Inductor's post-grad pattern `pointless_cumsum_replacement` rewrites a cumsum of a `full`
into an `arange` and computes exact int64 positions, so the compiled positions are exact
where eager's are rounded: a silent wrong answer, found by the program's own assert.
It passes with `pattern_matcher=False`, and still fails with `emulate_precision_casts=True`:
the dropped dtype, not Inductor's by-design cast elision.  A float64 reference that
promoted the explicit dtype would take the compiler's side; pt2kit's keeps a conversion
of integer or bool data as written.

Upstream: https://github.com/pytorch/pytorch/issues/189518
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#189518",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.full.default", "aten.cumsum.default"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "subsystem": ["post_grad_passes", "pass_pattern_1"],
    "notes": "pointless_cumsum_replacement turns cumsum(full, dtype=bf16) into an exact arange; the dtype is lost",
}


def pos_embed(x):
    ones = torch.ones(x.shape, dtype=torch.bool)
    pos = ones.cumsum(1, dtype=torch.bfloat16)  # positions, rounded to bf16 as asked
    return pos.float() * 0.01 + x


torch.manual_seed(0)
x = torch.randn(2, 300)
eager = pos_embed(x)
compiled = torch.compile(pos_embed)(x)
assert torch.allclose(eager, compiled), f"max diff {(eager - compiled).abs().max().item()}"
