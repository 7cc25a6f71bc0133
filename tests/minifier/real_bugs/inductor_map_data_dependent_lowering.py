"""Inductor cannot compile `torch._higher_order_ops.map`: a data-dependent `_local_scalar_dense`.

`map(lambda x, y: (x * y).sum(0), xs, y)` runs under eager, aot_eager and
aot_eager_decomp_partition; Inductor's lowering of the map's forward graph calls
`aten._local_scalar_dense` on a fake tensor and stops with
"DataDependentOutputException".  A body as small as one op fails the same way.  The
forward graph returns the inputs it saves for the backward: a graph whose canonical
form drops those outputs, on which pt2kit's reducer once spun forever.

Upstream: none found (the closest, https://github.com/pytorch/pytorch/issues/183018,
another error, closed).
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["torch.ops.higher_order.map_impl"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "the map lowering asks a fake tensor for a Python scalar",
}


def f(xs, y):
    return torch._higher_order_ops.map(lambda x, y: (x * y).sum(0), xs, y)


torch.manual_seed(0)
xs = torch.randn(3, 4, 5, requires_grad=True)
y = torch.randn(5, requires_grad=True)
out = torch.compile(f)(xs, y)
out.sum().backward()
print(xs.grad.sum(), y.grad)
