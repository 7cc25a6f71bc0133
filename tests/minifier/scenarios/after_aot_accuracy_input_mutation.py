"""Port of test/dynamo/test_after_aot.py::TestAfterAot::test_repro_run_accuracy_does_not_reuse_compiled_graph.

Upstream runs an accuracy check (``repro_run`` with ``accuracy="accuracy"``) on a graph
that adds 1 to three scalars with ``_foreach_add`` and copies the results back into
its inputs, and expects no error: an accuracy check must not reuse the compiled
graph's (mutated) inputs as the reference's. The port is the user program such a
graph comes from: an in-place ``torch._foreach_add_`` on three scalars, compiled with
Inductor, run with the accuracy check.
Expected from pt2kit (``minify run --accuracy``): no failure.
"""
import torch


@torch.compile()
def step(a, b, c):
    torch._foreach_add_([a, b, c], 1)


state = [torch.rand((), dtype=torch.float32) for _ in range(3)]
step(*state)
print([float(s) for s in state])
