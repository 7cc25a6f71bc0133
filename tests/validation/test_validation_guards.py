"""Guard validation on real dynamo compiles, with bugs planted the way torch (or a real bug) plants them.

Each verdict is checked against brute force: over a small box of sizes, call the compiled
function with ``torch.compiler.set_stance("fail_on_recompile")`` -- so a call either runs
the cached entry (its installed guards accepted the sizes) or raises -- and compare with
eager. A compile is unsound exactly when some size runs the cached entry and disagrees
with eager; the counterexample pt2kit reports must be such a size.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

import validation
from pt2kit.seams import shape_env_faults as faults
from validation.guards import GuardValidator


#: check_guards compiles in a cache region of its own (torch.compile(isolate_recompiles=True), torch 2.13 on)
NEEDS_ISOLATED_RECOMPILES = pytest.mark.torch_since("2.13", "check_guards compiles in a cache region of its own")

pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


def parity(x):
    if x.shape[0] % 2 == 0:
        return x * 2
    return x + 1


def same_length(x, y):
    if x.size(0) == y.size(0):
        return x + y
    return x.sum() + y.sum()


def blocks(x, y):
    b = x.shape[0] // 4
    return x[: b * 4].view(b, 4).sum(1) + y.view(-1, 2).sum()


def at_least_four(x):
    if x.shape[0] > 3:  # refines the range of x.shape[0]: ShapeEnv clears its static cache
        return x[:4].sum() + x.sum()
    return x.sum()


def mlp(x, w1, w2):
    return torch.relu(x @ w1) @ w2


def bcast(x, y):
    return (x + y).mean(dim=-1)


def attention_scale(x):
    # d ** 0.5 compares a float of a size with 0.0: exact in Z3 as the integer comparison
    d = x.shape[-1] // 4
    return (x @ x.transpose(-1, -2) / d**0.5).softmax(-1)


def parity_past_a_float_guard(x):
    if x.shape[0] ** 0.5 > 1.8:  # a shape guard Z3 cannot read (a float): sizes 4 and up
        if x.shape[0] % 2 == 0:
            return x * 2
        return x + 1
    return x


def big_past_a_float_guard(x):
    if x.shape[0] ** 0.5 > 1.8:  # sizes 4 and up: implies the next guard
        if x.shape[0] > 3:
            return x * 2
        return x + 1
    return x


def not_three(x):
    if x.shape[0] != 3:
        return x * 2
    return x


def at_least_six(x):
    torch._check(x.shape[0] > 5)
    return x[5:]


def prefix(x, n):
    return x[:n]


def per_row(x):
    return x.new_zeros(x.shape[0] // 3 + x.shape[1])


def doubled(x):
    return x * 2


def floaty(x, r: float):
    if r > 0.5:
        return x * r
    return x - r


def _breaking_points(fn, example, points, make):
    """Compile ``fn`` at ``example`` (bugs planted by the caller), then find sizes where the cached entry is wrong."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, dynamic=True, backend="eager")
    compiled(*make(example))
    broken = []
    with torch.compiler.set_stance("fail_on_recompile"):
        for point in points:
            args = make(point)
            try:
                got = compiled(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
            except Exception:  # noqa: BLE001 - the guards rejected these sizes: a recompile was refused
                continue
            want = fn(*args)
            if got.shape != want.shape or not torch.allclose(got, want):
                broken.append(point)
    torch._dynamo.reset()
    return broken


def _vector(point):
    torch.manual_seed(sum(point))
    return [torch.randn(size) for size in point]


SIZES = [(n,) for n in range(0, 9)]


@NEEDS_ISOLATED_RECOMPILES
def test_a_correct_program_is_sound_and_brute_force_agrees():
    report = validation.check_guards(parity, torch.randn(4))
    assert report.status == "sound", report.to_json()
    assert report.exit_code == 0
    (check,) = report.compiles
    assert check.guards >= 2 and check.assumptions >= 3
    assert _breaking_points(parity, (4,), SIZES, _vector) == []


@NEEDS_ISOLATED_RECOMPILES
@pytest.mark.parametrize(
    "fn, args",
    [
        (blocks, (torch.randn(10), torch.randn(6))),
        (at_least_four, (torch.randn(6),)),
        (mlp, (torch.randn(5, 8), torch.randn(8, 16), torch.randn(16, 3))),
        (bcast, (torch.randn(3, 1, 5), torch.randn(4, 5))),
        (same_length, (torch.randn(3), torch.randn(3))),
        # parameters are guarded through their module, not by shape guards: facts, as for dynamo
        (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)), (torch.randn(5, 8),)),
        (attention_scale, (torch.randn(2, 6, 16),)),
    ],
)
def test_correct_programs_are_sound(fn, args):
    report = validation.check_guards(fn, *args)
    assert report.status == "sound", report.to_json()
    assert all(check.findings == [] for check in report.compiles)


@NEEDS_ISOLATED_RECOMPILES
def test_dropped_parity_guard_is_unsound_with_a_counterexample_that_breaks_it():
    with faults.dropped_guards(lambda code: "% 2" in code):
        report = validation.check_guards(parity, torch.randn(4), confirm=True)
        broken = _breaking_points(parity, (4,), SIZES, _vector)
    assert report.status == "unsound" and report.exit_code == 1
    (finding,) = [f for f in report.findings if f.unsound]
    assert finding.kind == "unsound-guard" and "% 2" in finding.readable
    size = finding.counterexample["L['x'].size()[0]"]
    assert (size,) in broken, (finding.counterexample, broken)
    assert finding.confirmed is True, finding.detail
    assert broken == [(3,), (5,), (7,)]  # brute force: the odd sizes >= 2 reuse the even graph


@NEEDS_ISOLATED_RECOMPILES
def test_a_counterexample_passes_every_installed_guard_even_one_pt2kit_cannot_read():
    # Z3 cannot read the float guard, so sizes 3 (odd, >= 2) breaks the dropped parity
    # guard as far as Z3 knows; the installed guards reject 3, so the counterexample is 5.
    with faults.dropped_guards(lambda code: "% 2" in code):
        report = validation.check_guards(parity_past_a_float_guard, torch.randn(4))
        broken = _breaking_points(parity_past_a_float_guard, (4,), SIZES, _vector)
    assert broken == [(5,), (7,)]  # brute force: 3 fails the float guard, so dynamo recompiles there
    assert report.status == "unsound" and report.exit_code == 1, report.to_json()
    (finding,) = [f for f in report.findings if f.unsound]
    assert "% 2" in finding.readable
    assert finding.counterexample == {"L['x'].size()[0]": 5} and finding.accepted is True
    assert any(f.kind == "untranslatable" for f in report.findings)  # the float guard is still named


@NEEDS_ISOLATED_RECOMPILES
def test_a_finding_whose_every_counterexample_the_installed_guards_reject_is_incomplete_not_unsound():
    # The dropped guard (x.shape[0] > 3: the range 4 <= x.shape[0]) is implied by the float guard Z3
    # cannot read: every size Z3 offers (0..3) is rejected by the installed guards.
    with faults.dropped_guards(lambda code: "4 <= " in code):
        report = validation.check_guards(big_past_a_float_guard, torch.randn(5))
        broken = _breaking_points(big_past_a_float_guard, (5,), SIZES, _vector)
    assert broken == []
    assert report.status == "incomplete" and report.exit_code == 7, report.to_json()
    unsound = [f for f in report.findings if f.unsound]
    assert unsound and all(f.refuted and f.accepted is False for f in unsound)
    assert all("reject every counterexample" in f.detail for f in unsound)


def _mark_unbacked(x):
    torch._dynamo.decorators.mark_unbacked(x, 0)
    return x


def _mark_dynamic_between(x, low, high):
    torch._dynamo.mark_dynamic(x, 0, min=low, max=high)
    return x


@pytest.mark.parametrize(
    "fn, make, dynamic, form",
    [
        (parity, lambda: (torch.randn(4),), True, "(L['x'].size()[0] % 2) == 0"),
        (parity, lambda: (torch.randn(4),), True, "2 <= L['x'].size()[0]"),  # 0/1 specialization's range
        (not_three, lambda: (torch.randn(4),), True, "L['x'].size()[0] != 3"),
        (at_least_six, lambda: (torch.randn(8),), True, "6 <= L['x'].size()[0]"),  # a refined range
        (prefix, lambda: (torch.randn(8), 3), True, "L['n'] >= 0 and L['n'] <= L['x'].size()[0]"),
        (per_row, lambda: (torch.randn(7, 2),), True, "L['x'].stride()[0] == L['x'].size()[1]"),
        (doubled, lambda: (_mark_dynamic_between(torch.randn(6), 3, 40),), None, "3 <= L['x'].size()[0] <= 40"),
        (parity, lambda: (_mark_unbacked(torch.randn(4)),), None, "0 <= L['x'].size()[0]"),  # size-like, unbacked
    ],
    ids=["mod", "range", "ne", "refined-range", "int-input", "stride", "min-max", "unbacked"],
)
def test_every_shape_guard_form_dynamo_installs_is_read(fn, make, dynamic, form):
    from pt2kit.seams import guard_code
    from validation import pyexpr

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="eager", dynamic=dynamic)
    with GuardValidator() as validator:
        compiled(*make())
    installed = {
        pyexpr.strip_comment(part.code)
        for entry in guard_code.cache_entries(fn.__code__)
        for part in guard_code.code_parts(entry.guard_manager)
    }
    torch._dynamo.reset()
    assert form in installed, sorted(installed)
    report = validator.report
    assert report.compiles and report.status == "sound", report.to_json()
    assert all(check.findings == [] and check.guards_complete for check in report.compiles)


@NEEDS_ISOLATED_RECOMPILES
def test_unsound_static_decision_without_any_guard_is_found():
    # pytorch#169602: a wrong bound for `x % m` decides `x % 2 == 0` statically, no guard installed
    with faults.wrong_mod_bounds(2):
        report = validation.check_guards(parity, torch.randn(4), confirm=True)
        broken = _breaking_points(parity, (4,), SIZES, _vector)
    assert report.status == "unsound"
    (finding,) = [f for f in report.findings if f.unsound]
    assert finding.kind == "static-decision"
    assert finding.counterexample == {"L['x'].size()[0]": 3}
    assert finding.confirmed is True
    assert (3,) in broken


@NEEDS_ISOLATED_RECOMPILES
def test_flipped_equality_guard_is_unsound_and_confirmed_on_the_entry_torch_refused():
    # torch's own knob installs Eq(s0, s1) for a trace that took the != branch; torch's
    # same-frame check then refuses the entry, so --confirm runs the entry it built.
    with faults.flipped_equality_guards():
        report = validation.check_guards(same_length, torch.randn(3), torch.randn(4), confirm=True)
    assert report.status == "unsound"
    assert "Guard failed on the same frame" in (report.error or "")
    kinds = {f.kind for f in report.findings}
    assert "guard-rejects-own-inputs" in kinds
    (flipped,) = [f for f in report.findings if f.kind == "unsound-guard" and f.origin == "evaluate_expr"]
    counterexample = flipped.counterexample
    assert counterexample["L['x'].size()[0]"] == counterexample["L['y'].size()[0]"]
    assert flipped.confirmed is True, flipped.detail
    # and really: at equal sizes eager takes the other branch
    x, y = torch.randn(counterexample["L['x'].size()[0]"]), torch.randn(counterexample["L['y'].size()[0]"])
    assert same_length(x, y).shape != (x.sum() + y.sum()).shape


@NEEDS_ISOLATED_RECOMPILES
def test_float_guards_are_incomplete_never_sound():
    with torch._dynamo.config.patch(specialize_float=False):
        report = validation.check_guards(floaty, torch.randn(4), 0.7)
    assert report.status == "incomplete" and report.exit_code == 7
    assert any(f.kind == "untranslatable" for f in report.findings)
    assert not any(f.unsound for f in report.findings)
    # a module's float attribute (LayerNorm's eps) is a symbolic float under torch 2.13's defaults
    norm = validation.check_guards(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16)), torch.randn(5, 8)
    )
    assert norm.status == "incomplete"
    assert {f.kind for f in norm.findings} == {"untranslatable"}


@NEEDS_ISOLATED_RECOMPILES
def test_json_report_matches_the_contract():
    with faults.dropped_guards(lambda code: "% 2" in code):
        report = validation.check_guards(parity, torch.randn(4))
    data = json.loads(report.to_json())
    assert data["status"] == "unsound"
    (compile_,) = data["compiles"]
    assert {"function", "compile_id", "status", "guards", "seconds", "compile_seconds", "findings"} <= set(compile_)
    assert compile_["function"] == "parity" and re.fullmatch(r"\d+/0", compile_["compile_id"])
    (finding,) = [f for f in compile_["findings"] if f["kind"] == "unsound-guard"]
    assert re.fullmatch(r"Eq\(Mod\(s\d+, 2\), 0\)", finding["assumption"]), finding
    assert finding["readable"] == "L['x'].size()[0] % 2 == 0"
    assert finding["counterexample"] == {"L['x'].size()[0]": 3}
    assert finding["confirmed"] is None  # no --confirm


def test_validator_sees_recompiles_and_graph_breaks_and_restores_torch():
    import torch._dynamo.convert_frame as convert_frame
    from torch._dynamo.guards import CheckFunctionManager
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from pt2kit.seams import convert_frame as frame_seat

    before = (
        ShapeEnv.__dict__["evaluate_expr"],
        ShapeEnv.__dict__["_maybe_evaluate_static"],
        CheckFunctionManager.__init__,
    )

    def broken(x):
        y = x * 2
        print("graph break", end="")
        return y[: x.shape[0] // 2].sum()

    torch._dynamo.reset()
    compiled = torch.compile(broken, dynamic=True, backend="eager")
    with GuardValidator() as validator:
        assert ShapeEnv.__dict__["evaluate_expr"] is not before[0]
        # ShapeEnv clears its own cache through the wrapper while armed (_refine_ranges does)
        ShapeEnv()._maybe_evaluate_static.cache_clear()
        assert ShapeEnv._maybe_evaluate_static.cache_info().currsize == 0  # (cleared through the wrapper)
        compiled(torch.randn(6))
        compiled(torch.randn(7))
    assert (
        ShapeEnv.__dict__["evaluate_expr"],
        ShapeEnv.__dict__["_maybe_evaluate_static"],
        CheckFunctionManager.__init__,
    ) == before
    # the frame seat is shared and stays installed when idle (pt2kit/seams/convert_frame.py); we are off it
    assert validator not in frame_seat._observers
    assert convert_frame._compile is not None
    assert len(validator.report.compiles) >= 2
    assert validator.report.status == "sound", validator.report.to_json()
    assert {check.function for check in validator.report.compiles} == {"broken"}
    torch._dynamo.reset()


@NEEDS_ISOLATED_RECOMPILES
def test_check_guards_leaves_the_callers_cache_alone():
    torch._dynamo.reset()
    compiled = torch.compile(parity, dynamic=True, backend="eager")
    compiled(torch.randn(4))
    report = validation.check_guards(compiled, torch.randn(4))
    assert len(report.compiles) == 1  # compiled afresh, not a reuse of the caller's entry
    with torch.compiler.set_stance("fail_on_recompile"):
        compiled(torch.randn(6))  # the caller's own entry still serves
    torch._dynamo.reset()


@NEEDS_ISOLATED_RECOMPILES
@pytest.mark.slow
def test_inductor_compile_is_sound_within_twice_its_compile_time():
    def attention(x, w):
        b, t, d = x.shape
        q = (x @ w).view(b, t, 2, d // 2).transpose(1, 2)
        return torch.softmax(q @ q.transpose(-1, -2) / 4, dim=-1).sum()

    report = validation.check_guards(attention, torch.randn(2, 6, 8), torch.randn(8, 8), backend="inductor")
    assert report.status == "sound", report.to_json()
    assert report.seconds <= 2 * report.compile_seconds
    assert sum(check.assumptions for check in report.compiles) > 10


@pytest.mark.parametrize(
    "guards_complete, finding, status",
    [
        (True, dict(confirmed=None), "unsound"),
        (True, dict(confirmed=False), "unsound"),  # eager and the entry agreed there: the assumption is still broken
        (True, dict(confirmed=False, refuted=True), "incomplete"),  # the real guards reject it: pt2kit missed a guard
        (False, dict(confirmed=None), "incomplete"),  # a shape guard was not translated: Z3 saw too few guards
        (False, dict(confirmed=True), "unsound"),  # ...but the run showed it for real
    ],
)
def test_verdict_rules(guards_complete, finding, status):
    from validation.soundness import CompileCheck, Finding

    check = CompileCheck(
        "f",
        "0/0",
        "f.py",
        1,
        "sound",
        1,
        1,
        0.0,
        0.0,
        [Finding("unsound-guard", "Eq(s0, 1)", counterexample={"L['x'].size()[0]": 2}, **finding)],
    )
    check.guards_complete = guards_complete
    check.settle()
    assert check.status == status
