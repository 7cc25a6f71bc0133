"""Two identical float16 reductions in one graph make Inductor emit invalid C++.

When the same half-precision reduction (here `x.sum(dim=0)`) appears twice in a graph,
Inductor fuses both into one CPU kernel and CSEs them into a single accumulator
(`tmp_acc0_vec`), but it still emits the float->Half conversion of the accumulator once
per output, both times as `auto at_Half_tmp_acc0_vec = at::vec::convert<at::Half,...>(...)`.
g++ rejects the kernel: "error: conflicting declaration 'auto at_Half_tmp_acc0_vec'"
-> InductorError: CppCompileError.  Same with prod/amax and bfloat16; float32 is fine.
eager, aot_eager and aot_eager_decomp_partition all work.

Upstream: none found (searched: "conflicting declaration at_Half_tmp_acc0_vec inductor
CppCompileError", "inductor cpu C++ compile error bfloat16 float16 reduction")
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.sum.dim_IntList", "aten.sum.dim_IntList"],
    "exception": "InductorError",
    "subsystem": ["lowerings", "aten.sum.dim_IntList"],
    "fails_on_2_15": True,
    "notes": "two identical fp16/bf16 reductions over the same input in one fused CPU kernel; cast of the CSE'd accumulator declared twice (CppCompileError)",
}


def column_stats(x):
    mean = x.sum(dim=0) / x.shape[0]          # helper 1: column mean
    centered = x - mean
    total = x.sum(dim=0)                      # helper 2 recomputes the same column sum
    return centered.abs().amax(dim=1), total * 0.5


torch.manual_seed(0)
x = torch.randn(64, 40).to(torch.float16)

print("eager:", column_stats(x)[1][:4])
print("compiled:", torch.compile(column_stats)(x)[1][:4])
