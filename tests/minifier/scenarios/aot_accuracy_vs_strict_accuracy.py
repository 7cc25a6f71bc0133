"""Port of test/inductor/test_minifier.py::MinifierTests::test_accuracy_vs_strict_accuracy.

Two planted Inductor C++ accuracy bugs: ``cpp.inject_relu_bug_TESTING_ONLY`` and
``cpp.inject_log1p_bug_TESTING_ONLY`` (log1p computes ``x + 1``).
Upstream's second half (fp64 accuracy, the default): the log1p bug only flips a boolean
mask that no output depends on (``torch.where(b, x, x)`` is ``x`` either way), so it is
not a bug in the result; the relu bug corrupts the output. Upstream asserts the repro
is exactly ``relu`` of the input.
Expected from pt2kit (``minify run --after aot --accuracy``): ``ops_after == ["aten.relu.default"]``.
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
torch._inductor.config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 4
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile()
def inner(x):
    y = torch.log1p(x)
    b = y > 0
    # Need to ensure suffix removal hits a boolean output
    b = torch.logical_not(b)
    b = torch.logical_not(b)
    x = torch.relu(x)
    return torch.where(b, x, x)


inner(torch.randn(20))
