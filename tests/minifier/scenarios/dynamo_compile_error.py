"""Port of test/dynamo/test_minifier.py::MinifierTests::test_after_dynamo_compile_error (CPU).

Upstream plants torch's ``relu_compile_error_TESTING_ONLY`` backend: it raises
``ReluCompileError`` on any graph calling ``torch.relu``. The program sets
``repro_after="dynamo"`` in code and has no ``if __name__ == "__main__":``; upstream
asserts the minified repro raises ``ReluCompileError``.
Expected from pt2kit (``minify run --after dynamo``): minified to ``torch.relu``.
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
    for _ in range(10):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


inner(torch.randn(20, 20, device="cpu"))
