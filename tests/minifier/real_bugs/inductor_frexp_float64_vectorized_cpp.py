"""Inductor's vectorized C++ for `frexp` on float64 does not compile.

`m, e = torch.frexp(a); return m + e` on 70 float64 values: the kernel adds the int32
exponent to the float64 mantissa in vector lanes, and asks for a conversion
`convert<double, 2, int32_t, 1>(VectorizedN<int, 2>&)` that ATen's vec headers do not
have: "CppCompileError: C++ compile error".  Everything before Inductor runs it.

Upstream: none found (searched: frexp inductor cpp, convert<double, 2, int32_t, 1>).
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.frexp.Tensor", "aten.add.Tensor"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "the C++ vectorizer converts an int32 vector to a double vector of another width, which vec_convert.h lacks",
}


def f(a):
    m, e = torch.frexp(a)
    return m + e


a = torch.linspace(-3000, 3000, 70, dtype=torch.float64)
ref = f(a)
out = torch.compile(f)(a)
torch.testing.assert_close(out, ref)
