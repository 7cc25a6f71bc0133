"""Dynamo traces `torch.Tensor(x.size())` as `torch.Tensor(tuple)`: a tensor of the sizes, not of that shape.

In eager, the legacy constructor `torch.Tensor(torch.Size([1, 4]))` allocates a float tensor
of shape (1, 4).  Dynamo turns the `torch.Size` into a plain tuple in the graph, and
`torch.Tensor((1, 4))` is the data constructor: a 1-D tensor `[1., 4.]`.  The compiled
function returns shape (2,) with no graph break, already under backend="eager".  The program zeroes the new tensor, so nothing depends on
uninitialized memory.

Upstream: https://github.com/pytorch/pytorch/issues/196467
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#196467",
    "kind": "accuracy",
    "stage": "eager",
    "ops": ["torch.Tensor"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "exit5": "the bug is dynamo's, outside its graphs",
    "notes": "dynamo bakes torch.Size into the graph as a tuple; torch.Tensor(tuple) has data, not size, semantics",
}


def f(x):
    return torch.Tensor(x.size()).zero_() + x.sum()


x = torch.arange(4.0).reshape(1, 4)
ref = f(x)
out = torch.compile(f)(x)
assert out.shape == ref.shape, f"shape {tuple(out.shape)} vs {tuple(ref.shape)}"
torch.testing.assert_close(out, ref)
