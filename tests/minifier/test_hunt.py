"""``minify hunt``: the generator draws valid programs, the judge and triage rules decide as written, a short hunt runs.

The generator and the rules are decided in-process (a program's eager run, a verdict
fed to the triage). The judge runs real ``torch.compile`` on a genuine torch bug. The
seeded hunt (``slow``) runs the command as a user would, and checks each finding's
repro with torch alone, in another directory, on an empty Inductor cache.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minifier.hunt.judge import Judging, Outcome, Verdict, judge, load, results
from minifier.hunt.programs import Fill, Input, Program, Region, Step, generate, render, shortened
from minifier.hunt.triage import Rule, Suspect, triage
from minifier.hunt.vocabulary import Meta, apply
from pt2kit.signature import Signature


def test_the_same_seed_draws_the_same_programs():
    first, again, other = generate(7, 15), generate(7, 15), generate(8, 15)
    assert first == again and first != other
    assert len({p.steps for p in first}) > 5  # not one program fifteen times


def test_the_vocabulary_keeps_only_what_eager_accepts():
    floats, ints = Meta((3, 7), "float32"), Meta((3, 7), "int32")
    assert apply("sum", (floats,), 1) == Meta((3,), "float32")
    assert apply("sum", (floats,), 2) is None  # no third dimension
    assert apply("bitwise_and", (floats, floats)) is None  # & refuses floats
    assert apply("bitwise_and", (ints, ints)) == ints
    assert apply("add", (floats, Meta((4,), "float32"))) is None  # does not broadcast
    assert apply("to_bfloat16", (ints,)) == Meta((3, 7), "bfloat16")
    assert apply("cummin", (Meta((0,), "float32"),), 1) is None  # eager skips the dim check on an empty tensor
    assert apply("cummin", (Meta((0,), "float32"),), 0) == Meta((0,), "float32")


def test_a_cast_to_an_integer_never_converts_a_float_outside_its_range():
    # (-inf).to(int8) is undefined in C, eager's included: a program built so is no evidence of a torch bug
    import torch

    from minifier.hunt.vocabulary import OPS

    cast = next(op for op in OPS if op.name == "to_int8")
    namespace: dict = {"torch": torch}
    exec(f"def f(a):\n    return {cast.spell(('a',))}\n", namespace)
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 3e38, -1e-40, 1.5, -130.0])
    assert namespace["f"](special).tolist() == [127, -128, 0, 127, 0, 1, -128]
    wide = torch.tensor([300, -5], dtype=torch.int32)
    assert torch.equal(namespace["f"](wide), wide.to(torch.int8))  # an integer keeps its plain (wrapping) cast
    compiled = torch.compile(namespace["f"], backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(special), namespace["f"](special)) and torch.equal(compiled(wide), wide.to(torch.int8))


def test_a_reduction_to_an_integer_dtype_never_converts_a_float_outside_its_range():
    # x.sum(dtype=torch.int8) converts each element first: inf or 3e38 there is the cast's undefined behaviour
    import torch

    from minifier.hunt.vocabulary import INTEGER_RANGES, OPS

    special = torch.tensor([[float("inf"), float("-inf"), float("nan"), 3e38, -1e-40, 1.5, -130.0]])
    for name, dtype in (("sum_int8", torch.int8), ("cumsum_int32", torch.int32)):
        op = next(op for op in OPS if op.name == name)
        namespace: dict = {"torch": torch}
        exec(f"def f(a):\n    return {op.spell(('a',), -1)}\n", namespace)
        low, high = INTEGER_RANGES[str(dtype).removeprefix("torch.")]
        clamped = torch.tensor([[high, low, 0, high, 0, 1, max(low, -130)]], dtype=torch.float64)
        reduce = torch.sum if name.startswith("sum") else torch.cumsum
        assert torch.equal(namespace["f"](special), reduce(clamped.to(dtype), -1, dtype=dtype)), name
        ints = torch.tensor([[3, -2]], dtype=torch.int32)  # an integer operand is reduced as it is
        assert torch.equal(namespace["f"](ints), reduce(ints, -1, dtype=dtype)), name


def test_judged_with_subnormals_flushed_the_inputs_subnormals_are_zeros_of_their_sign(tmp_path):
    import torch

    from minifier.hunt.judge import _inputs, load

    program = tmp_path / "program.py"
    program.write_text(
        "import torch\nDYNAMIC = False\nBACKWARD = True\n\n\ndef f(a, b):\n    return (a,)\n\n\n"
        "def make_inputs():\n    a = torch.tensor([-1e-40, 1e-40, 1.0, -0.0]).requires_grad_()\n"
        "    return [a, torch.tensor([3, -1])]\n"
    )
    module = load(str(program))
    a, b = _inputs(module, Judging(flush_subnormals=True))
    assert a.tolist() == [0.0, 0.0, 1.0, 0.0] and torch.signbit(a).tolist() == [True, False, False, True]
    assert a.requires_grad and b.tolist() == [3, -1]
    assert _inputs(module, Judging())[0][0].item() != 0.0  # (judged plainly, the subnormal stays)


def test_a_program_with_a_backward_draws_no_op_whose_gradient_picks_among_ties():
    # max pooling's gradient goes to one of a window's tied maxima (0.0 and -0.0): which one is unspecified
    from minifier.hunt.vocabulary import PICKS_AMONG_TIES

    drawn = generate(11, 300)
    with_backward = [p for p in drawn if p.backward]
    assert with_backward and not any(PICKS_AMONG_TIES & set(p.ops) for p in with_backward)
    assert any(PICKS_AMONG_TIES & set(p.ops) for p in drawn if not p.backward)  # still drawn without one


def test_no_program_writes_in_place_into_a_view_whose_elements_share_memory():
    # v = x.unfold(-1, 2, 1); v.add_(v): eager writes some elements twice, functionalization refuses it
    from minifier.hunt.vocabulary import BY_NAME, OVERLAPPING_VIEWS, VIEW_NAMES

    drawn = generate(5, 600)
    checked = 0
    for program in drawn:
        overlapping: set[str] = set()
        for step in program.steps:
            if BY_NAME[step.op].inplace:
                assert step.operands[0] not in overlapping, program
            if step.op in OVERLAPPING_VIEWS or (step.op in VIEW_NAMES and step.operands[0] in overlapping):
                overlapping.add(step.name)
                checked += 1
    assert checked  # such views are still drawn, only not written into


def test_drawn_programs_run_eagerly_and_import_torch_only(tmp_path):
    programs = generate(3, 40)
    ran = 0
    for k, program in enumerate(programs):
        path = tmp_path / f"p{k}.py"
        path.write_text(render(program))
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imported == {"torch"} and not any(isinstance(n, ast.ImportFrom) for n in ast.walk(tree))
        module = load(str(path))
        try:
            outputs = results(module, module.f, Judging())
        except Exception:  # noqa: BLE001 - counted: a few steps eager refuses only on real values
            continue
        ran += 1
        assert len(outputs) >= len(program.outputs) + len(program.inputs)
    assert ran >= 0.8 * len(programs)


def test_a_shortened_program_keeps_what_its_last_step_reads_and_every_write_in_place():
    m = Meta((3,), "float32")
    steps = (
        Step("v0", "sin", ("x0",), -1, m),
        Step("v1", "add_", ("x1",), -1, m),  # a write into an input: judged after the run
        Step("v2", "exp", ("v0",), -1, m),
        Step("v3", "mul", ("v2", "x1"), -1, m),
    )
    inputs = (Input("x0", m, Fill.RANDN), Input("x1", m, Fill.RANDN))
    program = Program(inputs, steps, ("v3", "v0"), region=Region.AUTOCAST, region_span=(2, 4))
    short = shortened(program, 2)
    assert [s.name for s in short.steps] == ["v0", "v1", "v2"] and short.outputs == ("v2",)
    assert short.inputs == inputs  # the seeded values stay the same
    assert (short.region, short.region_span) == (Region.AUTOCAST, (2, 3))
    assert shortened(program, 0).region is Region.NONE  # the region's steps are all gone
    assert "with torch.autocast" in render(short) and "v3" not in render(short)


FAILED = Verdict(Outcome.FAILED, Signature("accuracy", "AccuracyError", "compiled output diverges from the fp64 reference (values)"), "output 0: RMSE")


def _asked(*answers: Verdict):
    """A judge that answers these verdicts in turn, and the judgings it was asked with."""
    asked = []

    def ask(judging: Judging) -> Verdict:
        asked.append(judging)
        return answers[len(asked) - 1]

    return ask, asked


def test_triage_drops_what_its_rules_name_and_keeps_the_rest():
    passed = Verdict(Outcome.PASSED)
    assert triage(passed, _asked()[0]) is None
    assert triage(Verdict(Outcome.INVALID), _asked()[0]) is Rule.INVALID
    assert triage(FAILED, _asked(passed)[0]) is Rule.FLAKY
    ask, asked = _asked(FAILED, passed)
    assert triage(FAILED, ask) is Rule.TOLERANCE and asked[1].tolerance == 1e-3
    exact = Verdict(Outcome.FAILED, Signature("accuracy", "AccuracyError", "compiled output diverges from the fp64 reference (exact values)"), "")
    ask, asked = _asked(exact, passed)
    assert triage(exact, ask) is Rule.OVERFLOW and asked[1].small_ints
    # an exact answer computed from floats: elu(-1e-40).any(), True eagerly, False where expm1 flushes the subnormal
    ask, asked = _asked(exact, exact, passed)  # (bucketize of a bf16 value Inductor does not round first)
    assert triage(exact, ask) is Rule.PRECISION_CASTS and asked[2].emulate_casts
    ask, asked = _asked(exact, exact, exact, passed)
    assert triage(exact, ask) is Rule.SUBNORMALS and asked[3].flush_subnormals
    # eager's fp16 rounding of an intermediate, which Inductor elides by design (emulate_precision_casts)
    ask, asked = _asked(FAILED, FAILED, passed)
    assert triage(FAILED, ask) is Rule.PRECISION_CASTS and asked[2].emulate_casts and not asked[1].emulate_casts
    # a subnormal input (-1e-40) that vectorized math reads as zero, its sign turned into a NaN by sqrt
    ask, asked = _asked(FAILED, FAILED, FAILED, passed)
    assert triage(FAILED, ask) is Rule.SUBNORMALS and asked[3].flush_subnormals and not asked[2].flush_subnormals
    kept = triage(FAILED, _asked(FAILED, FAILED, FAILED, FAILED)[0])
    assert isinstance(kept, Suspect) and "float64 reference" in kept.why
    crash = Verdict(Outcome.FAILED, Signature("crash", "SIGSEGV", "process killed by SIGSEGV"))
    assert isinstance(triage(crash, _asked(crash)[0]), Suspect)
    # a hang is judged again with more time: a slow compile under load is not a hang
    hang = Verdict(Outcome.FAILED, Signature("timeout", "Timeout", "no result within the time limit"))
    ask, asked = _asked(passed)
    assert triage(hang, ask) is Rule.SLOW and asked[0].patience == 4.0
    ask, asked = _asked(hang)
    assert isinstance(triage(hang, ask), Suspect) and asked[0].patience == 4.0
    ask, asked = _asked(FAILED, FAILED, FAILED, FAILED)
    triage(FAILED, ask)
    assert asked[0].patience == 1.0  # (only a hang gets more time)


REMAINDER_BY_INF = '''import torch
DYNAMIC = False
BACKWARD = False


def f(a, b):
    return (torch.remainder(a, b) * 1,)


def make_inputs():
    # 33 elements: the vectorized loop body runs on every x86 CPU (with AVX-512 a short tensor only runs the
    # scalar tail, which computes it right)
    return [torch.tensor([5.0, -5.0, 3.0] * 11), torch.tensor([float("inf"), float("inf"), -float("inf")] * 11)]
'''


def test_the_judge_finds_a_genuine_inductor_bug_and_passes_a_healthy_program(tmp_path):
    buggy = tmp_path / "remainder.py"
    buggy.write_text(REMAINDER_BY_INF)
    verdict = judge(str(buggy))
    assert verdict.outcome is Outcome.FAILED and verdict.failure.kind == "accuracy"
    assert "non-finite" in verdict.failure.message  # pytorch#198057: NaN where eager gives the dividend
    healthy = tmp_path / "healthy.py"
    healthy.write_text(REMAINDER_BY_INF.replace("torch.remainder(a, b)", "torch.maximum(a, b)"))
    assert judge(str(healthy)).outcome is Outcome.PASSED
    refused = tmp_path / "refused.py"
    refused.write_text(REMAINDER_BY_INF.replace("torch.remainder(a, b)", "a @ b[:2]"))
    assert judge(str(refused)).outcome is Outcome.INVALID


@pytest.mark.slow
def test_a_short_seeded_hunt_leaves_findings_that_fail_alone(tmp_path):
    out = tmp_path / "hunt"
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "hunt", "--minutes", "2", "--seed", "1", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=1200, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    # (how many programs depends on the machine's load)
    assert summary["programs"] >= 1 and summary["torch"] and json.loads((out / "hunt.json").read_text()) == summary
    assert summary["pt2kit_bugs"] == [], summary["pt2kit_bugs"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for finding in summary["findings"]:
        assert finding["within_query_bound"] and Path(finding["program"]).exists()
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache" / finding["signature"][:8]), "PT2KIT_AUTOLOAD": "0"}
        alone = subprocess.run([sys.executable, finding["repro"]], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600, check=False)
        # (the same failure: a finding's repro once lacked its data file, and failed only to find it)
        assert alone.returncode != 0 and finding["failure"]["exception"] in alone.stderr, (finding, alone.stderr[-1500:])
