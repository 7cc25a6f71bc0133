"""Inductor computes `torch.arange(int64) * big_int` in 32 bits and overflows.

Multiplying an int64 `torch.arange` by a large constant (here a 1e9+7 hashing
multiplier) must be done in int64.  Inductor folds the arange into its index
arithmetic and emits the product with 32-bit index math, so every position whose
product exceeds 2**31 wraps around (e.g. 3*1000000007 comes back as -1294967275).
The bug is in Inductor's lowering of arange/mul (aot_eager_decomp_partition is correct).

Upstream: https://github.com/pytorch/pytorch/issues/175966
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#175966",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.arange.start_step", "aten.mul.Tensor"],
    "fails_on_2_15": True,
    "notes": "int64 arange folded into 32-bit index expressions; product wraps past 2**31",
}


def position_hash(tokens):
    pos = torch.arange(tokens.shape[1], dtype=torch.int64)
    mixed = tokens * 31 + pos * 1_000_000_007
    return mixed % 2_305_843_009_213_693_951, mixed.max(dim=1).values


torch.manual_seed(0)
tokens = torch.randint(0, 50_000, (2, 12), dtype=torch.int64)

expected = position_hash(tokens)
actual = torch.compile(position_hash)(tokens)

print("eager   :", expected[0][0, :6].tolist())
print("compiled:", actual[0][0, :6].tolist())
for e, a in zip(expected, actual):
    assert torch.equal(e, a), "compiled int64 hash differs from eager (32-bit overflow)"
print("OK")
