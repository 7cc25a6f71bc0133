"""pt2kit's fuzzer (``tests/fuzzing.py``): its self-checks, the small profile and the long one.

- The self-checks make sure the fuzzer asks fair questions: the generated script is
  the program that was evaluated, and each template holds exactly the trigger ops it
  declares, in real dynamo and AOTAutograd graphs (else "1-minimal" would be judged
  against the wrong ops).
- ``test_fuzz_small``: the profile ``make test`` runs (``e2e``: planted backends, no
  Inductor). Five deterministic programs (``derandomize``), each run through
  ``minify run --json`` with every invariant checked, in about three minutes on two
  cores. No shrinking here: it would cost minutes; the failure prints the program.
  Hangs are left to the long profile: a hang costs a query timeout for every failing
  query (a minute or more per case).
- ``test_fuzz_long``: ``make fuzz`` (``PT2KIT_FUZZ_EXAMPLES`` cases, default 40, shared
  out over every level and kind of planted bug), with Hypothesis shrinking each new
  kind of breakage to a small program (for at most ``PT2KIT_FUZZ_SHRINK_SECONDS``,
  default 300), a line per case and a summary. ``PT2KIT_FUZZ_SUMMARY`` names a JSON
  file to write the figures to, ``PT2KIT_FUZZ_KEEP`` a directory to keep each breaking
  case's run directory in, ``PT2KIT_FUZZ_SEED`` picks another sequence, and
  ``PT2KIT_FUZZ_SHARES`` (e.g. ``fw/accuracy,bw/abort``) fuzzes only those levels/kinds.
"""

import json
import os
import sys
from pathlib import Path

import fuzz_backends as fb
from support import fuzzing as fz
import pytest
import torch
from hypothesis import given

pytestmark = pytest.mark.fuzz


def test_script_computes_the_evaluated_program():
    """What the script's ``f`` returns is what :func:`fuzzing.evaluate` saw, for every template and form."""
    for template in fz.ALL_TEMPLATES:
        for form in range(len(template.forms)):
            program = fz.Program("fw", "compile_error", ("cos",), False, (fz.Step(template, form, (0,) * template.arity), fz.Step(fz.TRIGGER_TEMPLATES["cos"], 0, (0,))), B=4, D=8)
            namespace: dict = {"torch": torch}
            exec(program.function_source(), namespace)  # our generated code  # our generated code
            torch.manual_seed(0)
            x, w = torch.randn(4, 8), torch.randn(8, 8) / 8**0.5
            (out,) = namespace["f"](x, w)
            assert out.shape == (4, 8), (template.name, form)
            torch.testing.assert_close(out, fz.evaluate(program)[-1])


def test_backend_names_cover_every_planted_bug():
    from torch._dynamo.backends.registry import list_backends

    names = set(list_backends(exclude_tags=()))
    for level in fb.LEVELS:
        for trigger in fb.triggers_for(level):
            for kind in fb.KINDS:
                assert fb.backend_name(level, kind, (trigger,)) in names


def _trigger_ops_of(fn, x, w):
    """The trigger ops (fuzz_backends' view) in fn's dynamo graph and in its aot forward and backward graphs."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    seen = {"dynamo": set(), "forward": set(), "backward": set()}

    def record_dynamo(gm, example_inputs):
        seen["dynamo"] |= fb.dynamo_ops(gm)
        return gm.forward

    def recorder(side):
        def compile_graph(gm, example_inputs):
            seen[side] |= fb.aot_ops(gm, side)
            return make_boxed_func(gm.forward)

        return compile_graph

    torch._dynamo.reset()
    torch.compile(fn, backend=record_dynamo, fullgraph=True)(x, w)
    torch._dynamo.reset()
    out = torch.compile(fn, backend=aot_autograd(fw_compiler=recorder("forward"), bw_compiler=recorder("backward")), fullgraph=True)(x, w)
    sum(o.sum() for o in out).backward()
    return seen


@pytest.mark.e2e  # about 60 small compiles in this process
def test_templates_hold_exactly_the_trigger_ops_they_declare():
    for template in fz.ALL_TEMPLATES:
        for form in range(len(template.forms)):
            program = fz.Program("fw", "compile_error", ("cos",), True, (fz.Step(template, form, (0,) * template.arity),), B=4, D=8)
            namespace: dict = {"torch": torch}
            exec(program.function_source(), namespace)
            x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
            seen = _trigger_ops_of(namespace["f"], x, w)
            label = f"{template.name} form {form}: {template.forms[form]}"
            assert seen["dynamo"] == template.uses, label
            assert seen["forward"] == template.uses, label
            assert seen["backward"] == {t for t in template.uses if fb.TRIGGERS[t].backward}, label


@pytest.mark.e2e
@pytest.mark.long
@fz.small_profile_settings()
@given(fz.programs(kinds=tuple(k for k in fb.KINDS if k != "hang")))
def test_fuzz_small(program):
    """``make test``'s profile: every invariant on a few deterministic programs."""
    fz.raise_broken(fz.check_program(program))


@pytest.mark.e2e
@pytest.mark.skipif("PT2KIT_FUZZ_EXAMPLES" not in os.environ, reason="the long profile: make fuzz (PT2KIT_FUZZ_EXAMPLES=N)")
def test_fuzz_long():
    """``make fuzz``: many cases, each new kind of breakage shrunk; per-case lines and a summary."""
    keep = os.environ.get("PT2KIT_FUZZ_KEEP")
    shares = [tuple(share.split("/")) for share in os.environ["PT2KIT_FUZZ_SHARES"].split(",")] if os.environ.get("PT2KIT_FUZZ_SHARES") else None
    tally = fz.long_profile(
        int(os.environ["PT2KIT_FUZZ_EXAMPLES"]),
        seed=int(os.environ.get("PT2KIT_FUZZ_SEED", "0")),
        shrink_seconds=float(os.environ.get("PT2KIT_FUZZ_SHRINK_SECONDS", "300")),
        keep=Path(keep) if keep else None,
        out=sys.stdout,
        shares=shares,  # type: ignore[arg-type]
    )
    summary = tally.summary()
    if os.environ.get("PT2KIT_FUZZ_SUMMARY"):
        Path(os.environ["PT2KIT_FUZZ_SUMMARY"]).write_text(json.dumps({**summary, "cases_detail": [c.figures() for c in tally.cases]}, indent=2))
    assert summary["failures_found"] == 0, f"{summary['failures_found']} of {summary['cases']} cases broke an invariant: {summary['broken_by_invariant']}"
