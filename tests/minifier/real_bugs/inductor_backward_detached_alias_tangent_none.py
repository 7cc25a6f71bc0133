"""Inductor's backward is handed no tangent for an output that is a detached alias of two others.

`sin(x)` returned as two slices and a detach (plus an unrelated `w * 2`): the detached
output gets no gradient, and Inductor's compiled backward asserts the stride of the
tangent it gets, `None`, raising "TypeError: expected Tensor() for op: input". Eager,
aot_eager and aot_eager_decomp_partition run it. A category more than a case: the
backward graph, rebuilt alone, fails otherwise (its `None` tangent reaches an earlier
op), so the dynamo graph is the unit that fails the program's way. Found by a fresh-bug
hunt; the program is our own (the alias handling PRs pytorch#194479 and #194760 touch).

Upstream: https://github.com/pytorch/pytorch/pull/194760
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#194760",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["operator.getitem", "torch.sin", "Tensor.detach", "operator.mul"],
    "exception": "TypeError",
    "fails_on_2_15": True,
    "notes": "the aot backward alone fails otherwise than in the program: the dynamo graph is the unit",
}


def f(x, w):
    y = torch.sin(x)
    return y[0:4], y[4:8], y.detach(), w * 2


x = torch.randn(8, requires_grad=True)
w = torch.randn(8, requires_grad=True)
a, b, c, d = torch.compile(f)(x, w)
(a.sum() + b.sum() + d.sum()).backward()
print(x.grad, w.grad)
