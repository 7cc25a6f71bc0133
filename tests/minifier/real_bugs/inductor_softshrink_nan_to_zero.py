"""Inductor's `softshrink` maps NaN to 0; eager propagates NaN.

`F.softshrink(x, 0.5)` of `[nan, 1, -1, 0.2]` is `[nan, 0.5, -0.5, 0]` in eager; compiled
with Inductor it is `[0, 0.5, -0.5, 0]`.  Inductor lowers softshrink as
`where(|x| > lambd, x - sign(x) * lambd, 0)`, and `|nan| > lambd` is false, so a NaN
(e.g. from a diverging layer) is silently zeroed.  `hardshrink` propagates NaN in both.
eager, aot_eager and aot_eager_decomp_partition agree with eager.

Upstream: none found for Inductor (searched: softshrink nan inductor; torch.compile softshrink
NaN).  Eager's own kernels were fixed to propagate NaN in pytorch/pytorch#138385.
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.softshrink"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "the lowering's comparison |x| > lambd is false for NaN, so the else branch (0) is taken",
}


def f(x):
    return torch.nn.functional.softshrink(x, 0.5)


x = torch.tensor([float("nan"), 1.0, -1.0, 0.2])
ref = f(x)
out = torch.compile(f)(x)
torch.testing.assert_close(out, ref, equal_nan=True)
