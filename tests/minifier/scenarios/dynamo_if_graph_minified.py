"""Port of test/dynamo/test_minifier.py::MinifierTests::test_if_graph_minified (CPU).

Upstream: 20 sins, a relu, 20 cosines, compiled with torch's
``relu_compile_error_TESTING_ONLY`` backend (``ReluCompileError`` on ``torch.relu``).
Upstream asserts the minified repro's module is exactly one ``torch.relu`` of one input.
Expected from pt2kit (``minify run --after dynamo``): ``ops_after == ["torch.relu"]``.
"""
import os

import torch
import torch._dynamo
import torch._inductor.config

# What upstream's MinifierTestBase puts at the top of every test program.
torch._inductor.config.pattern_matcher = False
torch._inductor.config.compile_threads = 1
torch._inductor.config.cpp.vec_isa_ok = False
torch._dynamo.config.repro_after = "dynamo"
torch._dynamo.config.repro_level = 2
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile(backend="relu_compile_error_TESTING_ONLY")
def inner(x):
    for _ in range(20):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(20):
        x = torch.cos(x)
    return x


inner(torch.randn(20, 20, device="cpu"))
