"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_bad_decomp.

The program monkeypatches Inductor's decomposition table
(``torch._inductor.compile_fx.select_decomp_table``) so that ``aten.exponential``
decomposes into NaNs, compiles ``(x + 3).exponential_() * 10.5`` inside the patch and
checks the result for NaN. Upstream's ``CompilerBisector`` finds backend
``aot_eager_decomp_partition``, subsystem ``decomposition``, and ``aten.exponential``
in its debug info. The bug lives in a monkeypatch made by the program (inside a
``with`` block), so any re-check has to happen with that patch applied.
Expected from pt2kit (``minify run --accuracy``): the failure is at stage
``aot_eager_decomp_partition`` and the minified graph holds the exponential; or, since
this script has no ``if __name__ == "__main__":`` and the repro cannot carry the patch,
exit 5 with a message naming the patched ``select_decomp_table`` (a plain decline).
"""
from contextlib import contextmanager

import torch
import torch._inductor.compile_fx
import torch._prims_common as utils

aten = torch.ops.aten
device_type = "cpu"


def bad_exp_decomp(self, rate=1, generator=None):
    if generator is not None:
        raise AssertionError("Expected generator to be None")
    torch._check(
        not utils.is_complex_dtype(self.dtype)
        and not utils.is_integer_dtype(self.dtype)
        and not utils.is_boolean_dtype(self.dtype),
        lambda: f"Exponential distribution is a continuous probability distribution. \
        dtype must be a floating point but you specified {self.dtype}",
    )
    torch._check(
        rate > 0.0,
        lambda: f"exponential_ expects lambda > 0.0, but found lambda={rate}",
    )
    return torch.rand_like(self) * float("nan")


@contextmanager
def patch_exp_decomp():
    from torch._inductor.compile_fx import select_decomp_table as old_decomp

    def get_decomp():
        out = old_decomp()
        out = out.copy()
        out[aten.exponential.default] = bad_exp_decomp
        return out

    torch._inductor.compile_fx.select_decomp_table = get_decomp
    try:
        yield

    finally:
        torch._inductor.compile_fx.select_decomp_table = old_decomp


def vq(x):
    return (x + 3).exponential_() * 10.5


def test_fn():
    torch._dynamo.reset()
    with patch_exp_decomp():
        vq_compiled = torch.compile(vq)
        x = torch.randn(4, 400, 256).to(device_type)
        with torch._dynamo.utils.preserve_rng_state():
            vq(x)
        out_compiled = vq_compiled(x)

    return not out_compiled.isnan().any()


assert test_fn(), "the compiled vq returns NaN"
