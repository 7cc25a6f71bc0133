"""Inductor's `bmm` of int8 tensors returns int64; eager keeps int8.

`torch.matmul` of (3, 1, 4) and (3, 4, 2) int8 tensors is a `bmm`; eager's result is int8.
Inductor's lowering computes it as a sum of products, promoted to int64, and returns that,
so the dtype changes silently. eager, aot_eager and aot_eager_decomp_partition keep int8.
Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/191308
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#191308",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.bmm.default"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "subsystem": ["lowerings", "aten.bmm.default"],
    "notes": "the bmm lowering's decomposition into a reduction promotes int8 to int64 and keeps it",
}


def cooccur(a, b):
    return torch.matmul(a, b)


a = torch.tensor([[[1, 0, 1, 1]], [[0, 1, 1, 0]], [[1, 1, 0, 1]]], dtype=torch.int8)
b = torch.tensor([[[1, 0], [1, 1], [0, 1], [1, 0]]] * 3, dtype=torch.int8)
expected = cooccur(a, b)
actual = torch.compile(cooccur)(a, b)
torch.testing.assert_close(actual, expected)
