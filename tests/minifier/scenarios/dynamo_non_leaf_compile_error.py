"""Port of test/dynamo/test_minifier.py::MinifierTests::test_after_dynamo_non_leaf_compile_error (CPU).

Upstream plants torch's ``non_leaf_compile_error_TESTING_ONLY`` backend: it raises
``TestingOnlyCompileError`` when an example input is not a leaf. The input here is
``torch.randn(..., requires_grad=True) + 1``: a non-leaf that requires grad. A
minifier that rebuilds inputs as leaves loses the bug. Upstream asserts the minified
repro raises ``TestingOnlyCompileError``.
Expected from pt2kit (``minify run --after dynamo``): minified to the one add, with the
input still a non-leaf.
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


@torch.compile(backend="non_leaf_compile_error_TESTING_ONLY")
def inner(x):
    return x + 1


inner(torch.randn(20, 20, requires_grad=True, device="cpu") + 1)
