"""A custom autograd.Function whose backward writes into a tensor it saved, which the forward also returns.

`offsets = x.clone()` is saved for backward and returned; the backward does
`offsets.add_(grad_out)`. Compiling (`fullgraph=True`, any backend with AOTAutograd's partitioner:
aot_eager already) fails in the partitioner: `AssertionError: Node add was invalid, but is output`.
Eager runs it. The dynamo graph holds `autograd_function_apply`, a higher-order op dynamo made but
cannot trace again: compiled again with torch.compile, it breaks there and the Function runs
eagerly, so no stage reaches the partitioner. pt2kit hands that graph to each stage's backend as
dynamo handed it (no dynamo in between), where the partitioner fails again; the repro does the
same. Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/172956
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#172956",
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["torch.ops.higher_order.autograd_function_apply"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "the partitioner's invariant fails on a saved tensor written by the backward; dynamo cannot trace the graph again, so it is handed to the backend",
}


class Offsets(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, offsets):
        ctx.save_for_backward(offsets)
        return x * 2

    @staticmethod
    def backward(ctx, grad_out):
        (offsets,) = ctx.saved_tensors
        offsets.add_(grad_out)
        return grad_out.clone(), None


def fn(x):
    offsets = x.clone()
    out = Offsets.apply(x, offsets)
    return out.clone(), offsets


torch.manual_seed(0)
x = torch.randn(1024, requires_grad=True)
out, offsets = torch.compile(fn, backend="inductor", fullgraph=True)(x)
out.sum().backward()
print("did not fail")
