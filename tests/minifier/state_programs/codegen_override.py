"""A script overrides Inductor's C++ code for relu (as PyTorch's older minifier test did): relu becomes abs."""
import torch
from torch._inductor.codegen.cpp import CppOverrides, CppVecOverrides


def relu_as_abs(x):
    return f"std::abs({x})"


def vec_relu_as_abs(x):
    return f"{x}.abs()"


CppOverrides.relu = staticmethod(relu_as_abs)
CppVecOverrides.relu = staticmethod(vec_relu_as_abs)


def f(x):
    return torch.relu(x * 2).sum(dim=1)


torch.manual_seed(0)
x = torch.randn(8, 16)
torch.testing.assert_close(torch.compile(f)(x), f(x))
