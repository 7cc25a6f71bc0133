"""Inductor reads an int64 input *after* a later in-place write to it (through an int32 view).

`halves` is a fresh tensor computed from an int32 reinterpretation of the int64 input
`ids` and updated in place; afterwards the caller's `ids` are partly overwritten with
`ids[:, 2:5] = 2`.  In eager `halves` (and the keys derived from it) reflect `ids`
*before* the write.  Inductor orders the read of `ids` after the mutation, so the
returned keys contain values computed from the overwritten ids (e.g. 17179869192
instead of 12884901872).  aot_eager and aot_eager_decomp_partition are correct.

Upstream: https://github.com/pytorch/pytorch/issues/198101
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198101",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.view.dtype", "aten.mul.Tensor", "aten.sub.Tensor", "aten.copy_.default", "aten.slice_scatter.default"],
    "fails_on_2_15": True,
    "notes": "scheduler/mutation ordering: read of a dtype-view of an input is moved after a later write to that input",
}


def make_keys(ids):
    halves = ids.view(torch.int32) * 2      # reinterpret each int64 id as two int32 halves
    halves.sub_(-4)                         # bias the halves in place
    ids[:, 2:5] = 2                         # reset a window of the caller's ids
    return halves.view(torch.int64)         # must be built from the ids *before* the reset


torch.manual_seed(0)
ids = torch.arange(-12, 12, dtype=torch.int64).reshape(4, 6)

expected = make_keys(ids.clone())
actual = torch.compile(make_keys)(ids.clone())

print("eager   :", expected[0].tolist())
print("compiled:", actual[0].tolist())
assert torch.equal(expected, actual), "torch.compile returned keys computed from the overwritten ids"
print("OK")
