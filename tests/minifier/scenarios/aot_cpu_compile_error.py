"""Port of test/inductor/test_minifier.py::MinifierTests::test_after_aot_cpu_compile_error.

Upstream plants Inductor's C++ relu bug (``cpp.inject_relu_bug_TESTING_ONLY = "compile_error"``)
in a two-op program (relu, cos) compiled with the default backend, sets
``repro_after="aot"`` in code, and asserts the minified repro fails with ``CppCompileError``.
Expected from pt2kit (``minify run --after aot``): minified to ``aten.relu.default``.
"""
import os

import torch
import torch._dynamo
import torch._inductor.config

# What upstream's MinifierTestBase puts at the top of every test program.
torch._inductor.config.pattern_matcher = False
torch._inductor.config.compile_threads = 1
torch._inductor.config.cpp.vec_isa_ok = False
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 2
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile()
def inner(x):
    x = torch.relu(x)
    x = torch.cos(x)
    return x


inner(torch.randn(20, 20).to("cpu"))
