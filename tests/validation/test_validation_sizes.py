"""Size enumeration on real ShapeEnv traces, every answer checked by running every point for real.

``brute_force=True`` runs the program eagerly at each point of the box and compares the
outcome with the class that holds the point; the tests require zero disagreements and no
uncovered point, then check the class structure the issue names (4 classes for
``view(-1, 4)``, 3 without specialization, 2 for a matmul without specialization), the
pitfalls of the naive algorithm, and empty inputs (a size 0 is a size like any other
without specialization: the trace must ask about it, and eager has the last word).
"""

from __future__ import annotations

import json

import pytest
import torch

import validation
from pt2kit.errors import UsageError
from validation.tracing import eager_outcome


def view4(x):
    return x.view(-1, 4)


def matmul(x, y):
    return x @ y


def view_by(x, y):
    return x.view(y.shape[0], -1)


def loop(x):
    total = x.new_zeros(())
    for i in range(x.shape[0]):
        total = total + x[i]
    return total


def nonzero_pairs(x):
    return x.nonzero().view(2, -1)


def rows_of_three(x):
    return x.reshape(-1, 3)


def per_y(x, y):
    return x.new_zeros(x.shape[0] // y.shape[0])  # Python's // on two sizes: no guard, raises at y == 0


def empty_is_an_error(x):
    if x.numel() == 0:
        raise ValueError("empty input")
    return x.sum()


def first_row(x):
    return x[0]


def maximum(x):
    return x.max()  # eager refuses an empty input; the meta kernel does not check


def flat_transpose(x):
    return x.t().view(-1)  # the meta kernel raises ValueError where eager raises RuntimeError


def eager_only_check(x):
    # A check fake tensors never run (a FakeTensor is not exactly a torch.Tensor), as a meta
    # kernel that misses one of eager's: only running the program finds these sizes.
    if type(x) is torch.Tensor and x.shape[0] in (7, 9, 11):
        raise ValueError("eager only")
    return x


def _valid(report, points):
    return sorted(p for p in points if report.class_of(((p,),)).outcome == "ok")


def _assert_brute_force_agrees(report):
    bf = report.brute_force
    assert bf is not None
    assert bf["disagreements"] == 0, bf["examples"]
    assert bf["uncovered"] == 0


def test_view_minus_one_four_default_has_four_classes_and_the_exact_valid_set():
    report = validation.sizes(view4, ranks=[1], box=(0, 12), brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.status == "complete"
    assert len(report.classes) == 4
    assert _valid(report, range(13)) == [0, 4, 8, 12]
    outcomes = {cls.representative: cls.outcome for cls in report.classes}
    assert outcomes == {((0,),): "ok", ((1,),): "RuntimeError", ((2,),): "RuntimeError", ((4,),): "ok"}
    assert report.specializes_on == []


def test_view_minus_one_four_without_specialization_has_three_classes():
    report = validation.sizes(view4, ranks=[1], box=(0, 12), specialize=False, brute_force=True)
    _assert_brute_force_agrees(report)
    assert len(report.classes) == 3
    assert _valid(report, range(13)) == [0, 4, 8, 12]
    assert [cls.representative for cls in report.classes] == [((0,),), ((1,),), ((4,),)]


def test_matmul_without_specialization_has_two_classes():
    report = validation.sizes(matmul, ranks=[2, 2], box=(0, 4), specialize=False, brute_force=True)
    _assert_brute_force_agrees(report)
    assert [(cls.outcome, cls.condition) for cls in report.classes] == [
        ("ok", "x.shape[1] == y.shape[0]"),
        ("RuntimeError", "x.shape[1] != y.shape[0]"),
    ]
    assert report.brute_force["points"] == 625


def test_matmul_with_specialization_stops_honestly_at_max_classes():
    # 0/1 specialization and duck sizing split sizes the program treats alike
    capped = validation.sizes(matmul, ranks=[2, 2], box=(0, 4), max_classes=5, brute_force=True)
    assert capped.status == "incomplete" and "max-classes" in capped.reason and len(capped.classes) == 5
    assert capped.brute_force["disagreements"] == 0 and capped.brute_force["uncovered"] > 0


@pytest.mark.slow
def test_matmul_with_specialization_is_exact_in_every_class():
    report = validation.sizes(matmul, ranks=[2, 2], box=(0, 4), max_classes=200, brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.status == "complete"
    assert 2 < len(report.classes) <= 98  # the naive algorithm's count on this box was 98


@pytest.mark.parametrize("specialize", [True, False])
def test_view_by_another_size_is_exact_at_every_point(specialize):
    report = validation.sizes(view_by, ranks=[1, 1], box=(0, 6), specialize=specialize, brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.status == "complete"
    assert all(cls.outcome in ("ok", "RuntimeError") for cls in report.classes)  # no ZeroDivisionError class
    valid = sum(1 for x in range(7) for y in range(7) if report.class_of(((x,), (y,))).outcome == "ok")
    assert valid == sum(1 for x in range(7) for y in range(1, 7) if x % y == 0)
    if not specialize:
        # y == 0 is the program's own question (view asks numel() == 0), not sympy's x % 0
        assert all(cls.decided_by == "trace" for cls in report.classes)


@pytest.mark.parametrize("specialize", [True, False])
def test_an_error_outside_any_guard_never_covers_valid_points(specialize):
    # x.shape[0] // y.shape[0] asks no question, yet raises at y == 0: inside sympy when the
    # trace computes it from the example sizes (not the program's verdict: a real run
    # decides there), and nowhere in a trace at y != 0, whose class must still leave y == 0 out.
    report = validation.sizes(per_y, ranks=[1, 1], box=(0, 6), specialize=specialize, brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.status == "complete"
    for x in range(7):
        owner = report.class_of(((x,), (0,)))
        assert owner.outcome == "ZeroDivisionError"
        if not specialize:  # (with 0/1 specialization y == 0 is a constant: x // 0 can be the program's own error)
            assert owner.decided_by == "run"
    assert {report.class_of(((x,), (y,))).outcome for x in range(7) for y in range(1, 7)} == {"ok"}


@pytest.mark.parametrize("rank", [1, 2])
def test_reshape_of_empty_inputs_without_specialization_is_what_eager_does(rank):
    # Size symbols made sympy-positive would decide numel() == 0 False with no guard: every
    # empty input would join a non-empty path, and "raise" where eager returns (0, 3).
    report = validation.sizes(rows_of_three, ranks=[rank], box=(0, 6), specialize=False, brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.status == "complete"
    assert all(cls.decided_by == "trace" for cls in report.classes)
    empty = [(0,)] if rank == 1 else [(0, n) for n in range(7)] + [(n, 0) for n in range(7)]
    assert {report.class_of((shape,)).outcome for shape in empty} == {"ok"}
    assert rows_of_three(torch.empty(0, 5)).shape == (0, 3)


@pytest.mark.parametrize(
    "fn, ranks, box, specialize",
    [
        (empty_is_an_error, [2], (0, 4), False),  # the program asks whether an input is empty
        (first_row, [1], (0, 6), False),  # an op asks (IndexError at 0 only)
        (maximum, [1], (0, 6), False),  # a meta kernel misses eager's check on empty inputs
        (maximum, [1], (0, 6), True),
        (flat_transpose, [2], (0, 4), False),  # a meta kernel words an error its own way
        (flat_transpose, [2], (0, 4), True),
        (matmul, [2, 2], (0, 3), False),
    ],
    ids=lambda value: getattr(value, "__name__", None) if callable(value) else None,
)
def test_empty_inputs_get_eagers_outcome(fn, ranks, box, specialize):
    report = validation.sizes(fn, ranks=ranks, box=box, specialize=specialize, brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.status == "complete", report.reason
    for cls in report.classes:  # every class's minimal point runs as the class says
        assert eager_outcome(fn, cls.representative)[0] == cls.outcome


def test_a_report_whose_brute_force_disagrees_is_never_complete():
    report = validation.sizes(eager_only_check, ranks=[1], box=(0, 12), brute_force=True)
    assert report.brute_force["disagreements"] > 0  # only running every point sees the eager-only check
    assert report.status == "incomplete"
    assert "brute force found" in report.reason and "another outcome than a real run" in report.reason
    assert json.loads(report.to_json())["status"] == "incomplete"


def test_a_range_loop_specializes_and_says_so():
    report = validation.sizes(loop, ranks=[1], box=(0, 5), brute_force=True)
    _assert_brute_force_agrees(report)
    assert report.specializes_on == ["L['x'].size()[0]"]
    assert len(report.classes) == 6  # one per size
    big = validation.sizes(loop, ranks=[1], box=(0, 500), max_classes=3)
    assert big.status == "incomplete"
    assert "specializes on L['x'].size()[0]" in big.reason


def test_value_dependent_ops_are_flagged():
    report = validation.sizes(nonzero_pairs, ranks=[1], box=(0, 5), brute_force=True)
    _assert_brute_force_agrees(report)
    flagged = [cls for cls in report.classes if cls.value_dependent]
    assert flagged, report.to_json()
    assert report.brute_force["value_dependent"] > 0
    # size 0 has no nonzero element to look at: not value dependent
    assert report.class_of(((0,),)).value_dependent is False


def test_merge_representatives_and_json():
    merged = validation.sizes(view4, ranks=[1], box=(0, 12), merge=True, brute_force=True)
    _assert_brute_force_agrees(merged)
    assert sorted(cls.outcome for cls in merged.classes) == ["RuntimeError", "ok"]
    assert validation.representatives(view4, [1], (0, 12)) == [((0,),), ((4,),)]
    data = json.loads(merged.to_json())
    assert data["status"] == "complete" and data["merged"] is True
    assert {"outcome", "condition", "representative", "value_dependent"} <= set(data["classes"][0])
    assert data["brute_force"]["points"] == 13 and data["brute_force"]["disagreements"] == 0
    assert validation.enumerate_sizes is validation.sizes


def test_recompiles_match_real_dynamo_cache_entries():
    def halves(x):
        if x.shape[0] % 2:
            return x[1:].view(-1, 2)
        return x.view(2, -1)

    report = validation.sizes(halves, ranks=[1], box=(2, 9), recompiles=True)
    predicted = report.recompiles["entries"]
    torch._dynamo.reset()
    compiled = torch.compile(halves, dynamic=True, backend="eager")
    for size in range(2, 10):
        compiled(torch.randn(size))
    from pt2kit.seams import guard_code

    entries = guard_code.cache_entries(halves.__code__)
    torch._dynamo.reset()
    assert predicted == len(entries) == 2
    assert report.recompiles["fits"] is True


def test_bad_boxes_are_usage_errors():
    with pytest.raises(UsageError, match="upper bound"):
        validation.sizes(view4, ranks=[1], box="0:")
    with pytest.raises(UsageError):
        validation.sizes(view4, ranks=[1], box=(5, 2))
