"""A script replaces Inductor's lowering of relu (as a serving stack might): relu now adds one."""
import torch
from torch._inductor import lowering

aten = torch.ops.aten
_relu = lowering.lowerings[aten.relu.default]
_add = lowering.lowerings[aten.add.Tensor]


def relu_plus_one(x):
    return _add(_relu(x), 1.0)


lowering.lowerings[aten.relu.default] = relu_plus_one


def f(x, w):
    return torch.relu(x @ w).sum(dim=1) * 2


torch.manual_seed(0)
x, w = torch.randn(8, 16), torch.randn(16, 4)
torch.testing.assert_close(torch.compile(f)(x, w), f(x, w))
