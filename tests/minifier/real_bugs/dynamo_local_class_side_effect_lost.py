"""A method of a class defined inside the factory appends to the factory's list: under dynamo the append is lost.

`make_layer(w)` defines `activations = []` and a local `class Recorder` whose `record(t)` appends
to it. The compiled layer calls `Recorder().record(h)`; dynamo traces the call but never replays
the append, so the log stays empty and `torch.stack(log)` raises. Already with backend="eager".
The one graph is right alone: the bug is a side effect dynamo drops, outside every graph, so
pt2kit names it and exits 5. Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/197896
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197896",
    "kind": "runtime_error",
    "stage": "eager",
    "ops": ["torch.tanh", "operator.matmul"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "exit5": "the bug is dynamo's, outside its graphs",
    "notes": "a list append through a method of a locally defined class is traced but not replayed",
}


def make_layer(w):
    activations = []

    class Recorder:
        def record(self, t):
            activations.append(t)

    def layer(x):
        h = torch.tanh(x @ w)
        Recorder().record(h)
        return h * 2

    return layer, activations


torch.manual_seed(0)
w = torch.randn(4, 4)
x = torch.randn(3, 4)
layer, log = make_layer(w)
out = torch.compile(layer)(x)
mean_act = torch.stack(log).mean()  # eager: one entry; compiled: the append is lost
torch.testing.assert_close(mean_act, torch.tanh(x @ w).mean())
