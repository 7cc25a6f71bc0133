"""`avg_pool2d(x, 2, ceil_mode=True)` under `dynamic=True`: Inductor's gradient of the overhanging last window is wrong.

With `ceil_mode=True` the last window along a dim of odd size covers one element: eagerly its
gradient is 1/2 (the window clipped to the input), Inductor's `avg_pool2d_backward` lowering
divides by the full kernel (1/4). The forward is right. Compiled with `dynamic=True`, the dim of
size 2 is symbolic in the program's graph; a repro that marks it with `mark_dynamic` made dynamo
raise ConstraintViolationError when it specialized it again, which the program never raised (it
now marks with `maybe_mark_dynamic`). Found by `minify hunt` (seed 24; seed 22 found it static).

Upstream: https://github.com/pytorch/pytorch/issues/198119
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198119",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.avg_pool2d_backward.default"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "the backward lowering divides a ceil_mode window clipped by the input by the whole kernel",
}


def pool(x):
    return torch.nn.functional.avg_pool2d(x, 2, ceil_mode=True)


x = (torch.randn(5, 2, 9, generator=torch.Generator().manual_seed(40)) * 1e4).requires_grad_()
pool(x).sum().backward()
expected = x.grad.clone()
x.grad = None
torch.compile(pool, dynamic=True)(x).sum().backward()
torch.testing.assert_close(x.grad, expected)
