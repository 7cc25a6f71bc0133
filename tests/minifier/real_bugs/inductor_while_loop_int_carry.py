"""`torch.while_loop` with a Python-int loop counter fails in Inductor's post-grad passes.

The loop carries `(0, zeros_like(a), zeros_like(b))`: the counter is a Python int, which
dynamo turns into an unbacked symbol inside the loop.  eager, aot_eager and
aot_eager_decomp_partition run it; Inductor's `FakeTensorUpdater` then finds the
while_loop's subgraph argument changed and stops with "A subgraph argument other than
striding has been modified".  The inference graph AOTAutograd makes cannot be rebuilt to
fail alone (its traced `cond_fn` returns a SymBool), so the failure is carried by the
dynamo graph it was lowered from.

Upstream: https://github.com/pytorch/pytorch/issues/166525 (it reported
`'int' object has no attribute 'meta'`; 2.13 fails one step later, the same program).
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#166525",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["torch.ops.higher_order.while_loop"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "an int carry becomes an unbacked symint; the aot graph cannot be rebuilt to fail alone, the dynamo graph can",
}


class Acc(torch.nn.Module):
    def forward(self, a, b):
        def cond_fn(i, x, y):
            return i < 3

        def body_fn(i, x, y):
            return i + 1, x + a, y + b

        return torch.while_loop(cond_fn, body_fn, (0, torch.zeros_like(a), torch.zeros_like(b)))


torch.manual_seed(0)
a = torch.randn(2, 2)
b = torch.randn(2, 2)
m = Acc()
print("eager:", m(a, b))
print("compiled:", torch.compile(m)(a, b))
