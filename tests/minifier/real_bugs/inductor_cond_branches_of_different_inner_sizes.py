"""torch.cond whose branches return different inner sizes, under dynamic=True: Inductor's NameError.

The two branches return `ones(s0, s1)` and `zeros(s0, s2)`: the output's second size is
an unbacked `u0`. Inductor's wrapper allocates the branch's output with stride `(u0, 1)`
inside the branch's own code, where `u0` is not yet bound: "NameError: name 'u0' is not
defined" at run time. eager, aot_eager and aot_eager_decomp_partition all work. Fixed in 2.15.

What made it hard to minify: a branch of the dynamo graph calls `torch.ones` with
symbolic sizes as varargs, which FX cannot trace again as it is written, and the aot graph
holds a real constant (the predicate) that fake inputs cannot save at compile time, so it
is saved at its first run. The aot graph is the unit: the cond and its two one-op branches.

Upstream: pytorch/pytorch#189528. Found by a fresh-bug hunt, not by the code.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#189528",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["torch.ops.higher_order.cond", "operator.getitem"],
    "exception": "NameError",
    "fails_on_2_15": False,
    "notes": "branch outputs of different inner sizes (an unbacked stride) under dynamic=True; the aot graph is saved at its first run",
}


def h(x, y):
    pred = torch.tensor(True)

    def true_fn():
        return torch.ones(x.shape[0], x.shape[1])

    def false_fn():
        return torch.zeros(x.shape[0], y.shape[1])

    return torch.cond(pred, true_fn, false_fn)


x, y = torch.randn(5, 7), torch.randn(5, 8)
eager = h(x, y)
out = torch.compile(h, fullgraph=True, dynamic=True)(x, y)
torch.testing.assert_close(out, eager)
