"""Port of test/dynamo/test_minifier.py::MinifierTests::test_after_dynamo_compile_backend_passes (CPU).

Upstream checks that torch's ``relu_compile_error_TESTING_ONLY`` backend does nothing
wrong on a graph without ``torch.relu``: the program runs cleanly.
Expected from pt2kit (``minify run``): no failure (exit 1, status
``no-failure``), and no repro.
"""
import torch


@torch.compile(backend="relu_compile_error_TESTING_ONLY")
def inner(x):
    for _ in range(10):
        x = torch.sin(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


inner(torch.randn(20, 20, device="cpu"))
