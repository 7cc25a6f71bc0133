"""A torch.cond branch that scatters into a strided view with an index made by `torch.tensor(data)`.

The true branch does `t[:, ::2].scatter_add(1, torch.tensor([[...]]), ones)`. Inductor compiles the
branch's constant (AOTAutograd's `lift_fresh_copy` of `_tensor_constant0`) into a subgraph that is
handed something other than a tensor at run time: "_torchinductor_pyobject_tensor_data_ptr: non-tensor
input". eager, aot_eager and aot_eager_decomp_partition all run it.

What made it hard to minify: the dynamo graph's branch makes the index with a call
(`torch.tensor(...)`), which pt2kit's rebuild of the body froze into a constant of the body, so the
lowering that fails never ran; and the aot graph, traced again by `make_fx`, folds the
`lift_fresh_copy` and fails another way. The branch now keeps the call, as dynamo recorded it, and
the dynamo graph is the unit. Fixed in 2.15. Found by a fresh-bug hunt, not by the code.

Upstream: pytorch/pytorch#185482
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#185482",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["torch.ops.higher_order.cond", "torch.tensor", "Tensor.scatter_add"],
    "exception": "RuntimeError",
    "fails_on_2_15": False,
    "notes": "a cond branch's index tensor made from data; Inductor hands its subgraph a non-tensor",
}


def fn(x, pred):
    def true_fn(t):
        v = t[:, ::2]
        index = torch.tensor([[0, 0, 1], [1, 1, 2], [2, 2, 0], [0, 0, 2]], dtype=torch.long)
        return v.scatter_add(1, index, torch.ones(4, 3))

    def false_fn(t):
        return t[:, 1::2] - 3.0

    y = torch.cond(pred, true_fn, false_fn, (x,))
    return y, y.sum(1), y.argmax(1)


x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
pred = torch.tensor(True)
eager = fn(x, pred)
compiled = torch.compile(fn, backend="inductor")(x, pred)
torch.testing.assert_close(compiled, eager)
print("did not fail")
