"""Inductor's freezing folds a BatchNorm into a ConvTranspose2d along the wrong weight dimension.

`ConvTranspose2d(4, 4, 3)` then `BatchNorm2d(4)`, in eval under `torch._inductor.config.freezing = True`:
the compiled output is off by up to 2.35. Freezing's binary folding (`fx_passes/binary_folding.py`,
`_check_conv_and_broadcast_op`) never checks `transposed`, so it scales weight dim 0, which is
`in_channels` for a transposed convolution, as if it were `out_channels`; with as many in as out
channels the shapes agree and the fold goes through. Without freezing the program passes, and
eager, aot_eager and aot_eager_decomp_partition agree with eager. Freezing's aot graphs never reach
a compiler pt2kit watches, so the dynamo graph (the conv and the batch norm) is the repro.

Upstream: none found (searched: freezing conv_transpose batchnorm wrong; binary folding transposed).
Found by hunt 13 (pt2kit's own program).
"""
import torch
import torch._inductor.config

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["torch.conv_transpose2d", "torch.nn.functional.batch_norm"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "binary folding treats a transposed conv's weight dim 0 (in_channels) as out_channels",
}

torch._inductor.config.freezing = True
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.ConvTranspose2d(4, 4, 3), torch.nn.BatchNorm2d(4))
bn = m[1]
bn.running_mean.uniform_(-1, 1)
bn.running_var.uniform_(0.5, 2)
bn.weight.data.uniform_(-2, 2)
bn.bias.data.uniform_(-1, 1)
m.eval()
x = torch.randn(2, 4, 8, 8)
with torch.no_grad():
    eager = m(x)
    compiled = torch.compile(m)(x)
assert torch.allclose(compiled, eager, atol=1e-4), (compiled - eager).abs().max()
print("ok")
