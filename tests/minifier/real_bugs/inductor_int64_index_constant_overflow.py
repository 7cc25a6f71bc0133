"""Inductor crashes at compile time when folded int64 constants exceed int64 range.

A multiplicative hash of positions, `arange(n) * A * B * C` (each constant fits in int64,
the tensor product wraps around in int64 as usual in eager), compiles fine up to
aot_eager_decomp_partition.  Inductor propagates the int64 arange into its sympy index
expressions and folds the constants into a single coefficient A*B*C, which no longer fits
in int64; the C++ index printer then raises during code generation:
"InductorError: OverflowError: 3985564788230772387896903229 too big to convert to int64_t".
Same root cause (int64 arange folded into index arithmetic) as the wrong-result issue below,
but here compilation itself fails.

Upstream: https://github.com/pytorch/pytorch/issues/175966
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#175966",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.arange.start", "aten.mul.Tensor", "aten.add.Tensor", "aten.bitwise_and.Scalar"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "constant/index propagation folds int64 arange*c1*c2*c3 into one sympy coefficient > 2**63; cpp printer raises OverflowError",
}


def hashed_positions(tokens):
    pos = torch.arange(tokens.shape[1], dtype=torch.int64)
    h = pos * 0x9E3779B9
    h = h * 0x85EBCA6B
    h = h * 0x27D4EB2F          # wraps in int64, as intended for a hash
    bucket = (tokens + h) & 0xFFFF
    return bucket, bucket.float().mean(dim=1)


torch.manual_seed(0)
tokens = torch.randint(0, 50_000, (2, 12))

print("eager:", hashed_positions(tokens)[0][0, :4].tolist())
print("compiled:", torch.compile(hashed_positions)(tokens)[0][0, :4].tolist())
