"""A `while_loop_stack_output` whose condition is a constant False: dynamo's result has no stacking dim.

Eager returns the carried value with a leading stacking dim (`[1, 4]`); dynamo folds
the loop away (the condition is a constant) and returns `[4]`. The graph it makes has no ops, and a graph of no ops is never
handed to a backend: pt2kit saw no graph at all and said the script "raised before
torch.compile compiled anything" (exit 3). The program fails under `backend="eager"` and
passes with `torch.compiler.set_stance("force_eager")`: the bug is dynamo's. Found by a
fresh-bug hunt.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#196012",
    "kind": "runtime_error",
    "stage": "eager",
    "ops": [],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "exit5": "torch.compile handed its backend no graph",
    "notes": "a constant-False while_loop_stack_output folded into a graph of no ops, without the stacking dim",
}


def f(x):
    return torch.ops.higher_order.while_loop_stack_output(lambda y: False, lambda y: (y + 1,), (x,), ())


x = torch.ones(4)
expected, compiled = f(x), torch.compile(f, fullgraph=True)(x)
assert expected[0].shape == compiled[0].shape, (expected[0].shape, compiled[0].shape)
