"""The gradient of an overlapping `unfold` view a compiled graph returns is wrong under a weighted loss.

`(x + 1).unfold(0, 4, 1)` returns overlapping windows of an intermediate. AOTAutograd
returns the view and regenerates it outside the graph; under a loss that weighs the
windows' elements differently, `x.grad` is wrong (8 of 10 elements), already with
backend="aot_eager". Under `out.sum()` (a gradient of ones) it is right: a repro whose
loss sums the outputs passes, so the repro must weigh them as the program's loss did.

Upstream: none found (searched: aot_autograd overlapping view output gradient, unfold
backward, as_strided backward). Found by a fresh-bug hunt.
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["operator.add", "Tensor.unfold"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "the program's gradient into the output is not the same everywhere; under ones it is right",
}


def windows(x):
    return (x + 1).unfold(0, 4, 1)


torch.manual_seed(0)
x, w = torch.randn(10, requires_grad=True), torch.randn(7, 4)
(torch.compile(windows)(x) * w).sum().backward()
compiled, x.grad = x.grad, None
(windows(x) * w).sum().backward()
torch.testing.assert_close(compiled, x.grad)
