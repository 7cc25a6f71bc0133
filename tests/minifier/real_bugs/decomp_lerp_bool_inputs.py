"""`torch.lerp` with bool start/end and a 0-d float weight fails to compile.

Eager `torch.lerp(start, end, weight)` accepts bool `start`/`end` with a 0-d floating
`weight` and returns a float tensor.  eager and aot_eager backends agree, but the lerp
decomposition (used by aot_eager_decomp_partition and inductor) computes `end - start`
on the bool tensors before type promotion, which raises "Subtraction, the `-` operator,
with two bool tensors is not supported".

Upstream: https://github.com/pytorch/pytorch/issues/197105
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197105",
    "kind": "compile_error",
    "stage": "aot_eager_decomp_partition",
    "ops": ["aten.lerp.Tensor"],
    "exception": "BackendCompilerFailed",
    "fails_on_2_15": True,
    "notes": "lerp decomposition subtracts bool tensors before promotion",
}


def soft_mask(scores, alpha):
    hard = scores > 0.0
    prev = hard.roll(1, dims=1)
    mixed = torch.lerp(prev, hard, alpha)      # bool, bool, 0-d float weight
    return (mixed * scores).sum(dim=1)


torch.manual_seed(0)
scores = torch.randn(6, 10)
alpha = torch.tensor(0.3)

print("eager:", soft_mask(scores, alpha))
print("compiled:", torch.compile(soft_mask, backend="aot_eager_decomp_partition")(scores, alpha))
