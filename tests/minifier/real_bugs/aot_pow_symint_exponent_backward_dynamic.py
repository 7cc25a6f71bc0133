"""`torch.pow(x, n)` with a Python-int exponent fails to compile for training under `dynamic=True`.

With `dynamic=True` the int argument `n` becomes a SymInt.  AOTAutograd traces the joint
graph, and pow's backward formula compares the exponent with 0 on the C++ side:
`Scalar`'s equality does not handle a symbolic int, and the compile stops with
"INTERNAL ASSERT FAILED at c10/core/Scalar.h: NYI SymInt equality" (BackendCompilerFailed).
backend="eager" is fine; aot_eager and later fail.  A literal exponent, or an input that
does not require grad, compiles.

Upstream: https://github.com/pytorch/pytorch/issues/185715 (reported with autograd.grad on
CUDA; a plain .backward() on the CPU is enough).
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#185715",
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["aten.pow.Tensor_Scalar"],
    "exception": "BackendCompilerFailed",
    "fails_on_2_15": False,
    "notes": "pow_backward's `exponent == 0` on a Scalar holding a SymInt: NYI SymInt equality",
}


def f(x, n):
    return torch.pow(x, n) * 3


x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
f(x, 2).sum().backward()
ref = x.grad.clone()
x.grad = None
torch.compile(f, dynamic=True)(x, 2).sum().backward()
torch.testing.assert_close(x.grad, ref)
