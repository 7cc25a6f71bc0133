"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_eager_backend.

Upstream's check fails whatever the compiler does (``test_fn`` returns False), and the
bisector "should indicate problem with first backend": backend ``eager``, no
subsystem, i.e. not a compiler bug. The port is a program that compiles something
(correctly) and then fails its own check anyway.
Expected from pt2kit (``minify run``): no compiler stage is blamed and no repro is
written: the program fails but no graph does (exit 5), or the failure is put at
``eager``.
"""
import torch


def f(x):
    return torch.sin(x) + 1


def test_fn():
    torch.compile(f)(torch.randn(8))
    return False


assert test_fn(), "the check fails"
