"""Inductor keeps fused float16 intermediates in float32, so an `isinf` overflow guard never fires.

In eager, `x * x` on float16 inputs of magnitude ~300 overflows to `inf` and the
`torch.where(torch.isinf(e), 0, e)` guard replaces it with 0.  Inductor's CPU codegen
upcasts the fused fp16 chain to float32 and only rounds to fp16 at the final store,
so the intermediate is e.g. 90000.0 (finite), the guard is skipped, and the output is
~e/(|h|+1) (hundreds) instead of 0 for about a third of the elements.  Only Inductor
is affected (aot_eager_decomp_partition matches eager).

Upstream: https://github.com/pytorch/pytorch/issues/183607
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#183607",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.mul.Tensor", "aten.isinf.default", "aten.where.self"],
    "fails_on_2_15": True,
    "notes": "fp16 intermediate not rounded to fp16 inside fused kernel (emulate_precision_casts=False by default)",
}


def guarded_energy(x, scale):
    h = x * scale
    e = h * h                                   # overflows fp16 for |h| > ~256
    e = torch.where(torch.isinf(e), torch.zeros_like(e), e)
    return e / (h.abs() + 1)


torch.manual_seed(0)
x = (torch.rand(4, 40) * 400).half()
scale = torch.ones(40, dtype=torch.float16)

expected = guarded_energy(x, scale)
actual = torch.compile(guarded_energy)(x, scale)

print("eager    guarded (zeroed) entries:", (expected == 0).sum().item())
print("compiled guarded (zeroed) entries:", (actual == 0).sum().item())
torch.testing.assert_close(actual, expected)
print("OK")
