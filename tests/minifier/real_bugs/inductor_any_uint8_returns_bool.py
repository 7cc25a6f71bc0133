"""Inductor's `any(dim)` of a uint8 tensor returns bool; eager keeps uint8.

`torch.any` and `Tensor.any` on a uint8 tensor return uint8 (a legacy rule `torch.all`
keeps too). Inductor's own `reduce_any` lowering casts to bool and returns that, so the
compiled result changes dtype silently, and arithmetic on it changes value (a bool
promotes where a uint8 would wrap). eager, aot_eager and aot_eager_decomp_partition keep
uint8. Found by `minify hunt` (seed 3), in a program of seven steps.

Upstream: https://github.com/pytorch/pytorch/issues/198081
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198081",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.any.dim"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "reduce_any lowering returns bool; eager's any keeps uint8 for uint8 input",
}


def flags(mask):
    return mask.any(0) * 200 + 100


mask = torch.tensor([[0, 7, 0, 200], [0, 0, 0, 1]], dtype=torch.uint8)
expected = flags(mask)
actual = torch.compile(flags)(mask)
torch.testing.assert_close(actual, expected)
