"""An in-place add through `F.dropout(x, training=False)`'s result is lost on the input.

With `training=False`, `F.dropout` returns its input itself, so `y += y` doubles the
caller's `x` in eager.  Compiled through AOTAutograd, the graph's write never reaches
`x`: the caller's tensor stays as it was (a lost input mutation, the caller's own
check sees it).  The dynamo graph is right under `eager`; `aot_eager` loses it.

Upstream: https://github.com/pytorch/pytorch/issues/195422 (fixed in 2.15).
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#195422",
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["torch.nn.functional.dropout", "operator.iadd"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "functionalization misses that dropout(training=False) aliases its input; the write into the input is dropped",
}


def f(x):
    y = F.dropout(x, 0.5, False)  # training=False: y is x
    y += y
    return y


x_ref = torch.ones(2, 2)
f(x_ref)
x = torch.ones(2, 2)
torch.compile(f)(x)
torch.testing.assert_close(x, x_ref)
