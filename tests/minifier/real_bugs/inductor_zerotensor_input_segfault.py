"""Inductor-compiled code segfaults when an input is a ZeroTensor.

The gradient of `torch.sgn` is an efficient ZeroTensor: it has no real storage
(data_ptr() is 0).  Eager ops read it as zeros.  eager, aot_eager and
aot_eager_decomp_partition all handle it, but Inductor's generated C++ kernel is handed
the ZeroTensor's null data pointer and dereferences it, so the process dies with
SIGSEGV (exit 139) instead of computing sin(0) + y.

Upstream: https://github.com/pytorch/pytorch/issues/197067
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197067",
    "kind": "crash",
    "stage": "inductor",
    "ops": ["aten.sin.default", "aten.add.Tensor", "aten.sum.dim_IntList"],
    "exception": "SIGSEGV",
    "fails_on_2_15": True,
    "notes": "ZeroTensor (grad of sgn) passed as graph input; generated kernel loads from its null data pointer",
}


def smooth_update(g, y):
    z = torch.sin(g) * 0.5 + y
    return z.sum(dim=1), torch.relu(z)


torch.manual_seed(0)
x = torch.randn(64, 32, requires_grad=True)
g = torch.autograd.grad(torch.sgn(x).sum(), x)[0]
assert g._is_zerotensor()
y = torch.randn(64, 32)

print("eager:", smooth_update(g, y)[0][:3])
out = torch.compile(smooth_update)(g, y)
print("compiled:", out[0][:3])
