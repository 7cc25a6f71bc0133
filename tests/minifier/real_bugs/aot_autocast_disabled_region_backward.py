"""Under an outer bf16 autocast, AOTAutograd's backward ignores the compiled region's `autocast(enabled=False)`.

Inside `with torch.autocast("cpu", dtype=torch.bfloat16)`, the compiled function computes
`x.float() @ w.weight.float().T` under `torch.autocast("cpu", enabled=False)`.  The
forward is right.  The backward graph AOTAutograd traces for it runs its matmuls in
bfloat16 (the inner region's state is not carried into the joint graph's backward), so
`w.weight.grad` is off by up to 0.0078, while eager's backward (run after the autocast
block, as a training step does) computes it in float32.  The aot backward graph run
eagerly agrees with itself: only the dynamo graph's gradients against eager's show it,
with the outer autocast replayed around the call and the backward outside it.

Upstream: https://github.com/pytorch/pytorch/issues/179804 (reported on CUDA; the same on
the CPU with CPU autocast).
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#179804",
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["torch.amp.autocast_mode._enter_autocast", "operator.matmul"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "backward-only: the joint graph's backward is traced under the outer autocast, not the region's enabled=False",
}

torch.manual_seed(0)
w = torch.nn.Linear(64, 64)
h = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)


def inner_fn(x):
    with torch.autocast("cpu", enabled=False):
        return x.float() @ w.weight.float().T


with torch.autocast("cpu", dtype=torch.bfloat16):
    out_eager = inner_fn(h)
out_eager.sum().backward()
grad_eager = w.weight.grad.clone()
w.weight.grad = None

with torch.autocast("cpu", dtype=torch.bfloat16):
    out_compiled = torch.compile(inner_fn, backend="aot_eager")(h)
out_compiled.sum().backward()
grad_compiled = w.weight.grad.clone()

assert torch.equal(out_eager, out_compiled), "forward differs"
assert torch.allclose(grad_eager, grad_compiled, rtol=0, atol=1e-5), (
    f"weight grad differs by {(grad_eager - grad_compiled).abs().max().item()}"
)
