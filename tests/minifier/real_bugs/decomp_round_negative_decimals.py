"""Inductor's `round(x, decimals=-3)` decomposition rounds exact halfway values the wrong way.

Inductor registers its own decomposition for `aten.round.decimals`:
`round(x * 10**d) * (1 / 10**d)`.  For negative `decimals` it multiplies by the
float32 value of 0.001 (slightly above 1/1000) instead of dividing by 1000 as eager
does, so an exact halfway value such as 998500.0 becomes 998.50006 instead of 998.5
and rounds up to 999000 instead of (round-half-even) 998000: an error of a full
rounding step (1000) on every such element.  The decomposition is already used by
backend="aot_eager_decomp_partition", which fails the same way as inductor.

Upstream: none found (searched: "round decimals decomposition inductor wrong", "torch.round decimals torch.compile mismatch", "round_dec decomposition")
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "aot_eager_decomp_partition",
    "ops": ["aten.round.decimals"],
    "fails_on_2_15": True,
    "notes": "torch/_inductor/decomposition.py round_dec multiplies by 1/10**d; for d<0 halfway cases round wrong (error = 10**-d)",
}


def report_totals(counts, weights):
    scaled = counts * weights
    rounded = torch.round(scaled, decimals=-3)          # round to the nearest thousand
    return rounded, rounded.sum(dim=1)


torch.manual_seed(0)
counts = (torch.randint(200, 2000, (4, 16)) * 500).float()   # many exact halfway values
weights = torch.ones(16)

expected = report_totals(counts, weights)
actual = torch.compile(report_totals)(counts, weights)

bad = expected[0] != actual[0]
print("mismatching elements:", bad.sum().item(), "of", bad.numel())
print("e.g. input", counts[bad][:3].tolist(), "eager", expected[0][bad][:3].tolist(), "compiled", actual[0][bad][:3].tolist())
torch.testing.assert_close(actual[0], expected[0], rtol=0, atol=0)
torch.testing.assert_close(actual[1], expected[1], rtol=0, atol=0)
print("OK")
