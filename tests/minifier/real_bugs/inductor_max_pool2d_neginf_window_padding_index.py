"""Inductor's `max_pool2d(..., return_indices=True)` returns indices into the padding for all -inf windows.

A masked feature map (-inf outside the mask) pooled with padding=1: every window whose
inputs are all -inf ties with the implicit -inf padding.  Eager returns the first *valid*
input position of the window (pytorch/pytorch#23161 made it so, so that indices stay
usable by `max_unpool2d`); Inductor's lowering keeps the first position of the window,
the padding, and returns negative or shifted flat indices (-4, -3, ...).  eager,
aot_eager and aot_eager_decomp_partition agree with eager.

Upstream: none found (searched: inductor max_pool2d return_indices negative index -inf
padding; the eager fix is pytorch/pytorch#23161).
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.max_pool2d_with_indices"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "the lowering's argmax over the window starts at the padding; -inf ties never move it to a valid input",
}


def f(x):
    return torch.nn.functional.max_pool2d(x, 3, stride=1, padding=1, return_indices=True)


x = torch.full((1, 1, 4, 4), float("-inf"))
x[0, 0, 3, 3] = 1.0
ref_values, ref_indices = f(x)
values, indices = torch.compile(f)(x)
torch.testing.assert_close(values, ref_values)
assert torch.equal(indices, ref_indices), f"indices differ:\n{indices}\nvs eager\n{ref_indices}"
