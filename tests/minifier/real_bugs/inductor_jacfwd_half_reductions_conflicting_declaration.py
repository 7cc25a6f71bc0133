"""jacfwd of a float16 matmul chain: Inductor's C++ for the fused reductions does not compile.

`torch.func.jacfwd` batches the function over the 9 tangents of a 3x3 float16 input. The
batched graph sums the same float16 tensor twice beside a third reduction in one fused
CPU kernel, and Inductor declares the CSE'd accumulator's conversion to Half twice: g++
says "conflicting declaration 'auto at_Half_tmp_acc0_vec'" (InductorError:
CppCompileError). eager, aot_eager and aot_eager_decomp_partition all work.

A genuine C++ compile error of several ops, for the query bound: 54 nodes, and the kernel
the compiler's error points at is asked about first; the bug needs seven of its ops.

Upstream: pytorch/pytorch#194706. Still fails on 2.15.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#194706",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.sum.dim_IntList", "aten.sum.dim_IntList", "aten.mul.Tensor", "prims.rev.default"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "duplicate fp16 reductions beside a third in one fused C++ kernel, through jacfwd; a multi-op C++ error within the query bound",
}


def f(x):
    return torch.sum(torch.mm(torch.mm(torch.prod(x) + x, torch.sum(x) + x), torch.sum(x) + x))


x = (torch.arange(1, 10, dtype=torch.float16) / 10).reshape(3, 3)
print(torch.compile(torch.func.jacfwd(f))(x))
