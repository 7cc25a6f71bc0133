"""Dynamo's tracing fails when a `nested_compile_region` is called with one tensor twice.

`g(x, y)` and `g(y, x)` trace one subgraph for two distinct inputs; the third call,
`g(x, x)`, passes the same tensor as both.  Dynamo stamps the cached subgraph out again
for it, and its list of lifted arguments (deduplicated: one tensor) is shorter than the
subgraph's inputs: a plain `IndexError: list index out of range` from inside dynamo's
`invoke_subgraph` handling, under any backend, eager included.  No graph reaches a
backend, and the failing frame cannot be lifted to a graph that fails the same way (run
eagerly, `nested_compile_region` is a plain call): pt2kit says it is dynamo's own
tracing of `f`, a compile error, and that there is no graph to minify (exit 5).

Upstream: none found (searched: invoke_subgraph stamp_out_subgraph IndexError, same input
twice).
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "eager",
    "ops": ["torch.ops.higher_order.invoke_subgraph"],
    "exception": "IndexError",
    "fails_on_2_15": True,
    "exit5": "dynamo's own tracing of frame f",
    "notes": "invoke_subgraph's cached subgraph is stamped out for a call whose two inputs are one tensor",
}


@torch.compiler.nested_compile_region
def g(x, y):
    return torch.mul(x, y).sin() + y


def f(x, y):
    return g(x, y) + g(y, x) * g(x, x)


torch.manual_seed(0)
x, y = torch.randn(5), torch.randn(5)
ref = f(x, y)
out = torch.compile(f)(x, y)
torch.testing.assert_close(out, ref)
