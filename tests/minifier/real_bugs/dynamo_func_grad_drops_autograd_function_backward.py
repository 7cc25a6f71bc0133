"""Under torch.compile, `torch.func.grad` ignores a custom `autograd.Function`'s backward.

A straight-through estimator: forward rounds, backward passes the gradient through
unchanged.  `torch.func.grad` of it in eager gives ones (the custom backward).  Compiled,
Dynamo inlines `forward` as ordinary ops and the grad transform differentiates `round`
itself, so the gradient is all zeros -- no error, no graph break.  Already wrong with
backend="eager".

Upstream: https://github.com/pytorch/pytorch/issues/193279
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#193279",
    "kind": "accuracy",
    "stage": "eager",
    "ops": ["torch.func.grad", "torch.autograd.Function"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "exit5": "the bug is dynamo's, outside its graphs",
    "notes": "backward-only: dynamo inlines the Function's forward under functorch grad and drops its backward",
}


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.round(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad


def loss(x):
    return (RoundSTE.apply(x) * x).sum()


x = torch.tensor([0.3, 1.7, -2.2, 0.5])
ref = torch.func.grad(loss)(x)
out = torch.compile(torch.func.grad(loss))(x)
torch.testing.assert_close(out, ref)
