"""`F.grid_sample` (bilinear, zeros padding) of a map holding -inf: compiled, the output is NaN where eager's is finite.

A log-probability map, `log(p)`, is -inf wherever `p == 0` (here its whole first column). Sampled
near the right border, a bilinear neighbour falls outside the image. Eager skips that neighbour,
so the result is finite. The `aten.grid_sampler_2d` decomposition instead gathers from a valid
index (column 0) and multiplies by a mask weight of 0: `0 * -inf = NaN`. The same holds for
`padding_mode="border"` and `"reflection"`. Eager and aot_eager are right; the decompositions
are where it breaks, and dropping Inductor's decomposition of the op is the workaround. Found by
a fresh-bug hunt (the issue search found only pytorch#24823, eager's own NaN handling).

Upstream: none found.
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "aot_eager_decomp_partition",
    "ops": ["torch.nn.functional.grid_sample"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "subsystem": ["decomposition", "aten.grid_sampler_2d.default"],
    "notes": "the grid_sampler_2d decomposition masks an out-of-bounds neighbour by a 0 weight: 0 * -inf = NaN",
}


def f(p, grid):
    logp = torch.log(p)  # -inf where p == 0
    return F.grid_sample(logp, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


torch.manual_seed(0)
p = torch.rand(1, 1, 4, 5) + 0.1
p[..., 0] = 0.0  # the first column is impossible: log(p) = -inf
grid = torch.tensor([[[[0.9, 0.0], [0.0, 0.0], [-0.2, 0.3]]]])  # x = 0.9: near the right edge

expected = f(p, grid)
assert torch.isfinite(expected).all(), expected
actual = torch.compile(f)(p, grid)
torch.testing.assert_close(actual, expected)
