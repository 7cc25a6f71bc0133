"""CPU port of test/inductor/test_minifier.py::MinifierTests::test_rmse_improves_over_atol (second half).

Upstream (GPU there; the same holds on CPU, where Inductor computes half in float):
``x - torch.tensor(655, dtype=torch.half) * 100`` on ``x = 65500`` in half. Eager rounds
``655 * 100`` to half (65504) and returns 0; Inductor keeps the product in higher
precision and returns 4, which is what fp64 says. Upstream asserts that with the fp64
rule there is no accuracy error (``_run_full_test(..., None)``). This is the
second accuracy scenario: a reference that keeps the in-graph half constant in half
precision reports a false error ("RMSE vs fp64 4, eager's own 0").
``joint_graph_constant_folding`` is off, as upstream patches it.
Expected from pt2kit (``minify run --after aot --accuracy``): no failure.
"""
import os

import torch
import torch._dynamo
import torch._inductor.config

# What upstream's MinifierTestBase puts at the top of every test program.
torch._inductor.config.pattern_matcher = False
torch._inductor.config.compile_threads = 1
torch._inductor.config.cpp.vec_isa_ok = False
torch._inductor.config.joint_graph_constant_folding = False
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 4
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile()
def inner(x):
    return x - torch.tensor(655, dtype=torch.half, device="cpu") * 100


inner(torch.tensor(655 * 100, dtype=torch.half, device="cpu"))
