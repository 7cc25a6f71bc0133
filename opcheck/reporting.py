"""Turn verdicts into pytest reports, and pytest items into failures-file test ids.

Each verdict that is not a plain pass becomes its own ``TestReport``, logged
after the test's own reports. It carries the test's node id, like a subtest's
report, so pytest's progress counter and ``--lf`` treat it as part of that test,
and the test's own outcome is never changed. Its location's domain names the op
and the check (``test_rowsum [opcheck ex::rowsum test_faketensor]``), which is
the header of the failure section; the first line of its text is what the
short summary prints after ``FAILED``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from opcheck.failures import TestId
from opcheck.runner import Verdict

# How each verdict status shows in the terminal: (outcome, category, letter, word).
_SHOWN = {
    "fail": ("failed", "failed", "F", "OPCHECK FAILED"),
    "xpass": ("failed", "failed", "F", "OPCHECK XPASS(strict)"),
    "xfail": ("skipped", "xfailed", "x", "OPCHECK XFAIL"),
    "skip": ("skipped", "skipped", "s", "OPCHECK SKIPPED"),
}
# Failures last: pytest's --lf cache keeps the last word on a node id.
_ORDER = ("skip", "xfail", "xpass", "fail")


def item_test_id(item: pytest.Item) -> TestId:
    """The failures-file name of a pytest item (mapping documented in ``failures.py``)."""
    cls = getattr(item, "cls", None)
    suite = cls.__name__ if cls is not None else item.path.stem
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    return TestId(item.nodeid, suite, name)


def verdict_reports(item: pytest.Item, verdicts: Sequence[Verdict]) -> list[pytest.TestReport]:
    """One report per verdict worth showing (fail, xpass, xfail, skip), failures last."""
    shown = [v for v in verdicts if v.status in _SHOWN and v.folded_into is None]
    shown.sort(key=lambda v: _ORDER.index(v.status))
    return [_report(item, verdict) for verdict in shown]


def teststatus(report: pytest.TestReport, verbose: bool) -> tuple[str, str, str] | None:
    """``pytest_report_teststatus`` for our reports: category, letter, and a word that names op and check in -v."""
    status = getattr(report, "opcheck_status", None)
    if status is None or report.when != "call":
        return None
    _, category, letter, word = _SHOWN[status]
    return category, letter, f"{word} ({report.opcheck_op} {report.opcheck_check})" if verbose else word


def _report(item: pytest.Item, verdict: Verdict) -> pytest.TestReport:
    outcome, *_ = _SHOWN[verdict.status]
    path, lineno, domain = item.location
    extra: dict[str, object] = {
        "opcheck_status": verdict.status,
        "opcheck_op": verdict.op,
        "opcheck_check": verdict.check,
    }
    longrepr: object
    if verdict.status in ("fail", "xpass"):
        longrepr = verdict.describe()
    elif verdict.status == "xfail":
        longrepr = None
        extra["wasxfail"] = f"{verdict.op} {verdict.check}: {verdict.note}"
    else:  # skip
        longrepr = (str(item.path), (lineno or 0) + 1, f"Skipped: {verdict.op} {verdict.check}: {verdict.note}")
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=(path, lineno, f"{domain} [opcheck {verdict.op} {verdict.check}]"),
        keywords={item.name: 1, "opcheck": 1},
        outcome=outcome,  # type: ignore[arg-type]
        longrepr=longrepr,  # type: ignore[arg-type]
        when="call",
        **extra,
    )
