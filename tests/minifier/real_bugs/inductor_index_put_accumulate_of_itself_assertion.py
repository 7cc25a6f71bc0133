"""`v.index_add(0, zeros, v)` on a tensor that needs grad: Inductor's `index_put` lowering asserts.

The same out-of-place `index_add` of a tensor into itself, now with a backward: Inductor's
lowering of the accumulating `index_put` fails a bare `assert` while compiling the forward
(`InductorError: AssertionError:`, no message). Eager and the aot stages run it. Found by
`minify hunt` (seed 21); its repro was refused as failing "another way" elsewhere until a
message-less exception's signature matched Inductor's wrapped line. Fixed in 2.15.

Upstream: none found (searched "index_put accumulate AssertionError lowering index_add self").
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.index_put.default"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "the accumulating index_put lowering asserts when its values are the tensor it indexes",
}


def f(x):
    v = torch.log(x)
    return v.index_add(0, torch.zeros(v.shape[0], dtype=torch.long), v)


x = torch.rand(16, requires_grad=True) + 0.5
torch.testing.assert_close(torch.compile(f)(x), f(x))
