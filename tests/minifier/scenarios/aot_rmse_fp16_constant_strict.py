"""CPU port of test/inductor/test_minifier.py::MinifierTests::test_rmse_improves_over_atol (first half).

The program of ``aot_rmse_fp16_constant.py``, judged strictly: upstream turns the fp64
rule off (``same_two_models_use_fp64 = False``) and runs its minifier with
``--strict-accuracy``, and then the increased precision of ``655 * 100`` *is* an
accuracy error. Upstream asserts ``AccuracyError``. pt2kit gives the same strict
mode (``--strict-accuracy``, bitwise).
Expected from pt2kit (``minify run --after aot --accuracy --strict-accuracy``): an
accuracy failure, minified (the graph holds a mul and a sub).
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
torch._dynamo.config.same_two_models_use_fp64 = False
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 4
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile()
def inner(x):
    return x - torch.tensor(655, dtype=torch.half, device="cpu") * 100


inner(torch.tensor(655 * 100, dtype=torch.half, device="cpu"))
