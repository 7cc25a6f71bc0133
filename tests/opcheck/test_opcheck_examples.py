"""The example suite (``examples/opcheck_suite``), run the way a new user would.

Six custom ops, one correct and five with a planted defect each (see
``toyops.py``); their ordinary tests all pass. ``pytest --opcheck`` must report
exactly the five defects, each under the check that catches it, and nothing on
the correct op, with one outcome per collected test; ``--opcheck-accept`` must then
write a failures file after which the run is green. The runs are in-process except one, which goes through a fresh
``python -m pytest`` to prove the entry point loads the plugin.
"""

import importlib.util
import json
import shutil
import sys

import pytest
from support.paths import EXAMPLES

from opcheck.checks import warm_up

SUITE = EXAMPLES / "opcheck_suite"

PLANTED = {
    ("segment_offsets", "test_faketensor"),
    ("logsumexp_rows", "test_schema"),
    ("channel_scale", "test_faketensor"),
    ("fast_gelu", "test_autograd_registration"),
    ("pad_to_multiple", "test_aot_dispatch_dynamic"),
}


def _load_toyops_once():
    """torch keeps op registrations per process: every in-process run must share one toyops module."""
    if "toyops" not in sys.modules:
        spec = importlib.util.spec_from_file_location("toyops", SUITE / "toyops.py")
        sys.modules["toyops"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_load_toyops_once()


@pytest.fixture(scope="module", autouse=True)
def torch_modules_loaded_before_pytester():
    """pytester drops the modules a run imported; torch's must stay, or they register their ops twice."""
    warm_up()


@pytest.fixture
def project(pytester):
    """A copy of the example project, as a user would have it checked out."""
    for name in ("toyops.py", "test_toyops.py", "pytest.ini"):
        shutil.copy(SUITE / name, pytester.path / name)
    return pytester


def run(pytester, *args):
    """An in-process pytest run. Hypothesis's plugin is left out: pytester would re-import it each run (~2 s)."""
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def opcheck_reports(result):
    return [
        (op.removeprefix("toyops::"), check, status, r.nodeid)
        for r in result.reprec.getreports("pytest_runtest_logreport")
        for op, check, status in getattr(r, "opcheck_verdicts", ())
    ]


# The tests that call a defective op: pad_to_multiple's three widths each fail on their own.
FAILING_TESTS = 7


def test_the_example_tests_pass_without_opcheck(project):
    result = run(project)
    result.assert_outcomes(passed=12)
    assert not [line for line in result.outlines if "= opcheck =" in line or "OPCHECK" in line]


def test_opcheck_reports_exactly_the_planted_defects(project):
    result = run(project, "--opcheck")
    result.stdout.fnmatch_lines(["collected 12 items"])
    result.assert_outcomes(passed=12 - FAILING_TESTS, failed=FAILING_TESTS)
    reports = opcheck_reports(result)
    assert {(op, check) for op, check, _, _ in reports} == PLANTED
    assert {status for _, _, status, _ in reports} == {"fail"}
    assert len(reports) == FAILING_TESTS  # one verdict per failing test
    result.stdout.fnmatch_lines(
        [
            "*_ test_segment_offsets _*",
            "toyops::segment_offsets test_faketensor: fake kernel says shape (5,), real kernel gives (4,)",
            "*toyops::logsumexp_rows test_schema: argument 'x' is not declared mutable in the schema, but the op "
            "changed * elements (bit-for-bit comparison), by up to *; too small for torch.library.opcheck's "
            "allclose-based test_schema to notice*",
            "toyops::channel_scale test_faketensor: fake kernel says strides (48, 16, 4, 1), "
            "real kernel gives (48, 1, 12, 3)",
            "toyops::fast_gelu test_autograd_registration: toyops::fast_gelu was called with inputs that require "
            "grad, but it has no autograd formula*torch.library.opcheck passes this op*",
            "toyops::pad_to_multiple test_aot_dispatch_dynamic: TypeError: unhashable type: non-nested SymInt "
            "(raised at toyops.py:*, in _) (passes with static shapes*",
        ]
    )
    scaled_tanh_row = next(line for line in result.outlines if line.startswith("toyops::scaled_tanh "))
    assert scaled_tanh_row.split()[1:3] == ["pass", "pass"]  # schema; autograd on its requires_grad call
    assert "FAIL" not in scaled_tanh_row


def test_opcheck_list_shows_what_would_be_checked(project):
    result = run(project, "--opcheck-list")
    result.assert_outcomes(passed=12)
    listing = result.outlines[
        result.outlines.index(
            "opcheck --opcheck-list: 6 custom ops, 9 distinct signatures from 276 calls (nothing checked)"
        ) :
    ]
    assert [line for line in listing if line.startswith("toyops::")] == [
        "toyops::channel_scale",
        "toyops::fast_gelu",
        "toyops::logsumexp_rows",
        "toyops::pad_to_multiple",
        "toyops::scaled_tanh",
        "toyops::segment_offsets",
    ]
    assert (
        "    toyops::scaled_tanh(Tensor[4, 8] float32, float)    203 call(s), "
        "first in test_toyops.py::test_scaled_tanh_matches_reference"
    ) in listing


def test_accept_writes_the_failures_file_then_the_run_is_green(project):
    failures = project.path / "failures.json"
    accepted = run(project, "--opcheck", "--opcheck-accept", "--opcheck-failures", str(failures))
    accepted.assert_outcomes(passed=12 - FAILING_TESTS, xfailed=FAILING_TESTS)
    data = json.loads(failures.read_text())["data"]
    keys = {
        (op.removeprefix("toyops::"), key.split(".")[1].split("__")[0]) for op, tests in data.items() for key in tests
    }
    assert keys == PLANTED

    green = run(project, "--opcheck", "--opcheck-failures", str(failures))
    green.assert_outcomes(passed=12 - FAILING_TESTS, xfailed=FAILING_TESTS)
    assert green.ret == 0
    assert {status for _, _, status, _ in opcheck_reports(green)} == {"xfail"}


@pytest.mark.matrix
@pytest.mark.e2e  # a fresh pytest process on the example project
def test_a_new_user_runs_pytest_opcheck_in_the_example_project(project):
    result = project.runpytest_subprocess("--opcheck", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=12 - FAILING_TESTS, failed=FAILING_TESTS)
    result.stdout.fnmatch_lines(["*= opcheck =*", "opcheck: 6 custom ops, 9 distinct signatures from 276 calls"])
