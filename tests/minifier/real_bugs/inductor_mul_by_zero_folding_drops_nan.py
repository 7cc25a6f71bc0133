"""Inductor folds `x * 0` to 0 for float x, so softshrink turns NaN inputs into 0.

The softshrink decomposition is `where(|a| > lambd, a - sign(a)*lambd, a * 0)`; the
`a * 0` is there precisely so NaN propagates.  Inductor's joint-graph
constant folding (UniformValueConstantFolder peephole: `mul(x, 0) -> 0` whenever the
multiplier is the literal int 0) replaces it with a constant 0 even for floating-point
x, so NaN (and inf*0) are silently lost.  Here NaN-marked missing values come out as
0.0 and the per-row count of missing values is wrong.  aot_eager_decomp_partition
(same decomposition, no Inductor passes) matches eager.

Upstream: https://github.com/pytorch/pytorch/pull/186281 (fix PR; no separate issue found)
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#186281",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.softshrink.default", "aten.mul.Tensor", "aten.where.self"],
    "subsystem": ["joint_graph_passes", "constant_fold_uniform_value"],
    "fails_on_2_15": False,
    "notes": "joint_graph UniformValueConstantFolder folds float x*0 -> 0, dropping NaN/Inf",
}


def shrink_features(x, w):
    h = F.softshrink(x @ w, lambd=0.5)
    missing = torch.isnan(h).sum(dim=1)
    return h, missing


torch.manual_seed(0)
x = torch.randn(6, 8)
x[torch.rand(6, 8) < 0.2] = float("nan")      # missing measurements
w = torch.randn(8, 5)

expected = shrink_features(x, w)
actual = torch.compile(shrink_features)(x, w)

print("eager    missing per row:", expected[1].tolist())
print("compiled missing per row:", actual[1].tolist())
torch.testing.assert_close(actual[0], expected[0], equal_nan=True)
assert torch.equal(actual[1], expected[1])
print("OK")
