"""Two closures of one factory, over different Tensor methods: dynamo reuses the first one's graph for the second.

`make(op)` returns `fn(x, y) = op(x, y) * 2`. Compiled with `dynamic=True`, `make(Tensor.__add__)`
runs first; `make(Tensor.__mul__)` then shares its code object, and dynamo's cache entry for that
code has no guard on the closure cell `op`, so the `__add__` graph runs for `__mul__`: [18, 6]
instead of [36, 4]. Already with backend="eager", and with Inductor's caches off. Each graph is
right alone: the bug is a guard, outside every graph, so pt2kit names it and exits 5. Found by a
fresh-bug hunt. (Under pt2kit's capture before the fix of after_dynamo's seam, the wrapper's new
identity made dynamo compile again, and the failure did not show at all.)

Upstream: https://github.com/pytorch/pytorch/issues/197811
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197811",
    "kind": "accuracy",
    "stage": "eager",
    "ops": ["Tensor.__add__", "Tensor.__mul__"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "exit5": "the bug is dynamo's, outside its graphs",
    "notes": "dynamo's cache entry for a shared code object lacks a guard on the closure's Tensor method (dynamic=True)",
}


def make(op):
    def fn(x, y):
        return op(x, y) * 2

    return fn


add = make(torch.Tensor.__add__)
mul = make(torch.Tensor.__mul__)

x = torch.tensor([6.0, 1.0])
y = torch.tensor([3.0, 2.0])
expected = (add(x, y), mul(x, y))
actual = (torch.compile(add, dynamic=True)(x, y), torch.compile(mul, dynamic=True)(x, y))
torch.testing.assert_close(actual, expected)
