"""Inductor's backward of `avg_pool1d(ceil_mode=True)` gives the overhanging window a wrong gradient.

With `ceil_mode=True` the last window hangs past the input's end, and eager divides its
gradient by the elements it covers. Inductor's lowering of `aten.avg_pool2d_backward`
divides otherwise, so the gradient of the last elements is wrong; the forward is right,
and aot_eager_decomp_partition matches eager. A backward-only bug: only the backward graph
fails. Found by a fresh-bug hunt; the program is the issue's.

Upstream: https://github.com/pytorch/pytorch/issues/198119
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#198119",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.avg_pool2d_backward.default"],
    "fails_on_2_15": True,
    "subsystem": ["lowerings", "aten.avg_pool2d_backward.default"],
    "notes": "a backward-only lowering bug: the overhanging window of ceil_mode pooling",
}


def grad_of(f, x, backend=None):
    x = x.detach().clone().requires_grad_()
    (f if backend is None else torch.compile(f, backend=backend))(x).sum().backward()
    return x.grad


def f(x):
    return F.avg_pool1d(x, kernel_size=3, stride=2, ceil_mode=True)


x = torch.arange(6.0).reshape(1, 1, 6)
expected = grad_of(f, x)
actual = grad_of(f, x, "inductor")
print(expected, actual)
torch.testing.assert_close(actual, expected)
