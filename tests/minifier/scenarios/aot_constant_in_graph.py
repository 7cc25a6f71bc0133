"""Port of test/inductor/test_minifier.py::MinifierTests::test_constant_in_graph.

Upstream plants Inductor's C++ relu accuracy bug in a graph that also creates a
tensor constant (``torch.tensor(2)``), sets ``repro_after="aot"`` and
``repro_level=4`` in code, and asserts the minified repro reports an ``AccuracyError``.
Expected from pt2kit (``minify run --after aot --accuracy``): minified to a graph with
``aten.relu.default``.
"""
import os

import torch
import torch._dynamo
import torch._inductor.config

# What upstream's MinifierTestBase puts at the top of every test program.
torch._inductor.config.pattern_matcher = False
torch._inductor.config.compile_threads = 1
torch._inductor.config.cpp.vec_isa_ok = False
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 4
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile()
def inner(x):
    return torch.tensor(2) + torch.relu(x)


inner(torch.randn(2))
