"""`dst[:] = src[:]` then `src.add_(1)`: Inductor's copy into `dst` reads `src` after the add.

Both are the program's inputs, and both writes are the program's own. Eagerly `dst` gets
`src` as it was; compiled, `dst` gets `src + 1`. Inductor's `remove_noop_ops` drops the
copy of the slice `src[0:, :]` (a no-op view) and the copy then reads the input itself,
which the add has already written. eager, aot_eager and aot_eager_decomp_partition are
right. Fixed in 2.15. Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/198131
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198131",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["operator.setitem", "Tensor.add_"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "a program that writes into both its inputs: the copy into one reads the other after its write",
}


def fn(dst, src):
    dst[0:, :] = src[0:, :]
    src.add_(1)
    return src


dst, src = torch.zeros(3, 4), torch.arange(12.0).view(3, 4)
dst_compiled, src_compiled = dst.clone(), src.clone()
fn(dst, src)
torch.compile(fn, backend="inductor")(dst_compiled, src_compiled)
assert torch.equal(src_compiled, src)
assert torch.equal(dst_compiled, dst), f"compiled dst[0] is {dst_compiled[0].tolist()}, eager's {dst[0].tolist()}"
