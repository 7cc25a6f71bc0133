"""`relu6` of a uint8 tensor: Inductor's C++ calls `max_propagate_nan(int, unsigned char)`, which does not exist.

`relu6` is `hardtanh(x, 0, 6)`, a clamp. For uint8 values Inductor's C++ code generator passes
the bound as an `int` and the value as an `unsigned char` to the one-type template
`max_propagate_nan`, and g++ finds no match: a C++ compile error. Eager computes it. Found by
`minify hunt` (seed 21), after an `abs`. Fixed in 2.15.

The scalar C++ path has the bug; on an AVX2-only CPU Inductor vectorizes this kernel instead, and
it compiles. The program sets `cpp.simdlen = 1` (scalar code) so that it fails on every CPU, and
the repro carries that config.

Upstream: none found (searched "relu6 uint8 C++ compile error max_propagate_nan").
"""
import torch
import torch._inductor.config

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.clamp_min.default"],
    "exception": "CppCompileError",
    "fails_on_2_15": False,
    "notes": "the clamp's int bound and its uint8 operand reach max_propagate_nan with two types",
}


def f(x):
    return torch.nn.functional.relu6(torch.abs(x))


torch._inductor.config.cpp.simdlen = 1
x = torch.tensor([3, 200, 7], dtype=torch.uint8)
torch.testing.assert_close(torch.compile(f)(x), f(x))
