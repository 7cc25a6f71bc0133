"""AOTAutograd fails on a ZeroTensor input combined with a Python scalar.

The gradient of `torch.sgn` is an efficient ZeroTensor (`x._is_zerotensor()` is True).
Eager treats it as an ordinary all-zeros tensor, so `grad + 10` works.  Under
torch.compile, already with backend="aot_eager" (dynamo alone is fine), the runtime
wrapper that AOTAutograd puts around the graph re-dispatches `aten.add.Tensor(zt, 10)`
for the ZeroTensor and ends up calling `aten::expand` with the Python int as `self`:
"RuntimeError: aten::expand() Expected a value of type 'Tensor' for argument 'self' but
instead found type 'int'".  With inductor the same input crashes harder (see
inductor_zerotensor_input_segfault.py).

Upstream: https://github.com/pytorch/pytorch/issues/197067
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197067",
    "kind": "runtime_error",
    "stage": "aot_eager",
    "ops": ["aten.add.Tensor", "aten.mul.Tensor", "aten.sum.default"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "ZeroTensor input (grad of sgn) + python int; op re-dispatched under AOT runtime _AnalyzeCustomOpInputOutputMode ends in expand(10, ...); same mode as aot_torch_function_subclass_input but a different failure",
}


def shifted_grad_stats(g, w):
    shifted = g + 10          # a ZeroTensor plus a Python scalar
    scaled = shifted * w
    return scaled.sum(dim=1), scaled.amax()


torch.manual_seed(0)
x = torch.randn(4, 6, requires_grad=True)
g = torch.autograd.grad(torch.sgn(x).sum(), x)[0]
assert g._is_zerotensor()
w = torch.randn(4, 6)

print("eager:", shifted_grad_stats(g, w)[1].item())
out = torch.compile(shifted_grad_stats, backend="aot_eager")(g, w)
print("compiled:", out[1].item())
