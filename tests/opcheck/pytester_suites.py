"""Small generated suites for the plugin's tests, run through ``pytester`` (in-process).

Each test writes an ops module under a namespace of its own and imports it first:
torch keeps op registrations for the life of the process, and pytester re-imports a
suite's own modules on every run, so the ops must live in a module that the runs
share. That module also counts calls of its fake kernels, which run only inside the
checks: that is how a test sees how often checks ran.

The test modules that use this define two fixtures with :func:`new_ops_module` and
:func:`warm_up`: ``ops`` (a fresh ops module) and a module-scoped autouse warm-up.
"""

import importlib
import textwrap
import uuid

OPS = """
import torch
from torch import Tensor

NS = "{ns}"
FAKE_CALLS = []  # one entry per call of bad_shape's fake kernel: the checks are its only callers
PAIRS_FIXED = False  # set by a test to "fix" pairs' fake kernel between runs
lib = torch.library.Library(NS, "DEF")


@torch.library.custom_op(f"{{NS}}::good", mutates_args=())
def good(x: Tensor) -> Tensor:
    return x * 2


good.register_fake(lambda x: torch.empty_like(x))
good.register_autograd(lambda ctx, grad: grad * 2)

lib.define("bad_shape(Tensor x) -> Tensor")
lib.impl("bad_shape", lambda x: x.sum(dim=1), "CPU")


@torch.library.register_fake(f"{{NS}}::bad_shape", lib=lib)
def _(x):
    FAKE_CALLS.append(tuple(x.shape))
    return x.new_empty(x.shape[0] + 1)


def bad_shape(x):
    return getattr(torch.ops, NS).bad_shape(x)  # an OpOverloadPacket call


@torch.library.custom_op(f"{{NS}}::mutates", mutates_args=())
def mutates(x: Tensor) -> Tensor:
    x.mul_(2)
    return x.clone()


mutates.register_fake(lambda x: torch.empty_like(x))


@torch.library.custom_op(f"{{NS}}::pairs", mutates_args=())
def pairs(x: Tensor) -> Tensor:
    n = x.shape[0] // 2 * 2
    return x[:n].reshape(-1, 2).sum(dim=1)


@pairs.register_fake
def _(x):
    if PAIRS_FIXED:
        return x.new_empty(x.shape[0] // 2)
    return x.new_empty((x.shape[0] + 1) // 2)  # wrong for odd sizes only
"""


def new_ops_module(pytester):
    """A fresh ops module (good, bad_shape, mutates, pairs) under a unique namespace, importable by the suite."""
    ns = f"oc_{uuid.uuid4().hex[:10]}"
    pytester.makepyfile(**{f"ops_{ns}": OPS.format(ns=ns)})
    pytester.syspathinsert()
    return importlib.import_module(f"ops_{ns}")


def suite(pytester, ops, body, name="test_suite"):
    """Write a test module that imports the ops module as ``ops``."""
    header = f"import pytest\nimport torch\nimport {ops.__name__} as ops\nNS = ops.NS\n\n"
    return pytester.makepyfile(**{name: header + textwrap.dedent(body)})


def run(pytester, *args):
    """An in-process pytest run. Hypothesis's plugin is left out: pytester would re-import it each run (~2 s)."""
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def opcheck_reports(reprec):
    """(test name, op, check, status) of every verdict opcheck named in an item's report, in order."""
    return [
        (r.nodeid.split("::", 1)[1], op.split("::")[1], check, status)
        for r in reprec.getreports("pytest_runtest_logreport")
        for op, check, status in getattr(r, "opcheck_verdicts", ())
    ]


def table_row(result, op):
    """The cells of ``op``'s row in the summary table."""
    section = result.outlines[result.outlines.index(next(line for line in result.outlines if " opcheck " in line)) :]
    (line,) = [line for line in section if line.startswith(op + " ")]
    return line.split()


def failures_data(path):
    import json

    return json.loads(path.read_text())["data"]
