"""`torch.cond` whose branches close over a tensor fails to build its backward.

Each branch reads `y` (a closure): `x + y.sum()` and `x - y.mean()`.  The gradient of
`y` is a stride-0 `expand` in one branch's backward and contiguous in the other's;
`cond`'s merging of its branches' outputs asserts that a stride of 0 appears in both,
and AOTAutograd's trace of the joint graph stops with "expected b_val == 0 when
a_val == 0".  Eager and dynamo alone run it.  The failure needs neither branch's
arithmetic: the branches' ops are what pt2kit's body reduction takes away.

Upstream: none found (searched: cond backward closure stride, _bound_stride, _merge_output).
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["torch.ops.higher_order.cond"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "cond's output merging compares the branches' gradient strides; a 0 stride in one branch only is rejected",
}


def f(x, y):
    def t(x):
        return x + y.sum()

    def e(x):
        return x - y.mean()

    return torch.cond(x[0] > 0, t, e, (x,))


torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
y = torch.randn(3, requires_grad=True)
out = torch.compile(f)(x, y)
out.sum().backward()
print(x.grad, y.grad)
