"""Inductor's float `remainder` by an infinite divisor returns NaN where eager returns the dividend.

`torch.remainder(a, b)` follows Python: `5.0 % inf == 5.0`, `-5.0 % inf == inf`,
`3.0 % -inf == -inf`.  Inductor's CPU kernel computes `a - floor(a / b) * b`, which is
`5 - 0 * inf = nan` for an infinite `b`, so the compiled result has NaN where eager's is
finite. (Its vectorized loop does; with AVX-512, a 3-element tensor only runs the scalar tail,
which is right.)  eager, aot_eager and aot_eager_decomp_partition agree.

Upstream: https://github.com/pytorch/pytorch/issues/198057
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198057",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.remainder.Tensor"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "remainder lowered as a - floor(a / b) * b; wrong for an infinite divisor",
}


def f(a, b):
    return torch.remainder(a, b) * 1


# long enough for the vectorized loop body on every x86 CPU (16 floats with AVX-512): the scalar tail
# Inductor runs on a short tensor there computes it right
a = torch.tensor([5.0, -5.0, 3.0] * 11)
b = torch.tensor([float("inf"), float("inf"), -float("inf")] * 11)
ref = f(a, b)
out = torch.compile(f)(a, b)
torch.testing.assert_close(out, ref, equal_nan=True)
