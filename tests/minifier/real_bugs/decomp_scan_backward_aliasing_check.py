"""`scan` with gradients through its carry fails after the partitioner: "scan might be aliasing".

The combine function returns `(n, n * 2)` with `n = tanh(c @ w + x)`; `xs` and `w`
need grad.  eager and aot_eager run it; under aot_eager_decomp_partition (and so
Inductor) the partitioned graphs trip scan's check that its body returns no alias of
an input or an output.  The failure needs none of the body's matmul or add, nor the
extra operand `w`: what pt2kit's body reduction removes.

Upstream: none found (the closest, https://github.com/pytorch/pytorch/pull/185332,
touches the same check).
"""
import torch
from torch._higher_order_ops.scan import scan

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "aot_eager_decomp_partition",
    "ops": ["torch.ops.higher_order.scan"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "the partitioned backward of scan returns an alias the HOP's own check rejects",
}


def f(init, xs, w):
    def comb(c, x):
        n = torch.tanh(c @ w + x)
        return n, n * 2

    return scan(comb, init, xs)[1]


torch.manual_seed(0)
init = torch.zeros(2, 3)
xs = torch.randn(4, 2, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
out = torch.compile(f)(init, xs, w)
out.sum().backward()
print(xs.grad.sum(), w.grad.sum())
