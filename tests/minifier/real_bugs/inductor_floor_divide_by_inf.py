"""Inductor's float floor-division disagrees with eager when the divisor is infinite.

Eager `torch.div(a, b, rounding_mode="floor")` follows Python semantics: for finite a
and infinite b with opposite signs the result is -1.0 (e.g. -5.0 // inf == -1.0), and
an infinite numerator gives NaN.  Inductor lowers it to `floor(a / b)`, which yields
-0.0 and +-inf instead.  Here a period of `inf` is used to disable wrapping for some
channels; the compiled bucket index of negative timestamps on those channels is -0.0
instead of -1.0, so the per-row bucket sums are off too.  aot_eager_decomp_partition
matches eager.

Upstream: https://github.com/pytorch/pytorch/issues/188048
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#188048",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.div.Tensor_mode"],
    "fails_on_2_15": False,
    "notes": "floor division lowered as floor(a/b); wrong for infinite divisor/dividend (closed upstream for CUDA, still wrong on CPU 2.13)",
}


def bucketize_time(t, period):
    bucket = torch.div(t, period, rounding_mode="floor")
    return bucket, bucket.clamp(min=-10, max=10).sum(dim=1)


torch.manual_seed(0)
t = torch.randn(4, 9) * 50
period = torch.tensor([7.0, float("inf"), 3.0] * 3)     # inf: channel never wraps

expected = bucketize_time(t, period)
actual = torch.compile(bucketize_time)(t, period)

print("eager   :", expected[0][:, 1].tolist())
print("compiled:", actual[0][:, 1].tolist())
torch.testing.assert_close(actual[0], expected[0], equal_nan=True)
torch.testing.assert_close(actual[1], expected[1])
print("OK")
