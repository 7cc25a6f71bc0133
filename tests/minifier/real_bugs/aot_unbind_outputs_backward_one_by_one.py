"""A loss per output of `unbind`, each its own backward call: the second raises under AOTAutograd.

Eager's `UnbindBackward` node saves nothing, so the autograd engine runs it again for a
second `backward()` through another of its outputs. Under torch.compile (already with
backend="aot_eager"; backend="eager" is fine) the graph is one `CompiledFunctionBackward`
node, which the first call freed: "Trying to backward through the graph a second time".
A repro that runs one backward of every output passes; the repro must make the program's
two calls.

Upstream: https://github.com/pytorch/pytorch/issues/118739
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#118739",
    "kind": "runtime_error",
    "stage": "aot_eager",
    "ops": ["Tensor.unbind", "operator.getitem"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "two backward calls through one compiled call; only views in the graph, eager's view nodes keep nothing",
}


def rows(x):
    return x.unbind(0)


x = torch.randn(3, 4, requires_grad=True)
first, second, third = torch.compile(rows)(x)
first.sum().backward()
second.sum().backward()  # a loss per row, one backward call each
print("compiled:", x.grad.sum().item())
