"""Fold an item's verdicts into its own pytest report, and name pytest items for the failures file.

One collected item, one outcome: the checks of an item's calls are part of that
item's result, so pytest's "collected N items" and its outcome counts agree, and
``-x``, ``--lf``, JUnit XML and xdist see one report per item, as usual. The call
report is changed as follows (the test's own result first):

=====================  ==============================  ======================================
the test itself        an unexpected failure or xpass  only expected failures (``xfail``)
=====================  ==============================  ======================================
passed                 failed: the failures' text      xfailed: the reason names op and check
failed                 failed (as it was) + section    failed (as it was) + section
skipped / xfailed      failed: the failures' text      as it was + section
=====================  ==============================  ======================================

The section is a report section titled ``opcheck``, printed with the failure.
Failures the ``opcheck`` fixture raised reached the test already and change nothing.
``skip`` entries and plain passes leave the outcome alone. In ``-v`` the word says
``OPCHECK FAILED (op check)``, ``OPCHECK XPASS(strict) (...)`` or ``OPCHECK XFAIL (...)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from opcheck.failures import TestId
from opcheck.runner import Verdict

# The item outcome our verdicts give it, by the worst verdict: (category, letter, word).
_SHOWN = {
    "fail": ("failed", "F", "OPCHECK FAILED"),
    "xpass": ("failed", "F", "OPCHECK XPASS(strict)"),
    "xfail": ("xfailed", "x", "OPCHECK XFAIL"),
}


def item_test_id(item: pytest.Item) -> TestId:
    """The failures-file name of a pytest item (mapping documented in ``failures.py``)."""
    cls = getattr(item, "cls", None)
    suite = cls.__name__ if cls is not None else item.path.stem
    function = getattr(item, "originalname", None) or item.name.split("[")[0]
    return TestId(item.nodeid, suite, item.name, function)


def apply_verdicts(report: pytest.TestReport, verdicts: Sequence[Verdict]) -> None:
    """Fold the item's verdicts into its call report (the table in the module docstring)."""
    # Every verdict worth naming, as [op, check, status], for other plugins and tests to read.
    report.opcheck_verdicts = [  # type: ignore[attr-defined]
        [v.op, v.check, v.status] for v in verdicts if v.status in ("fail", "xpass", "xfail", "skip")
    ]
    unexpected = [v for v in verdicts if v.status in ("fail", "xpass") and not v.raised]
    expected = [v for v in verdicts if v.status == "xfail"]
    own_pass = report.passed and not hasattr(report, "wasxfail")
    if unexpected and not report.failed:
        _mark(report, "xpass" if all(v.status == "xpass" for v in unexpected) else "fail", unexpected)
        report.outcome, report.longrepr = "failed", "\n\n".join(v.describe() for v in unexpected)
        if hasattr(report, "wasxfail"):
            del report.wasxfail
    elif expected and own_pass and not unexpected:
        _mark(report, "xfail", expected)
        report.outcome, report.longrepr = "skipped", None
        report.wasxfail = "; ".join(f"{v.op} {v.check}: {v.note}" for v in expected)
    else:
        shown = unexpected + expected
        if shown:
            report.sections.append(("opcheck", "\n\n".join(v.describe() for v in shown)))


def teststatus(report: pytest.TestReport, verbose: bool) -> tuple[str, str, str] | None:
    """``pytest_report_teststatus`` for a report our verdicts decided: category, letter, and a word naming them."""
    status = getattr(report, "opcheck_outcome", None)
    if status is None or report.when != "call":
        return None
    category, letter, word = _SHOWN[status]
    return category, letter, f"{word} ({report.opcheck_checks})" if verbose else word


def _mark(report: pytest.TestReport, status: str, verdicts: Sequence[Verdict]) -> None:
    """Plain strings only: reports travel between xdist workers as JSON."""
    report.opcheck_outcome = status  # type: ignore[attr-defined]
    report.opcheck_checks = ", ".join(f"{v.op} {v.check}" for v in verdicts)  # type: ignore[attr-defined]
