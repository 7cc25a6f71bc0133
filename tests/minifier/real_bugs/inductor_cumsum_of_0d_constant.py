"""Inductor fails to compile the `cumsum` of a 0-d constant tensor.

`torch.tensor(5.0).cumsum(0)` is legal (a 0-d tensor's dim 0 is its only one) and eager
returns 5.0.  Inductor's post-grad pattern `pointless_cumsum_replacement` matches the
cumsum of a `full` and reads the size of dim 0 of a 0-d shape: "IndexError: tuple index
out of range" at compile time.  aot_eager_decomp_partition runs it.

Upstream: https://github.com/pytorch/pytorch/issues/193265
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#193265",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.full.default", "aten.cumsum.default"],
    "exception": "InductorError",
    "fails_on_2_15": False,
    "subsystem": ["post_grad_passes", "pass_pattern_1"],
    "notes": "pointless_cumsum_replacement indexes the shape of a 0-d full",
}


def f(x):
    base = torch.tensor(5.0).cumsum(0)
    return x * base


torch.manual_seed(0)
x = torch.randn(4)
print("eager:", f(x))
print("compiled:", torch.compile(f)(x))
