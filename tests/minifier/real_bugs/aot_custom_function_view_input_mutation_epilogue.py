"""A write through `.detach()` into an input a custom `autograd.Function` returned as-is crashes AOTAutograd.

`Ident.apply(t)` returns `t` itself, so autograd hands back a view of it that it guards
against in-place writes (made "inside a custom Function"). The compiled function writes
into it through `a.detach().mul_(2)`, which eager allows. AOTAutograd replays that write
on the input in its mutation epilogue as a tracked `copy_`, and autograd's guard raises
"Output 0 of Ident is a view and is being modified inplace". A plain copy of the input
has no guard: the repro must make the same kind of view again.

Upstream: https://github.com/pytorch/pytorch/pull/194534 (also #195359).
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#194534",
    "kind": "runtime_error",
    "stage": "aot_eager",
    "ops": ["Tensor.detach", "Tensor.mul_"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "the input is a view made by a custom Function (CreationMeta.IN_CUSTOM_FUNCTION); AOTAutograd's mutation epilogue writes into it with autograd on",
}


class Ident(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def f(a):
    a.detach().mul_(2)
    return a.detach() * 3


base = torch.randn(2, 3, requires_grad=True)
expected = f(Ident.apply(base * 1))
print(torch.compile(f)(Ident.apply(base * 1)))
