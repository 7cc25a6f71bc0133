"""AOTAutograd refuses a `while_loop` whose body closes over the tensor it also carries.

The body reads `x` from its closure (`source`) while `x` is the loop's carry too:
dynamo lifts the closure into an additional input that is the carry's own tensor,
and AOTAutograd's check of the loop's subgraphs raises "cond_fn might be aliasing the
input or the output!". Eager runs the loop, and so does `backend="eager"`: the failure
is AOTAutograd's (a higher-order op's subgraphs, at aot_eager). Found by a fresh-bug hunt;
the program is the issue's.

Upstream: https://github.com/pytorch/pytorch/issues/191582
"""
import torch
from torch._higher_order_ops.while_loop import while_loop

CASE = {
    "upstream": "pytorch/pytorch#191582",
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["operator.getitem", "torch.ops.higher_order.while_loop"],
    "exception": "RuntimeError",
    "fails_on_2_15": True,
    "notes": "a higher-order op's carry and closure are one tensor: the aliasing check of while_loop's subgraphs",
}


def f(x, index):
    source = x

    def cond_fn(i, value):
        return i < 2

    def body_fn(i, value):
        output = torch.scatter(value.clone(), dim=0, index=index, src=source)
        return i + 1, output

    i = torch.tensor(0)
    return while_loop(cond_fn, body_fn, (i, x))[1]


x = torch.randn(4, 4)
index = torch.tensor([[0], [1], [2], [3]])
print("eager:", f(x, index))
print("compiled:", torch.compile(f)(x, index))
