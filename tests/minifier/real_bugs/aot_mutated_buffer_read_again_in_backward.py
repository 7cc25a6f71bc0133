"""A module's buffer, updated in the forward, is read again in the backward: the weight's gradient sees it updated twice.

`self.count += 1` then `(x @ self.weight) * self.count`: the gradient of `weight` needs the
updated count. AOTAutograd's partitioner recomputes the read of a static input (a module's
buffer) in the backward instead of saving it, and by then the forward's epilogue has written
the buffer back: the backward reads 7 where the forward used 6. The forward and the buffer are
right; the gradient is wrong by 1/6. The same graph over plain tensors is partitioned right.

What made it hard: the repro's inputs were plain tensors, where the program's were a module's
buffer and parameter, which dynamo marks static (`_dynamo_static_input_type`) and the
partitioner reads; every graph passed alone (exit 5). The repro now marks them again with
`torch._dynamo.mark_static_address`. Found by a fresh-bug hunt, not by the code.

Upstream: pytorch/pytorch#197039 (an open pull request, "Don't recompute reads of mutated
inputs or mutable buffers"; no issue)
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197039",
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["Tensor.__iadd__", "Tensor.__mul__"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "a mutated static input (buffer) is read again in the backward, after its update",
}


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.full((), 5.0))
        self.weight = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        self.count += 1
        return (x @ self.weight) * self.count


torch.manual_seed(0)
eager, compiled = Counting(), Counting()
compiled.load_state_dict(eager.state_dict())
x = torch.randn(6, 4)
eager(x).sum().backward()
torch.compile(compiled)(x).sum().backward()
torch.testing.assert_close(compiled.count, eager.count)
torch.testing.assert_close(compiled.weight.grad, eager.weight.grad)
print("did not fail")
