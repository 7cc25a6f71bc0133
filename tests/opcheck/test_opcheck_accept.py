"""The failures file on real suites: one entry per pytest item, and ``--opcheck-accept`` that records what failed.

The op under test is ``pairs`` (``pytester_suites.py``): its fake kernel is wrong
for odd sizes only, so a test parametrized over sizes has passing and failing
parametrizations. Setting ``ops.PAIRS_FIXED`` between runs "fixes" it.
"""

import json

import pytest
from pytester_suites import failures_data, new_ops_module, opcheck_reports, run, suite, table_row

from opcheck.checks import warm_up

CHECK = "--opcheck-checks=test_faketensor"

PAIRS = """
    @pytest.mark.parametrize("n", [2, 3, 4, 5])
    def test_pairs(n):
        assert ops.pairs(torch.ones(n)).shape == (n // 2,)
"""


@pytest.fixture(scope="module", autouse=True)
def torch_modules_loaded_before_pytester():
    """pytester drops the modules a run imported; torch's must stay, or they register their ops twice."""
    warm_up()


@pytest.fixture
def ops(pytester):
    return new_ops_module(pytester)


def opcheck_run(pytester, path, *args):
    return run(pytester, "--opcheck", CHECK, f"--opcheck-failures={path}", *args)


def keys(path, ops):
    """The failures file's keys for ``ops.pairs``."""
    return sorted(failures_data(path).get(f"{ops.NS}::pairs", {}))


def progress(result, module="test_suite.py"):
    """The progress letters of one test module, e.g. ``.F.F``."""
    (line,) = [line for line in result.outlines if line.startswith(module + " ")]
    return line.split()[1]


def test_each_collected_item_has_exactly_one_outcome(pytester, ops):
    suite(
        pytester,
        ops,
        PAIRS
        + """
    def test_fails_itself_too():
        ops.pairs(torch.ones(3))
        assert False, "the test's own failure"
    """,
    )
    result = run(pytester, "--opcheck", CHECK)
    result.stdout.fnmatch_lines(["collected 5 items"])
    assert progress(result) == ".F.FF"
    result.assert_outcomes(passed=2, failed=3)
    # The test's own failure stays its failure, with the opcheck finding beside it.
    result.stdout.fnmatch_lines(
        ["*AssertionError: the test's own failure*", "*- opcheck -*", f"{ops.NS}::pairs test_faketensor: fake kernel*"]
    )
    result.stdout.fnmatch_lines(["FAILED test_suite.py::test_fails_itself_too - AssertionError: *"])


def test_a_test_marked_xfail_or_skipped_still_fails_on_an_unexpected_opcheck_failure(pytester, ops):
    suite(
        pytester,
        ops,
        """
    @pytest.mark.xfail(reason="its own bug")
    def test_marked_xfail():
        ops.pairs(torch.ones(3))
        assert False

    def test_skips_after_the_call():
        ops.pairs(torch.ones(5))
        pytest.skip("not on this machine")
    """,
    )
    path = pytester.path / "failures.json"
    opcheck_run(pytester, path).assert_outcomes(failed=2)
    opcheck_run(pytester, path, "--opcheck-accept").assert_outcomes(xfailed=1, skipped=1)
    opcheck_run(pytester, path).assert_outcomes(xfailed=1, skipped=1)  # as without opcheck, the op's failure known


def test_accept_keys_each_parametrization_so_the_rerun_is_green(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    accepted = opcheck_run(pytester, path, "--opcheck-accept")
    accepted.assert_outcomes(passed=2, xfailed=2)
    assert keys(path, ops) == ["test_suite.test_faketensor__test_pairs[3]", "test_suite.test_faketensor__test_pairs[5]"]

    rerun = opcheck_run(pytester, path)
    rerun.assert_outcomes(passed=2, xfailed=2)
    assert rerun.ret == 0
    assert progress(rerun) == ".x.x"


def test_a_fixed_op_is_an_unexpected_pass_that_says_what_to_do_and_accept_clears_it(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    opcheck_run(pytester, path, "--opcheck-accept")

    ops.PAIRS_FIXED = True
    fixed = opcheck_run(pytester, path)
    fixed.assert_outcomes(passed=2, failed=2)
    assert opcheck_reports(fixed.reprec) == [
        ("test_pairs[3]", "pairs", "test_faketensor", "xpass"),
        ("test_pairs[5]", "pairs", "test_faketensor", "xpass"),
    ]
    fixed.stdout.fnmatch_lines(
        [
            f"{ops.NS}::pairs test_faketensor passes now: rerun with --opcheck-accept to remove its xfail entry",
            "OPCHECK XPASS(strict) test_suite.py::test_pairs[[]3[]]*",
        ]
    )
    fixed.stdout.fnmatch_lines(["opcheck: 2 xfail entries of *failures.json passed (*): rerun with --opcheck-accept*"])

    cleared = opcheck_run(pytester, path, "--opcheck-accept")
    cleared.assert_outcomes(passed=4)
    cleared.stdout.fnmatch_lines(["opcheck: wrote known failures to *failures.json (0 added, 2 removed)"])
    assert failures_data(path) == {}
    opcheck_run(pytester, path).assert_outcomes(passed=4)


def test_accept_twice_in_a_row_changes_nothing(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    opcheck_run(pytester, path, "--opcheck-accept")
    first = path.read_text()
    again = opcheck_run(pytester, path, "--opcheck-accept")
    again.stdout.fnmatch_lines(["*(0 added, 0 removed)"])
    assert path.read_text() == first


def test_classes_odd_ids_and_stacked_parametrize_each_get_their_own_key(pytester, ops):
    suite(
        pytester,
        ops,
        """
    class TestPairs:
        @pytest.mark.parametrize(
            "n",
            [pytest.param(3, id="1-2.5"), pytest.param(5, id="caf\\u00e9"), pytest.param(7, id="a/b"),
             pytest.param(2, id="a[b]")],
        )
        def test_odd_ids(self, n):
            ops.pairs(torch.ones(n))

    @pytest.mark.parametrize("k", [1, 2])
    @pytest.mark.parametrize("n", [2, 3])
    def test_stacked(n, k):
        ops.pairs(torch.ones(n * k))
    """,
    )
    path = pytester.path / "failures.json"
    accepted = opcheck_run(pytester, path, "--opcheck-accept")
    accepted.assert_outcomes(passed=4, xfailed=4)
    failing = [r.nodeid.split("::")[-1] for r in accepted.reprec.getreports("pytest_runtest_logreport") if r.skipped]
    assert keys(path, ops) == sorted(
        ["TestPairs.test_faketensor__" + name for name in failing if name.startswith("test_odd_ids")]
        + ["test_suite.test_faketensor__test_stacked[3-1]"]
    )
    assert "TestPairs.test_faketensor__test_odd_ids[1-2.5]" in keys(path, ops)
    assert "TestPairs.test_faketensor__test_odd_ids[a/b]" in keys(path, ops)

    rerun = opcheck_run(pytester, path)
    rerun.assert_outcomes(passed=4, xfailed=4)
    assert rerun.ret == 0


TWO_FILES = {
    "test_a": """
    def test_odd():
        ops.pairs(torch.ones(3))
    """,
    "test_b": """
    def test_odd():
        ops.pairs(torch.ones(3))  # the same call as test_a's: checked once, judged in both
    """,
}


def test_the_same_call_from_two_files_is_expected_in_each_whatever_runs(pytester, ops):
    for name, body in TWO_FILES.items():
        suite(pytester, ops, body, name=name)
    path = pytester.path / "failures.json"
    full = opcheck_run(pytester, path, "--opcheck-accept")
    full.assert_outcomes(xfailed=2)
    assert keys(path, ops) == ["test_a.test_faketensor__test_odd", "test_b.test_faketensor__test_odd"]

    alone = opcheck_run(pytester, path, "test_b.py")  # test_b now makes the call first
    alone.assert_outcomes(xfailed=1)
    assert alone.ret == 0

    opcheck_run(pytester, path, "--opcheck-accept", "test_b.py")
    assert keys(path, ops) == ["test_a.test_faketensor__test_odd", "test_b.test_faketensor__test_odd"]


def test_accept_on_a_selection_changes_only_the_selected_items(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    opcheck_run(pytester, path, "--opcheck-accept")
    before = path.read_text()
    opcheck_run(pytester, path, "--opcheck-accept", "-k", "not 5").assert_outcomes(passed=2, xfailed=1, deselected=1)
    assert path.read_text() == before

    ops.PAIRS_FIXED = True
    opcheck_run(pytester, path, "--opcheck-accept", "-k", "3").assert_outcomes(passed=1, deselected=3)
    assert keys(path, ops) == ["test_suite.test_faketensor__test_pairs[5]"]  # [5] did not run: it keeps its entry


def test_a_parametrization_whose_test_fails_keeps_its_entry_under_accept(pytester, ops):
    suite(
        pytester,
        ops,
        """
    @pytest.mark.parametrize("n", [3, 5])
    def test_pairs(n):
        if ops.PAIRS_FIXED and n == 5:
            raise RuntimeError("broke before calling the op")
        ops.pairs(torch.ones(n))
    """,
    )
    path = pytester.path / "failures.json"
    opcheck_run(pytester, path, "--opcheck-accept")
    ops.PAIRS_FIXED = True
    opcheck_run(pytester, path, "--opcheck-accept").assert_outcomes(passed=1, failed=1)
    assert keys(path, ops) == ["test_suite.test_faketensor__test_pairs[5]"]  # it did not get to show it is fixed


def per_function_file(path, ops, status="xfail"):
    entry = {"test_suite.test_faketensor__test_pairs": {"comment": "odd sizes", "status": status}}
    path.write_text(json.dumps({"_version": 1, "data": {f"{ops.NS}::pairs": entry}}))


def test_a_per_function_entry_expects_any_parametrization_to_fail_and_says_how_to_update(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    per_function_file(path, ops)
    result = opcheck_run(pytester, path)
    result.assert_outcomes(passed=2, xfailed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            (
                "opcheck: 1 entry of *failures.json names a whole parametrized test function "
                "(test_suite.test_faketensor__test_pairs): a failing parametrization counts as expected, *"
                "Run once with --opcheck-accept to give each parametrization its own entry."
            )
        ]
    )


def test_accept_replaces_a_per_function_entry_once_every_parametrization_ran(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    per_function_file(path, ops)

    partial = opcheck_run(pytester, path, "--opcheck-accept", "-k", "2 or 3")
    partial.stdout.fnmatch_lines(["opcheck: kept 1 per-function entry (test_suite.test_faketensor__test_pairs): *"])
    assert keys(path, ops) == ["test_suite.test_faketensor__test_pairs", "test_suite.test_faketensor__test_pairs[3]"]

    opcheck_run(pytester, path, "--opcheck-accept")
    assert keys(path, ops) == ["test_suite.test_faketensor__test_pairs[3]", "test_suite.test_faketensor__test_pairs[5]"]
    assert failures_data(path)[f"{ops.NS}::pairs"]["test_suite.test_faketensor__test_pairs[5]"]["comment"] == (
        "odd sizes"  # the entry it replaces speaks for it
    )


def test_a_per_function_skip_entry_skips_every_parametrization(pytester, ops):
    suite(pytester, ops, PAIRS)
    path = pytester.path / "failures.json"
    per_function_file(path, ops, status="skip")
    result = opcheck_run(pytester, path, "--opcheck-accept")
    result.assert_outcomes(passed=4)
    assert {status for *_, status in opcheck_reports(result.reprec)} == {"skip"}
    assert table_row(result, f"{ops.NS}::pairs")[1] == "skip"
    assert keys(path, ops) == ["test_suite.test_faketensor__test_pairs"]  # accept leaves skip entries alone


def test_the_fixture_judges_a_test_on_all_its_calls(pytester, ops):
    suite(
        pytester,
        ops,
        """
    def test_sizes(opcheck):
        for n in (3, 2):  # odd fails, even passes: the test's entry must stay
            opcheck(ops.pairs, (torch.ones(n),), checks=["test_faketensor"])
    """,
    )
    path = pytester.path / "failures.json"
    run(pytester, f"--opcheck-failures={path}", "--opcheck-accept").assert_outcomes(xfailed=1)
    assert keys(path, ops) == ["test_suite.test_faketensor__test_sizes"]
    rerun = run(pytester, f"--opcheck-failures={path}")
    rerun.assert_outcomes(xfailed=1)
    assert rerun.ret == 0


def test_calls_in_setup_are_checked_and_calls_in_teardown_are_not(pytester, ops):
    suite(
        pytester,
        ops,
        """
    @pytest.fixture
    def data():
        ops.pairs(torch.ones(3))
        yield
        ops.pairs(torch.ones(5))

    def test_uses_data(data):
        pass
    """,
    )
    result = run(pytester, "--opcheck", CHECK)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"  call: {ops.NS}::pairs(Tensor[3] float32)"])
    assert f"  call: {ops.NS}::pairs(Tensor[5] float32)" not in result.outlines


def test_two_tests_that_share_a_key_are_warned_about(pytester, ops):
    body = """
    class TestOps:
        def test_x(self):
            ops.good(torch.ones(2))
    """
    suite(pytester, ops, body, name="test_one")
    suite(pytester, ops, body, name="test_two")
    result = opcheck_run(pytester, pytester.path / "failures.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*opcheck: test_two.py::TestOps::test_x and test_one.py::TestOps::test_x have the same failures-file key*"]
    )
