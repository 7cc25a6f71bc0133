"""validation/'s reports read back from their JSON: ``from_json(r.to_json())`` writes ``r.to_json()`` again.

Real reports are made in this test's own process the way tests/validation/test_validation_guards.py and
tests/validation/test_validation_sizes.py make them (planted guard faults, real dynamo traces, brute force).
The JSON rounds seconds and leaves out Z3 formulas, so the round trip is exact at the JSON level;
what the JSON holds whole (a :class:`~validation.soundness.Finding`) reads back as an equal object,
and a report read back reads back again as an equal object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import validation
from pt2kit.seams import shape_env_faults as faults
from validation.guards import GuardReport
from validation.size_classes import SizeReport

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_validation_guards import parity, same_length
from test_validation_sizes import view4

from support.records import round_trip


# --------------------------------------------------------------------------- #
# validation: guards
# --------------------------------------------------------------------------- #


def test_unsound_guard_report_with_a_confirmed_counterexample_round_trips():
    with faults.dropped_guards(lambda code: "% 2" in code):
        report = validation.check_guards(parity, torch.randn(4), confirm=True)
    assert report.status == "unsound" and any(f.counterexample and f.confirmed for f in report.findings)
    read = round_trip(report, GuardReport)
    assert read.findings == report.findings  # every field of a finding is in the JSON
    assert (read.status, read.exit_code, read.confirm, read.target) == (
        report.status, report.exit_code, True, "parity"
    )  # fmt: skip
    assert read.seconds == round(report.seconds, 4) and read.compile_seconds == round(report.compile_seconds, 4)
    assert [check.status for check in read.compiles] == [check.status for check in report.compiles]


def test_guard_report_with_an_error_a_refused_entry_and_several_findings_round_trips():
    with faults.flipped_equality_guards():
        report = validation.check_guards(same_length, torch.randn(3), torch.randn(4), confirm=True)
    assert report.error and len(report.findings) > 1 and not all(check.installed for check in report.compiles)
    read = round_trip(report, GuardReport)
    assert read.error == report.error and read.findings == report.findings
    assert [check.installed for check in read.compiles] == [check.installed for check in report.compiles]
    assert [check.refused for check in read.compiles] == [check.refused for check in report.compiles]


def test_sound_guard_report_of_several_compiles_round_trips():
    def breaks(x):
        y = x * 2
        print("graph break")
        return y + x.shape[0]

    report = validation.check_guards(breaks, torch.randn(5))
    assert len(report.compiles) > 1 and report.error is None
    read = round_trip(report, GuardReport)
    assert "error" not in json.loads(read.to_json())
    # the totals are read as written, not summed again from the rounded seconds of each compile
    for index, check in enumerate(report.compiles):
        check.seconds = check.compile_seconds = 0.00004 if index < 2 else 0.0  # each 0.0 when rounded
    assert json.loads(report.to_json())["seconds"] == 0.0001
    round_trip(report, GuardReport)


# --------------------------------------------------------------------------- #
# validation: sizes
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("merge", [False, True])
def test_size_report_with_several_classes_and_brute_force_round_trips(merge):
    report = validation.sizes(view4, ranks=[1], box=(0, 12), merge=merge, brute_force=True)
    assert len(report.classes) > 1 and report.brute_force is not None
    read = round_trip(report, SizeReport)
    assert (read.ranks, read.box, read.merged) == (report.ranks, report.box, merge)
    assert read.representatives(None) == report.representatives(None)  # tuples of tuples again
    assert [c.outcome for c in read.classes] == [c.outcome for c in report.classes]
    assert report.class_of([(4,)]).outcome == "ok"
    with pytest.raises(ValueError, match="no Z3 cells"):
        read.class_of([(4,)])


def test_size_report_with_recompiles_round_trips():
    def halves(x):
        if x.shape[0] % 2:
            return x[1:].view(-1, 2)
        return x.view(2, -1)

    report = validation.sizes(halves, ranks=[1], box=(2, 9), recompiles=True)
    assert report.recompiles is not None
    read = round_trip(report, SizeReport)
    assert read.recompiles == json.loads(json.dumps(report.recompiles))
