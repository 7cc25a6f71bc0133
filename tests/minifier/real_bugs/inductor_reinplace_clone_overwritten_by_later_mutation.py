"""Inductor's reinplacing pass lets a later in-place op on an input overwrite an earlier snapshot.

`buf.index_fill_(...)` is functionalized into an out-of-place `index_fill` followed by
a copy back into the input; `snap = buf.clone()` is then taken, and `buf.clamp_()`
mutates the input again.  The reinplacing pass writes the index_fill result directly
into the input buffer (a copy_ epilogue into that input exists), and the no-op clone
is removed, so `snap` ends up aliasing the input storage and observes the later
clamp: the snapshot comes back clamped to 3.0 instead of holding 5.0, 6.0, ... 11.0.
aot_eager and aot_eager_decomp_partition are correct.

Upstream: https://github.com/pytorch/pytorch/issues/198094
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198094",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.index_fill.int_Scalar", "aten.clone.default", "aten.clamp.default", "aten.copy_.default"],
    "fails_on_2_15": True,
    "notes": "reinplace_inplaceable_ops reinplaces into a graph input whose copy_ epilogue writes a different (later) value",
}


def mark_snapshot_clip(buf, rows):
    buf.index_fill_(0, rows, 5.0)       # mark selected rows
    snap = buf.clone()                  # keep the marked state
    buf.clamp_(max=3.0)                 # then clip the caller's buffer in place
    return snap, snap.sum(dim=1)


torch.manual_seed(0)
buf = torch.arange(12.0).reshape(4, 3)
rows = torch.tensor([1])

eb, cb = buf.clone(), buf.clone()
expected = mark_snapshot_clip(eb, rows)
actual = torch.compile(mark_snapshot_clip)(cb, rows)

print("eager    snapshot:", expected[0].flatten().tolist())
print("compiled snapshot:", actual[0].flatten().tolist())
torch.testing.assert_close(cb, eb)
torch.testing.assert_close(actual, expected)
print("OK")
