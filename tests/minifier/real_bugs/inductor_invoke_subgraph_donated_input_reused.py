"""A block under `torch.compiler.nested_compile_region`, called three times: the first weight's gradient is wrong.

The backward graph calls the block's backward subgraph (`invoke_subgraph`) on the incoming gradient,
then adds that same gradient to what the call returned. AOTAutograd donates the backward's saved
activations to Inductor (`bw_donated_idxs`: memory nothing reads afterwards), and Inductor applies the
outer graph's donated positions to the subgraph's own inputs: the subgraph writes its product into the
gradient's memory, and the outer add reads it back overwritten. Forward and later grads are right;
`donated_buffer = False` or `inplace_buffers = False` makes the program pass. Fixed in 2.15.

What made it hard: the backward graph compiled alone was right. The inputs donated to Inductor are not in
the graph but in the tracing context AOTAutograd compiles it in, which the repro now gives again
(`donating`). Under `backend="eager"` the program fails otherwise (invoke_subgraph's autograd asserts on
a fake mode), a second bug pt2kit reports as a failure the program never met. Found by a fresh-bug hunt.

Upstream: none found (own program)
"""
import torch
import torch.nn as nn

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["torch.ops.higher_order.invoke_subgraph", "aten.add.Tensor"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "Inductor reuses a backward subgraph's input by the outer graph's donated positions",
}


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.sin(x @ w)


class ResMLP(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(torch.randn(8, 8) * 0.3) for _ in range(n)])

    def forward(self, x):
        for w in self.ws:
            x = block(x, w) + x
        return x


def grads(model, x):
    model.zero_grad()
    out = model(x)
    out.sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ResMLP()
    x = torch.randn(4, 8)
    expected = grads(model, x)
    torch.testing.assert_close(grads(torch.compile(model), x), expected)
    print("ok")
