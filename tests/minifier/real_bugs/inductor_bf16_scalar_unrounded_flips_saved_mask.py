"""bf16 `margin_ranking_loss(margin=1.7)`: Inductor keeps the scalar margin in fp32, so the mask saved for the backward flips.

Eagerly, `-t * (x - y) + 1.7` on bf16 tensors rounds 1.7 to bf16 (1.703125) and the sum is
exactly 0, so `clamp_min`'s mask `(... >= 0)` is true and the gradient is -0.5. Compiled,
Inductor adds the fp32 scalar 1.7 and the sum is slightly negative: the mask is false and
the gradient is 0. The forward's loss is the same to bf16; the bool mask it saves for the
backward is what differs, so only an aot forward graph, whose outputs include what it saves,
shows it (the dynamo graph's gradient of 0 is within the fp64 rule). eager, aot_eager and
aot_eager_decomp_partition are right. Fixed upstream by rounding scalars in
`promote_constants` (pytorch#185869). Found by a fresh-bug helper, tried as a user.

Upstream: https://github.com/pytorch/pytorch/issues/185517
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#185517",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.add.Scalar", "aten.ge.Scalar"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "subsystem": ["lowerings", "aten.add.Scalar"],
    "notes": "a bf16 scalar kept in fp32 flips a bool mask saved for the backward: only the aot forward graph shows it",
}


def fn(x, y, t):
    return F.margin_ranking_loss(x, y, t, margin=1.7, reduction="mean")


def grad_of(f):
    a = torch.tensor([1.703125, 1.703125], dtype=torch.bfloat16, requires_grad=True)
    b = torch.tensor([0.0, 0.0], dtype=torch.bfloat16, requires_grad=True)
    t = torch.tensor([1.0, 1.0], dtype=torch.bfloat16)
    f(a, b, t).backward()
    return a.grad


eager, compiled = grad_of(fn), grad_of(torch.compile(fn))
assert torch.equal(compiled, eager), f"compiled gradient {compiled.tolist()}, eager's {eager.tolist()}"
