"""Port of test/inductor/test_minifier_isolate.py::MinifierIsolateTests::test_after_aot_cpu_runtime_error.

Upstream plants Inductor's C++ relu bug as a run-time failure
(``cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"``: the kernel does ``throw 1``,
which torch turns into a RuntimeError), sets ``repro_after="aot"`` and
``repro_level=3`` in code, runs the minifier isolated (the bug crashes the process)
and asserts the minified repro fails (upstream expects no particular message: on
GPU the process dies with a device-side assert).
Expected from pt2kit (``minify run --after aot``): a failure at ``inductor``, minified to
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
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 3
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile()
def inner(x):
    x = torch.relu(x)
    x = torch.cos(x)
    return x


inner(torch.randn(2, 2).to("cpu"))
