"""The pytest plugin (entry point ``pytest11: opcheck``): hooks only.

Modelled on Hypothesis's plugin: options in ``pytest_addoption``, the marker in
``pytest_configure``, a fixture, and a section in ``pytest_terminal_summary``.
pytest loads this module in every session of every project that installs
pt2kit, so it imports nothing but pytest and does nothing until asked: torch and
the rest of ``opcheck`` are imported only when ``--opcheck``, ``--opcheck-list``
or ``--opcheck-accept`` is given, a collected test carries the ``opcheck``
marker, or a test requests the ``opcheck`` fixture. The session's state lives in
one :class:`~opcheck.runner.OpcheckRunner` in ``config.stash``, never in module
globals, so an in-process pytester run gets its own. Before the first runner starts,
the torch internals opcheck relies on are checked (:func:`pt2kit.seams.require`):
outside the tested torch range a broken one is a one-line usage error, not a traceback.

Per test item (with a runner, and ``--opcheck`` or the marker):
``pytest_runtest_protocol`` records the item's custom-op calls through setup and
the test itself; ``pytest_runtest_makereport`` for the call phase then checks the
signatures the item called and folds the verdicts into the item's own call report
(``reporting.py``): one collected item, one outcome. Calls made by fixture
teardown are not checked: by then the item's outcome is settled.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from opcheck.runner import OpcheckRunner, VerdictStatus

#: The seams of ``pt2kit/seams/`` opcheck's recording and checks need.
SEAMS = ("op_calls", "ops", "optests", "fake_tensor", "dispatch", "dynamo_utils")

RUNNER = pytest.StashKey["OpcheckRunner"]()
SELECTOR = pytest.StashKey[Any]()  # the OpSelector a test records with
SAVED = pytest.StashKey[Path]()

MARKER_HELP = (
    "opcheck(*ops, checks=None): record this test's calls of the given custom ops "
    "(all custom ops if none are given) and check them, even without --opcheck. "
    "checks: a subset of test_schema, test_autograd_registration, test_faketensor, "
    "test_aot_dispatch_static, test_aot_dispatch_dynamic."
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opcheck", "opcheck: check custom ops and their fake/meta kernels")
    group.addoption(
        "--opcheck",
        action="store_true",
        help="record every custom-op call the tests make and check each distinct signature once",
    )
    group.addoption(
        "--opcheck-namespaces",
        action="append",
        default=[],
        metavar="NS[,NS...]",
        help="only record ops in these namespaces (default: every namespace torch does not own)",
    )
    group.addoption(
        "--opcheck-checks",
        metavar="CHECK[,CHECK...]",
        help="run only these checks (default: all five, named as in torch.library.opcheck)",
    )
    group.addoption(
        "--opcheck-list",
        action="store_true",
        help="run the tests and list the ops and signatures that would be checked, without checking",
    )
    group.addoption(
        "--opcheck-failures",
        metavar="FILE",
        help="known failures, in torch's failures-dict JSON format (xfail / skip per op and test)",
    )
    group.addoption(
        "--opcheck-accept",
        action="store_true",
        help="write the current failures into the --opcheck-failures file (created if missing)",
    )
    parser.addini("opcheck_failures", "default for --opcheck-failures, relative to the rootdir")
    parser.addini("opcheck_namespaces", "default for --opcheck-namespaces", type="args")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    if config.getoption("opcheck_accept") and (
        getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput")
    ):  # each pytest-xdist worker would write the file from its share of the tests, the last one winning
        raise pytest.UsageError("opcheck: --opcheck-accept needs the whole run in one process; run it without -n")
    if any(config.getoption(name) for name in ("opcheck", "opcheck_list", "opcheck_accept")):
        _start_runner(config, sweep=True)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[None, Any, Any]:
    """Under accept, note every parametrization of each test function, before ``-k`` or a node id selects some."""
    result = yield
    runner = collector.config.stash.get(RUNNER, None)
    if runner is not None and runner.accepted is not None and isinstance(result, list):
        from opcheck.reporting import item_test_id

        items = [item for item in result if isinstance(item, pytest.Item)]
        if items:
            runner.add_family(item_test_id(items[0]), [item.name for item in items])
    return result


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("opcheck")]
    if marked:
        from opcheck.checks import validate_checks

        for item in marked:
            try:
                validate_checks(_marker_checks(item.get_closest_marker("opcheck")) or ())
            except ValueError as error:
                raise pytest.UsageError(f"opcheck marker on {item.nodeid}: {error}") from error
        if RUNNER not in config.stash:
            _start_runner(config, sweep=False)
        for item in marked:
            config.stash[RUNNER].want_checks(_marker_checks(item.get_closest_marker("opcheck")) or ())
    runner = config.stash.get(RUNNER, None)
    if runner is not None and runner.expected is not None:
        _warn_shared_keys(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    runner = item.config.stash.get(RUNNER, None)
    if runner is None:
        return (yield)
    from opcheck.reporting import item_test_id

    marker = item.get_closest_marker("opcheck")
    selector = runner.selector_for(marker.args if marker else None)
    test = item_test_id(item)
    if selector is None:  # the fixture may still check calls
        try:
            return (yield)
        finally:
            runner.end_item(test)
    item.stash[SELECTOR] = selector
    with runner.recording(test, selector):
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: sees the report as pytest's xfail handling left it
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    runner = item.config.stash.get(RUNNER, None)
    if call.when == "call" and runner is not None and (SELECTOR in item.stash or runner.judging(item.nodeid)):
        from opcheck.reporting import apply_verdicts, item_test_id

        verdicts = runner.judge_item(
            item_test_id(item),
            _marker_checks(item.get_closest_marker("opcheck")),
            completed=report.passed and not hasattr(report, "wasxfail"),
        )
        apply_verdicts(report, verdicts)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    if not hasattr(report, "opcheck_outcome"):
        return None
    from opcheck.reporting import teststatus

    return teststatus(report, verbose=config.get_verbosity() > 0)


@pytest.fixture
def opcheck(request: pytest.FixtureRequest) -> Callable[..., dict[str, VerdictStatus]]:
    """Check a custom op on one call: ``opcheck(op, args, kwargs=None, *, checks=None)``.

    ``op`` is a ``torch.library.custom_op`` function, an ``OpOverload``, an
    ``OpOverloadPacket`` or a ``"ns::name"`` string. Returns ``{check: status}``;
    raises ``OpcheckFailure`` naming each failed check unless the failures file
    expects it. Each distinct signature is checked once per session. An ``xfail``
    entry of the test that no call fails is reported at the end of the test.
    """
    runner = request.config.stash.get(RUNNER, None) or _start_runner(request.config, sweep=False)
    from opcheck.reporting import item_test_id
    from opcheck.runner import OpcheckFailure

    test = item_test_id(request.node)

    def check(
        op: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None, *, checks: Any = None
    ) -> dict[str, VerdictStatus]:
        __tracebackhide__ = True
        statuses, failed = runner.check_call(test, op, tuple(args), dict(kwargs or {}), checks)
        if failed:
            raise OpcheckFailure(failed)
        return statuses

    return check


@pytest.fixture
def opcheck_sizes() -> Callable[..., list[tuple[tuple[int, ...], ...]]]:
    """Sample sizes for a custom op's checks: one minimal set per code path, from pt2kit's size enumeration.

    ``opcheck_sizes(fn, ranks, box=(0, 8), **options)`` is ``validation.representatives``:
    ``fn`` takes one tensor per rank (call your op in it), ``box`` bounds every dimension;
    returns the smallest sizes of each class of sizes on which ``fn`` runs without error.
    Feed them to the ``opcheck`` fixture, e.g. ``for sizes in opcheck_sizes(lambda x:
    myop(x), [1], (0, 6)): opcheck(myop, (torch.randn(*sizes[0]),))``.
    """
    from pt2kit import seams

    try:
        seams.require("the opcheck_sizes fixture", "shape_env", "fake_tensor", "sympy_z3", "convert_frame")
    except seams.SeamBroken as error:
        pytest.fail(f"opcheck_sizes: {error}", pytrace=False)
    from validation import representatives

    return representatives


def pytest_sessionfinish(session: pytest.Session) -> None:
    runner = session.config.stash.get(RUNNER, None)
    if runner is not None:
        runner.stop()
        saved = runner.save_failures()
        if saved is not None:
            session.config.stash[SAVED] = saved


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    runner = config.stash.get(RUNNER, None)
    if runner is None:
        return
    from opcheck import summary

    records = list(runner.records.values())
    terminalreporter.section("opcheck")
    if not records:
        terminalreporter.write_line("opcheck: no custom-op calls were recorded")
    elif runner.list_only:
        terminalreporter.write_line(f"opcheck --opcheck-list: {summary.headline(records)} (nothing checked)")
        terminalreporter.write_line(summary.render_listing(records))
    else:
        terminalreporter.write_line(f"opcheck: {summary.headline(records)}")
        width = config.get_terminal_writer().fullwidth
        terminalreporter.write_line(summary.render_table(records, runner.checks, width, terminalreporter.hasmarkup))
    for line in summary.failures_file_notes(runner, config.stash.get(SAVED, None)):
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    runner = config.stash.get(RUNNER, None)
    if runner is not None:
        runner.stop()


def _start_runner(config: pytest.Config, *, sweep: bool) -> OpcheckRunner:
    from pt2kit import seams

    try:
        seams.require("opcheck", *SEAMS)
    except seams.SeamBroken as error:  # a torch outside the tested range changed what opcheck needs
        raise pytest.UsageError(f"opcheck: {error}") from None
    from opcheck.runner import OpcheckRunner

    try:
        runner = OpcheckRunner(
            sweep=sweep,
            namespaces=frozenset(_split(config.getoption("opcheck_namespaces") or config.getini("opcheck_namespaces"))),
            checks=_split([config.getoption("opcheck_checks") or ""]) or _all_checks(),
            failures_path=_failures_path(config),
            accept=config.getoption("opcheck_accept"),
            list_only=config.getoption("opcheck_list"),
        )
    except ValueError as error:  # bad options, or an unreadable failures file
        raise pytest.UsageError(f"opcheck: {error}") from error
    runner.start()
    config.stash[RUNNER] = runner
    return runner


def _warn_shared_keys(items: list[pytest.Item]) -> None:
    """Two items with one failures-file key would share one entry: say so, on the second."""
    from opcheck.reporting import item_test_id

    first: dict[tuple[str, str], str] = {}
    for item in items:
        test = item_test_id(item)
        other = first.setdefault((test.suite, test.name), item.nodeid)
        if other != item.nodeid:
            item.warn(
                pytest.PytestWarning(
                    f"opcheck: {item.nodeid} and {other} have the same failures-file key "
                    f"({test.key('<check>')}), so they share its entries; rename one of them"
                )
            )


def _failures_path(config: pytest.Config) -> Path | None:
    given = config.getoption("opcheck_failures")
    if given:
        return Path(given).absolute()
    from_ini = config.getini("opcheck_failures")
    if from_ini:
        return config.rootpath / from_ini
    return None


def _marker_checks(marker: pytest.Mark | None) -> tuple[str, ...] | None:
    if marker is None or marker.kwargs.get("checks") is None:
        return None
    checks = marker.kwargs["checks"]
    return (checks,) if isinstance(checks, str) else tuple(checks)


def _split(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _all_checks() -> tuple[str, ...]:
    from opcheck.checks import CHECKS

    return tuple(CHECKS)
