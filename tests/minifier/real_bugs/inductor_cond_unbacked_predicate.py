"""Inductor drops the scalar that defines a `torch.cond` predicate's unbacked symbol.

`torch.cond(u0 == 20, ...)` with `u0` from `x.tolist()` (under `capture_scalar_outputs`)
compiles, but the generated wrapper tests `if u0 == 20:` after the scheduler removed the
`_local_scalar_dense` that defines `u0` as dead code (the predicate's use of it is a SymPy
relation, which the dependency scan did not count), so the compiled function raises
"NameError: name 'u0' is not defined" when it runs.  eager, aot_eager and
aot_eager_decomp_partition all work.  The branches take no part: each returns a tensor of
its own size (the true branch a constant-size `torch.ones(10)`), which makes pt2kit rebuild
a branch body with a factory call and no traced input.

Upstream: https://github.com/pytorch/pytorch/issues/139798 (the predicate case, closed as a
duplicate of https://github.com/pytorch/pytorch/issues/140842); fixed by
https://github.com/pytorch/pytorch/pull/186094.  The program below is the shape of
https://github.com/pytorch/pytorch/issues/137520's repro, without its random values.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#139798",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["aten._local_scalar_dense.default", "torch.ops.higher_order.cond"],
    "exception": "NameError",
    "fails_on_2_15": False,
    "notes": "the scheduler's dead-code elimination drops the node that defines u0; the cond predicate still reads it",
}

torch._dynamo.config.capture_scalar_outputs = True


def true_fn(x):
    return torch.ones(10)


def false_fn(x):
    return torch.ones(x[1].item())


@torch.compile(fullgraph=True)
def f(x):
    u0, u1 = x.tolist()
    return torch.cond(u0 == 20, true_fn, false_fn, (x,))


print(f(torch.tensor([20, 21])))
