"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_bad_lowering.

Upstream uses Triton's relu bug; the CPU port uses C++'s
(``cpp.inject_relu_bug_TESTING_ONLY = "accuracy"``), turned on with ``config.patch``
around the compile only, as upstream does. ``((x * -1) - 0.01).relu()`` should be all
zeros. Upstream's bisector finds backend ``inductor``, subsystem ``lowerings``, and
``relu`` in its debug info.
Expected from pt2kit (``minify run --accuracy``): stage ``inductor``, minified to the relu.
"""
import torch
from torch._inductor import config


def test_fn():
    torch._dynamo.reset()
    with config.patch("cpp.inject_relu_bug_TESTING_ONLY", "accuracy"):

        def my_func(x):
            return ((x * -1) - 0.01).relu()

        inp = torch.rand([100])

        return torch.allclose(torch.compile(my_func)(inp), my_func(inp))


assert test_fn(), "compiled my_func differs from eager"
