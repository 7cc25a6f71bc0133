"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_crossref.

A custom op ``_test_bisector::foo`` defined in the program with ``torch.library``: its
CPU kernel returns a copy (``x.view_as(x).clone()``) but its Meta kernel says it
returns a view (``x.view_as(x)``), and its autograd is an ``autograd.Function``.
Upstream's bisector finds backend ``aot_eager_decomp_partition_crossref``: the
fake-tensor cross-check catches the lying Meta kernel. On CPU, plain Inductor happens
to give the right numbers, so the port compiles with the backend upstream names (as
``minify run --backend`` would), where the check fails with ``MetadataMismatchError``.
The op is defined when the program is imported; a repro needs it, by importing the
program (``if __name__`` guards the run).
Expected from pt2kit (``minify run``): a compile error at
``aot_eager_decomp_partition_crossref`` minified to ``_test_bisector.foo``, and a repro
that gets the op without machine paths and without importing pt2kit or ``__mp_main__``.
The program pins ``error_on_custom_op_aliasing`` off, so the port tests what upstream's
test expects (the cross-check) on any machine: torch turns it on by default when ``$CI``
is set, and then its aliasing check raises before the cross-check can. Under ``CI=1``
that pin is a non-default value the repro must carry.
"""
import torch
from torch.library import Library

test_ns = "_test_bisector"
lib = Library(test_ns, "FRAGMENT")  # noqa: TOR901
lib.define("foo(Tensor x) -> Tensor")
op = torch.ops._test_bisector.foo.default
torch._functorch.config.error_on_custom_op_aliasing = False


class Foo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # Emulate AutoDispatchBelowADInplaceOrView, which is not bound into python
        with torch._C._AutoDispatchBelowAutograd():
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.ADInplaceOrView)):
                return op(x)

    @staticmethod
    def backward(ctx, gx):
        return gx


def foo_impl(x):
    return x.view_as(x).clone()


def foo_meta(x):
    return x.view_as(x)


lib.impl("foo", Foo.apply, "Autograd")
lib.impl("foo", foo_impl, "CPU")
lib.impl("foo", foo_meta, "Meta")


def test_fn(x):
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(op, backend="aot_eager_decomp_partition_crossref")(x), op(x))


if __name__ == "__main__":
    test_fn(torch.tensor(3.14159 / 3, requires_grad=True))
