"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_rng.

``torch.rand([10]) + 1`` compiled with Inductor draws different random numbers than
eager from the same RNG state (Inductor has its own RNG unless ``fallback_random``).
Upstream's bisector finds backend ``inductor``, subsystem ``inductor_fallback_random``.
The compiled graph has no inputs at all. A minifier that does not restore the RNG
state between its eager, fp64 and compiled runs sees every stage "diverge".
Expected from pt2kit (``minify run --accuracy``): stage ``inductor``, minified to the rand.
"""
import torch
from torch._dynamo.utils import preserve_rng_state

device_type = "cpu"


def foo():
    return torch.rand([10], device=device_type) + 1


def test_fn():
    torch._dynamo.reset()

    with preserve_rng_state():
        out = foo()
    with preserve_rng_state():
        out_c = torch.compile(foo)()

    return torch.allclose(out, out_c)


assert test_fn(), "compiled foo draws different numbers"
