"""Inductor emits `empty_strided_cpu` with a negative stride, which fails at run time.

`torch.empty_strided((0, 0), (-1, 0))` is a legal (empty) tensor in eager, and gathering
from a tensor with this empty index just returns an empty result.  Inductor copies the
negative stride into the buffer it allocates in the generated wrapper code, and
`empty_strided_cpu` then fails when the compiled function runs:
"RuntimeError: Expected result >= 0 to be true, but got false".  eager, aot_eager and
aot_eager_decomp_partition all work.

Upstream: https://github.com/pytorch/pytorch/issues/188227
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#188227",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["aten.empty_strided.default", "aten.gather.default", "aten.float_power.Tensor_Scalar"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "negative stride of a zero-size empty_strided propagated into generated empty_strided_cpu call",
}


def pick(t):
    a = torch.float_power(t, 0.5)
    idx = torch.empty_strided((0, 0), (-1, 0), dtype=torch.int64)
    picked = torch.gather(a, -2, idx)
    return picked, a.abs().sum()


torch.manual_seed(0)
t = torch.randn(3, 3, dtype=torch.complex64)

print("eager:", [o.shape for o in pick(t)])
print("compiled:", [o.shape for o in torch.compile(pick)(t)])
