"""The Hessian of a function of a matrix and its trace, compiled whole: Inductor gets it wrong.

`torch.compile(hessian(f))` traces the double transform (`jacfwd(jacrev(f))`) into one
graph; its aot graph writes the trace's gradient with `index_put` into an expanded
tensor, and Inductor's code for that write differs from eager's: some Hessian entries
are off by about 0.1 (float64). aot_eager and aot_eager_decomp_partition are right.

The dynamo graph enters functorch's levels and takes its gradients itself: pt2kit's
level-4 hook ran its eager reference under `no_grad`, which made the transform's
gradient None, left a functorch level entered, and changed the program's error (and a
healthy program's too). Found by a fresh-bug hunt.
"""
import torch
from torch.func import hessian

CASE = {
    "upstream": "pytorch/pytorch#190855",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.index_put", "aten.expand"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "compile(hessian(f)) of 1 / (t + trace(t) * eye): index_put into an expanded tensor lowered wrong",
}

torch.set_default_dtype(torch.float64)
n = 3


def f(t):
    return torch.mean(1.0 / (t + torch.trace(t) * torch.eye(n, dtype=t.dtype)))


x = torch.tensor([[0.10, 0.20, 0.30], [0.40, 0.50, 0.60], [0.70, 0.80, 0.95]])
expected = hessian(f)(x)
torch.testing.assert_close(torch.compile(hessian(f))(x), expected)
