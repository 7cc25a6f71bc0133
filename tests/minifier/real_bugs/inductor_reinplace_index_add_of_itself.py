"""`v.index_add(0, index, v)`, out of place: Inductor's reinplacing makes it write `v` while reading it.

Eager's out-of-place `index_add` copies `v`, then adds `v` into the copy. Inductor's post-grad
reinplacing turns the functional `index_put` into the in-place `index_put_` on `v` itself, whose
values are `v` too, and ATen refuses it: "some elements of the input tensor and the written-to
tensor refer to a single memory location". `v` must be a buffer of the graph (here a `cumprod`),
not an input. Found by `minify hunt` (seed 21). Fixed in 2.15.

Upstream: https://github.com/pytorch/pytorch/issues/156786 (the aliasing check of pytorch#160311)
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#156786",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["aten.cumprod.default", "aten.index_put.default"],
    "exception": "RuntimeError",
    "fails_on_2_15": False,
    "subsystem": ["post_grad_passes", "reinplace_inplaceable_ops"],
    "notes": "reinplace_inplaceable_ops makes index_put in place although its values alias the tensor written",
}


def f(x):
    v = x.cumprod(0)
    return v.index_add(0, torch.zeros(v.shape[0], dtype=torch.long), v)


x = torch.randint(-4, 5, (1, 16, 1), dtype=torch.int32)
torch.testing.assert_close(torch.compile(f)(x), f(x))
