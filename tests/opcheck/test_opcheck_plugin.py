"""The pytest plugin, run on small generated suites through ``pytester`` (in-process).

The suites and their ops module are built by ``pytester_suites.py``; the failures
file per parametrized item, and accept, are tested in ``test_opcheck_accept.py``.
"""

import json
import subprocess
import sys

import pytest
import torch
from pytester_suites import new_ops_module, opcheck_reports, run, suite, table_row

from opcheck.checks import warm_up


@pytest.fixture(scope="module", autouse=True)
def torch_modules_loaded_before_pytester():
    """pytester drops the modules a run imported; torch's must stay, or they register their ops twice."""
    warm_up()


@pytest.fixture
def ops(pytester):
    return new_ops_module(pytester)


TWO_TESTS = """
    def test_good():
        assert torch.equal(ops.good(torch.ones(2)), torch.full((2,), 2.0))

    def test_bad_shape():
        assert ops.bad_shape(torch.ones(4, 3)).tolist() == [3.0] * 4
"""


def test_importing_the_plugin_does_not_import_torch():
    code = "import sys, opcheck, opcheck.plugin; print(sorted(m for m in sys.modules if m.startswith('torch')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_without_options_the_plugin_stays_out_of_the_way(pytester, ops):
    suite(
        pytester,
        ops,
        TWO_TESTS
        + """
    def test_torch_is_not_wrapped():
        assert torch._ops.OpOverload.__call__.__module__ == "torch._ops"
    """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=3)
    assert not [line for line in result.outlines if "= opcheck =" in line or "OPCHECK" in line]
    assert ops.FAKE_CALLS == []


def test_opcheck_reports_the_failing_op_and_check_with_what_was_wrong(pytester, ops):
    suite(pytester, ops, TWO_TESTS)
    result = run(pytester, "--opcheck")
    result.assert_outcomes(passed=1, failed=1)  # one outcome per test: the op's failure is its test's
    assert opcheck_reports(result.reprec) == [("test_bad_shape", "bad_shape", "test_faketensor", "fail")]
    result.stdout.fnmatch_lines(
        [
            "*_ test_bad_shape _*",
            f"{ops.NS}::bad_shape test_faketensor: fake kernel says shape (5,), real kernel gives (4,)",
            "  test: test_suite.py::test_bad_shape",
            f"  call: {ops.NS}::bad_shape(Tensor[4, 3] float32)",
            "*short test summary info*",
            "OPCHECK FAILED test_suite.py::test_bad_shape - *",
        ]
    )
    assert table_row(result, f"{ops.NS}::good") == [f"{ops.NS}::good", "pass", "n/a", "pass", "pass", "pass", "1", "1"]
    assert table_row(result, f"{ops.NS}::bad_shape")[:6] == [
        f"{ops.NS}::bad_shape",
        "pass",
        "n/a",
        "FAIL",
        "pass",
        "pass",
    ]


def test_identical_calls_and_parametrizations_are_checked_once_and_judged_in_each_test(pytester, ops):
    suite(
        pytester,
        ops,
        """
    def test_once():
        ops.bad_shape(torch.ones(4, 3))
    """,
    )
    run(pytester, "--opcheck", "-p", "no:cacheprovider")
    checks_for_one_call = len(ops.FAKE_CALLS)
    assert checks_for_one_call > 0

    ops.FAKE_CALLS.clear()
    suite(
        pytester,
        ops,
        """
    def test_many():
        for _ in range(500):
            ops.bad_shape(torch.ones(4, 3))

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_params(seed):
        ops.bad_shape(torch.ones(4, 3))
    """,
    )
    result = run(pytester, "--opcheck", "-p", "no:cacheprovider")
    assert len(ops.FAKE_CALLS) == checks_for_one_call  # 503 calls, one signature, one round of checks
    # Each test that calls the broken signature fails, whichever called it first...
    assert opcheck_reports(result.reprec) == [
        (name, "bad_shape", "test_faketensor", "fail")
        for name in ("test_many", "test_params[1]", "test_params[2]", "test_params[3]")
    ]
    # ...and the failure is described once, then named.
    result.stdout.fnmatch_lines(
        [f"  call: {ops.NS}::bad_shape(Tensor[4, 3] float32): the same failure as in test_suite.py::test_many"]
    )
    assert table_row(result, f"{ops.NS}::bad_shape")[-2:] == ["1", "503"]


def test_each_parametrization_is_judged_on_its_own_calls(pytester, ops):
    suite(
        pytester,
        ops,
        """
    @pytest.mark.parametrize("rows", [2, 3, 4])
    def test_rows(rows):
        ops.bad_shape(torch.ones(rows, 3))
    """,
    )
    result = run(pytester, "--opcheck", "--opcheck-checks=test_faketensor")
    result.assert_outcomes(failed=3)
    assert opcheck_reports(result.reprec) == [
        (f"test_rows[{rows}]", "bad_shape", "test_faketensor", "fail") for rows in (2, 3, 4)
    ]
    assert ops.FAKE_CALLS == [(2, 3), (3, 3), (4, 3)]
    result.stdout.fnmatch_lines(["*_ test_rows[[]3[]] _*", f"  call: {ops.NS}::bad_shape(Tensor[3, 3] float32)"])
    assert table_row(result, f"{ops.NS}::bad_shape") == [f"{ops.NS}::bad_shape", "FAIL", "3", "3"]


def test_the_marker_checks_named_ops_without_the_option(pytester, ops):
    suite(
        pytester,
        ops,
        """
    @pytest.mark.opcheck(torch.ops.{ns}.bad_shape, checks=["test_faketensor"])
    def test_marked():
        ops.bad_shape(torch.ones(4, 3))
        ops.mutates(torch.ones(2))  # not named by the marker: not checked

    def test_unmarked():
        ops.bad_shape(torch.ones(5, 3))
    """.replace("{ns}", ops.NS),
    )
    result = run(pytester)
    assert opcheck_reports(result.reprec) == [("test_marked", "bad_shape", "test_faketensor", "fail")]
    assert ops.FAKE_CALLS == [(4, 3)]  # only test_faketensor, only the marked test
    result.stdout.fnmatch_lines(["*opcheck: 1 custom op, 1 distinct signature from 1 call*"])


def test_the_fixture_checks_one_call(pytester, ops):
    suite(
        pytester,
        ops,
        """
    def test_good_op(opcheck):
        statuses = opcheck(ops.good, (torch.randn(3, requires_grad=True),))
        assert statuses == dict.fromkeys(
            ["test_schema", "test_autograd_registration", "test_faketensor",
             "test_aot_dispatch_static", "test_aot_dispatch_dynamic"], "pass")

    def test_bad_op(opcheck):
        opcheck(f"{NS}::mutates", (torch.randn(3),), checks=["test_schema", "test_faketensor"])
    """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *OpcheckFailure: *::mutates test_schema: argument 'x' is not declared mutable in the schema, "
            "but the op changed 3 of 3 elements*",
        ]
    )


def test_opcheck_list_lists_signatures_without_checking(pytester, ops):
    suite(
        pytester,
        ops,
        """
    def test_calls():
        for rows in (2, 2, 3):
            ops.bad_shape(torch.ones(rows, 3))
        ops.good(torch.ones(2, requires_grad=True))
    """,
    )
    result = run(pytester, "--opcheck-list")
    result.assert_outcomes(passed=1)
    assert ops.FAKE_CALLS == []
    result.stdout.fnmatch_lines(
        [
            "opcheck --opcheck-list: 2 custom ops, 3 distinct signatures from 4 calls (nothing checked)",
            f"{ops.NS}::bad_shape",
            f"    {ops.NS}::bad_shape(Tensor[2, 3] float32)    2 call(s), first in test_suite.py::test_calls",
            f"    {ops.NS}::bad_shape(Tensor[3, 3] float32)    1 call(s), first in test_suite.py::test_calls",
            f"{ops.NS}::good",
            f"    {ops.NS}::good(Tensor[2] float32 requires_grad)    1 call(s), first in test_suite.py::test_calls",
        ]
    )


def test_namespaces_option_limits_what_is_recorded(pytester, ops):
    suite(pytester, ops, TWO_TESTS)
    result = run(pytester, "--opcheck", "--opcheck-namespaces", "some_other_lib")
    assert opcheck_reports(result.reprec) == []
    result.stdout.fnmatch_lines(["opcheck: no custom-op calls were recorded"])

    result = run(
        pytester, "--opcheck", f"--opcheck-namespaces=some_other_lib,{ops.NS}", "--opcheck-checks=test_faketensor"
    )
    assert opcheck_reports(result.reprec) == [("test_bad_shape", "bad_shape", "test_faketensor", "fail")]


def test_a_bare_marker_checks_every_custom_op_of_its_test(pytester, ops):
    suite(
        pytester,
        ops,
        """
    @pytest.mark.opcheck(checks="test_faketensor")
    def test_marked():
        ops.good(torch.ones(2))
        ops.bad_shape(torch.ones(4, 3))
    """,
    )
    result = run(pytester, "-v")
    assert opcheck_reports(result.reprec) == [("test_marked", "bad_shape", "test_faketensor", "fail")]
    result.stdout.fnmatch_lines([f"test_suite.py::test_marked OPCHECK FAILED ({ops.NS}::bad_shape test_faketensor)*"])
    assert table_row(result, f"{ops.NS}::good") == [f"{ops.NS}::good", "pass", "1", "1"]


def test_accept_creates_the_failures_file_then_the_run_is_green(pytester, ops):
    suite(
        pytester,
        ops,
        TWO_TESTS
        + """
    def test_mutates():
        ops.mutates(torch.ones(3))
    """,
    )
    path = pytester.path / "failures" / "opcheck.json"
    checks = "--opcheck-checks=test_schema,test_faketensor"
    result = run(pytester, "--opcheck", checks, "--opcheck-accept", f"--opcheck-failures={path}")
    result.assert_outcomes(passed=1, xfailed=2)
    result.stdout.fnmatch_lines([f"opcheck: wrote known failures to {path} (2 added, 0 removed)"])
    data = json.loads(path.read_text())["data"]
    assert data == {
        f"{ops.NS}::bad_shape": {
            "test_suite.test_faketensor__test_bad_shape": {
                "comment": "fake kernel says shape (5,), real kernel gives (4,)",
                "status": "xfail",
            }
        },
        f"{ops.NS}::mutates": {
            "test_suite.test_schema__test_mutates": {
                "comment": "argument 'x' is not declared mutable in the schema, but the op changed 3 of 3 elements "
                "(bit-for-bit comparison), by up to 1 (schema: ...",
                "status": "xfail",
            }
        },
    }

    result = run(pytester, "--opcheck", checks, f"--opcheck-failures={path}")
    result.assert_outcomes(passed=1, xfailed=2)
    assert result.ret == 0


def test_an_xfail_that_now_passes_is_reported_and_accept_removes_it(pytester, ops):
    suite(pytester, ops, TWO_TESTS)
    path = pytester.path / "failures.json"
    path.write_text(
        json.dumps(
            {
                "_version": 1,
                "data": {
                    f"{ops.NS}::good": {
                        "test_suite.test_faketensor__test_good": {"comment": "was broken", "status": "xfail"}
                    },
                    f"{ops.NS}::bad_shape": {
                        "test_suite.test_faketensor__test_bad_shape": {"comment": "", "status": "xfail"}
                    },
                    "otherlib::op": {
                        "OtherSuite.test_schema__test_x": {"comment": "another suite's", "status": "skip"}
                    },
                },
            }
        )
    )
    checks = "--opcheck-checks=test_faketensor"
    result = run(pytester, "--opcheck", checks, f"--opcheck-failures={path}")
    result.assert_outcomes(failed=1, xfailed=1)
    assert opcheck_reports(result.reprec) == [
        ("test_good", "good", "test_faketensor", "xpass"),
        ("test_bad_shape", "bad_shape", "test_faketensor", "xfail"),
    ]
    result.stdout.fnmatch_lines(
        [
            f"{ops.NS}::good test_faketensor passes now: rerun with --opcheck-accept to remove its xfail entry",
            "  expected to fail: xfail in *failures.json: was broken",
        ]
    )

    result = run(pytester, "--opcheck", checks, "--opcheck-accept", f"--opcheck-failures={path}")
    result.assert_outcomes(passed=1, xfailed=1)
    data = json.loads(path.read_text())["data"]
    assert sorted(data) == [f"{ops.NS}::bad_shape", "otherlib::op"]  # the fixed entry went, another suite's stayed


def test_skip_entries_do_not_run_the_check(pytester, ops):
    suite(pytester, ops, TWO_TESTS)
    path = pytester.path / "failures.json"
    path.write_text(
        json.dumps(
            {
                "_version": 1,
                "data": {
                    f"{ops.NS}::bad_shape": {
                        "test_suite.test_faketensor__test_bad_shape": {"comment": "hangs", "status": "skip"}
                    }
                },
            }
        )
    )
    result = run(pytester, "--opcheck", "--opcheck-checks=test_faketensor", f"--opcheck-failures={path}")
    result.assert_outcomes(passed=2)  # the tests ran and passed; only the check was skipped
    assert ops.FAKE_CALLS == []
    assert opcheck_reports(result.reprec) == [("test_bad_shape", "bad_shape", "test_faketensor", "skip")]
    assert table_row(result, f"{ops.NS}::bad_shape") == [f"{ops.NS}::bad_shape", "skip", "1", "1"]


def test_unittest_suites_keep_torchs_failures_keys(pytester, ops):
    suite(
        pytester,
        ops,
        """
    import unittest

    class TestOps(unittest.TestCase):
        def test_bad_shape(self):
            ops.bad_shape(torch.ones(4, 3))
    """,
    )
    pytester.makeini("[pytest]\nopcheck_failures = failures_dict.json\n")  # the ini option, relative to the rootdir
    path = pytester.path / "failures_dict.json"
    path.write_text(
        json.dumps(
            {
                "_version": 1,
                "data": {
                    f"{ops.NS}::bad_shape": {
                        "TestOps.test_faketensor__test_bad_shape": {"comment": "", "status": "xfail"}
                    }
                },
            }
        )
    )
    result = run(pytester, "--opcheck", "--opcheck-checks=test_faketensor")
    result.assert_outcomes(xfailed=1)


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--opcheck-accept"], "opcheck: accepting results needs a failures file"),
        (["--opcheck", "--opcheck-checks=test_speed"], "opcheck: unknown checks *test_speed*; choose from *"),
        (["--opcheck", "--opcheck-failures=broken.json"], "opcheck: *broken.json: not JSON*"),
        (["-k", "marked"], "opcheck marker on test_nothing.py::test_marked: unknown checks *test_speed*"),
        (["--opcheck-accept", "--opcheck-failures=f.json", "-n", "2"], "opcheck: --opcheck-accept needs * without -n"),
    ],
    ids=[
        "accept-without-a-file",
        "unknown-check",
        "unreadable-failures-file",
        "marker-with-unknown-check",
        "accept-under-xdist",
    ],
)
def test_usage_errors(pytester, args, complaint):
    pytester.makepyfile(
        test_nothing="""
        import pytest

        def test_nothing():
            pass

        @pytest.mark.opcheck(checks=["test_speed"])
        def test_marked():
            pass
        """
    )
    (pytester.path / "broken.json").write_text("{")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{complaint}*"])


def test_the_recorder_is_removed_after_the_session(pytester, ops):
    suite(pytester, ops, TWO_TESTS)
    run(pytester, "--opcheck-list")
    assert torch._ops.OpOverload.__call__.__module__ == "torch._ops"


def test_outside_the_tested_torch_range_a_broken_seam_is_one_usage_error_line(pytester, ops, monkeypatch):
    from pt2kit import seams

    suite(pytester, ops, TWO_TESTS)
    monkeypatch.setattr(seams, "TESTED_TORCH", ((9, 99),))
    monkeypatch.delattr(torch._C, "_jit_resolve_packet")
    seams.check.cache_clear()
    try:
        result = run(pytester, "--opcheck")
    finally:
        seams.check.cache_clear()

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.errlines if line.strip()]
    assert "opcheck: torch" in line and "is not supported by pt2kit's opcheck" in line
    assert "_jit_resolve_packet" in line and "minify doctor" in line
    assert "Traceback" not in result.stdout.str()
