"""Inductor's `min(dim)` on a bool tensor with dynamic shapes returns the wrong indices.

`x.min(0)` of a bool[3, 32], compiled with `dynamic=True`: the values are right, the
indices point at other rows (23 of 32 differ).  A static compile is right: the bug
needs the symbolic sizes, which pt2kit keeps in the repro (`mark_dynamic`).

Upstream: https://github.com/pytorch/pytorch/issues/184893 (there after an automatic
dynamic recompile; `dynamic=True` shows it at once).
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#184893",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.min.dim"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "the dynamic-shape min/argmin reduction over bool compares the wrong way",
}


def colmin(x):
    return x.min(0)


torch.manual_seed(0)
x = torch.randint(2, size=(3, 32), dtype=torch.bool)
eager = colmin(x)
compiled = torch.compile(colmin, dynamic=True)(x)
assert torch.equal(eager.values, compiled.values), "values differ"
assert torch.equal(eager.indices, compiled.indices), f"indices differ: {eager.indices.tolist()} vs {compiled.indices.tolist()}"
