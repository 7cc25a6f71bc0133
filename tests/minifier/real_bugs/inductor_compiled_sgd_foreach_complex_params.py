"""Inductor fails to compile an SGD step over complex parameters, with `foreach=True`.

`torch.compile` of a function that calls `optimizer.step()` traces the optimizer: SGD
views each complex parameter and gradient as real (`view_as_real`), adds with
`_foreach_add_`, and writes back. Inductor's post-grad pass `reinplace_inplaceable_ops`
meets the `getitem` of the foreach's list output over those views and asserts
"<built-in function getitem> is not an OpOverload" at compile time.
aot_eager_decomp_partition runs it. Found by a fresh-bug hunt; the program is the issue's.

Upstream: https://github.com/pytorch/pytorch/issues/197094
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197094",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten._foreach_add.List"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "subsystem": ["post_grad_passes", "reinplace_inplaceable_ops"],
    "notes": "an optimizer step traced whole: a foreach op over complex parameters viewed as real",
}

p = torch.nn.Parameter(torch.complex(torch.randn(3, 2), torch.randn(3, 2)))
opt = torch.optim.SGD([p], lr=0.1, foreach=True)
p.grad = torch.ones_like(p)


@torch.compile
def step():
    opt.step()


step()
print(p)
