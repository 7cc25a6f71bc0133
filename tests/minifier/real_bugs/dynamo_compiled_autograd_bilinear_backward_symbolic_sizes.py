"""Compiled autograd on: the backward of a bilinear `F.interpolate` fails as dynamo traces it at a second size.

`torch._dynamo.config.compiled_autograd = True`, the forward eager, `loss.backward()` inside
`torch.compile`. The first input size compiles and runs; at the second, compiled autograd's
backward graph is traced with symbolic sizes, and dynamo's fake-tensor run of its
`UpsampleBilinear2DBackward0` node raises `isIntList() INTERNAL ASSERT FAILED ... Expected IntList
but got GenericList`. Already with backend="eager": the error is in dynamo's tracing of a graph the
program never wrote (its frame is compiled autograd's `forward`), so no graph exists to minify and
pt2kit exits 5, naming compiled autograd's backward graph and the config that avoids it (it said
"frame forward" before). Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/197092
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#197092",
    "kind": "compile_error",
    "stage": "eager",
    "ops": ["upsample_bilinear2d_backward"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "exit5": "dynamo's own tracing of compiled autograd's backward graph",
    "notes": "compiled autograd's fake-tensor run of UpsampleBilinear2DBackward0 with symbolic sizes (a list of SymInts)",
}

torch._dynamo.config.compiled_autograd = True


def backward(loss):
    loss.backward()


compiled_backward = torch.compile(backward)
for hw in [(4, 5), (6, 7)]:
    x = torch.randn(1, 1, *hw, requires_grad=True)
    F.interpolate(x, scale_factor=2, mode="bilinear").sum().backward()
    expected = x.grad.clone()
    x.grad = None
    compiled_backward(F.interpolate(x, scale_factor=2, mode="bilinear").sum())  # the 2nd size raises
    torch.testing.assert_close(x.grad, expected)
