"""Training through Inductor's `max_pool2d` on an all -inf window crashes in the backward: index -5 out of bounds.

The forward side of `inductor_max_pool2d_neginf_window_padding_index`: for a window whose
inputs are all -inf, Inductor's max_pool2d picks the padding position, so the indices it
saves for the backward are negative (-5, -4, ...).  The values are right (-inf, and
exp(-inf) = 0), but the backward's `scatter_add` of the gradient into the input's shape
raises "RuntimeError: index -5 is out of bounds for dimension 1 with size 16".  eager,
aot_eager and aot_eager_decomp_partition run it.  The bug is in the forward graph; the
failure shows in the backward graph, run on the forward's (bad) saved tensors.

Upstream: none found (searched: inductor max_pool2d return_indices negative index -inf
padding; max_pool2d backward index out of bounds torch.compile).
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": None,
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["aten.max_pool2d_with_indices", "aten.max_pool2d_with_indices_backward"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "forward saves padding-relative indices for all -inf windows; the backward scatter then indexes out of bounds",
}


def f(x):
    return F.max_pool2d(x, 3, stride=1, padding=1)


x = torch.full((1, 1, 4, 4), float("-inf"))
x[0, 0, 3, 3] = 1.0
x.requires_grad_()
f(x).exp().sum().backward()
ref = x.grad.clone()
x.grad = None
torch.compile(f)(x).exp().sum().backward()
torch.testing.assert_close(x.grad, ref)
