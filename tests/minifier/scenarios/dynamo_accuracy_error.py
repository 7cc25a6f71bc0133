"""Port of test/dynamo/test_minifier.py::MinifierTests::test_after_dynamo_accuracy_error (CPU).

Upstream plants torch's ``relu_accuracy_error_TESTING_ONLY`` backend: it rewrites
``torch.relu(x)`` into ``torch.add(x, 1)``, a silent wrong answer. The program sets
``repro_after="dynamo"`` and ``repro_level=4`` (accuracy) in code; upstream asserts the
minified repro reports an ``AccuracyError``.
Expected from pt2kit (``minify run --after dynamo --accuracy``): minified to ``torch.relu``.
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
torch._dynamo.config.repro_level = 4
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")


@torch.compile(backend="relu_accuracy_error_TESTING_ONLY")
def inner(x):
    for _ in range(10):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


inner(torch.randn(20, 20, device="cpu"))
