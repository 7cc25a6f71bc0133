"""A `__torch_function__`-only Tensor subclass input breaks AOTAutograd's runtime wrapper.

Wrapping inputs with `x.as_subclass(Tagged)`, where `Tagged` only overrides
`__torch_function__` (no `__torch_dispatch__`), is a common way to tag tensors.  Eager
and dynamo (backend="eager") handle it.  With backend="aot_eager" the graph compiles, but
when it runs, AOTAutograd's `_AnalyzeCustomOpInputOutputMode` returns NotImplemented for
the unknown subclass type and nothing else handles the op:
"TypeError: Multiple dispatch failed for 'torch._ops.aten.addmm.default'; all
__torch_dispatch__ handlers returned NotImplemented".  Inductor fails the same way on
ops it does not codegen (here the extern addmm.out); pointwise-only graphs survive there.

Upstream: https://github.com/pytorch/pytorch/issues/193932
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#193932",
    "kind": "runtime_error",
    "stage": "aot_eager",
    "ops": ["aten.addmm.default", "aten.t.default", "aten.relu.default"],
    "exception": "TypeError",
    "fails_on_2_15": False,
    "notes": "subclass without __torch_dispatch__ as graph input; AOT runtime analysis mode returns NotImplemented (fix PR pytorch/pytorch#193968)",
}


class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def head(x, w, b):
    h = torch.nn.functional.linear(x, w, b)
    return torch.relu(h).sum(dim=1)


torch.manual_seed(0)
x = torch.randn(4, 8).as_subclass(Tagged)
w = torch.randn(3, 8)
b = torch.randn(3)

print("eager:", head(x, w, b))
print("compiled:", torch.compile(head, backend="aot_eager")(x, w, b))
