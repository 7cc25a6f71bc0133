"""A jagged nested tensor rebuilt from its unbind() pieces: dynamo cannot trace the next frame on what aot_eager returned.

`as_nested_tensor([d * w[i] for ...], layout=torch.jagged)` breaks the graph; the resumed
frame loops over `nw.unbind()`. Dynamo turns `nw` into a fake tensor as it traces that
frame, and under aot_eager (and every heavier backend) `nw` came back from the first
graph as a plain tensor where eager returns a view of a dense base: the fake tensor's
`unbind` asks for `offsets.tolist()`, `DataDependentOutputException`. With
backend="eager" the program runs to the end; each graph passes every stage alone.
There is no graph of the failing frame, so pt2kit runs the program on each backend and
names aot_eager, exit 5. Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/132618 (closed; still fails on 2.13 and 2.15)
"""
import torch
import torch.nested as nested

CASE = {
    "upstream": "pytorch/pytorch#132618",
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["nested.as_nested_tensor", "unbind"],
    "exception": "DataDependentOutputException",
    "fails_on_2_15": True,
    "exit5": "only when the graphs before it are compiled",
    "notes": "an aot_eager graph returns a jagged tensor as a plain tensor where eager returns a view; dynamo fails tracing the next frame on it",
}

x = (torch.arange(20).reshape((5, 4)) * 1.0).requires_grad_()
y = (torch.arange(12).reshape((3, 4)) * 10.0).requires_grad_()
n = nested.as_nested_tensor([x, y], layout=torch.jagged)
w = torch.tensor([10.0, 100.0]).reshape(2, 1, 1).requires_grad_()


def redmul(n, w):
    nw = nested.as_nested_tensor([d * w[i] for i, d in enumerate(n.unbind())], layout=torch.jagged)
    loss = 0.0
    for d in nw.unbind():
        loss = loss + d.sum()
    return loss


expected = redmul(n, w)
actual = torch.compile(redmul)(n, w)
torch.testing.assert_close(actual, expected)
print("OK")
