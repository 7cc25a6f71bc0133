"""Every seam's probe passes on the torch pt2kit is pinned to (the smoke tests of the seam layer)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from pt2kit import seams


pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


@pytest.mark.parametrize("name", seams.names())
def test_seam_probe_passes_on_the_pinned_torch(name: str) -> None:
    status = seams.check(name)
    # (absent: the seam wraps a torch feature younger than this torch, and says which release has it)
    assert status.ok or status.absent, f"seam {name} ({status.seam.wraps if status.seam else '?'}) is broken: {status.error}"
    assert status.seam is not None and status.seam.features, "a seam must say which features need it"


def test_every_seam_module_is_discovered() -> None:
    assert "after_dynamo" in seams.names()


def _doctor(*args: str):
    from click.testing import CliRunner

    from minifier.cli import main

    seams.check.cache_clear()
    return CliRunner().invoke(main, ["doctor", *args])


def test_doctor_passes_on_the_pinned_torch_and_lists_every_feature():
    import json

    result = _doctor("--json")
    data = json.loads(result.stdout)
    absent = {feature for s in data["seams"] if s["absent"] for feature in s["features"]}  # (on torch 2.11, 2.12)
    assert data["status"] == ("absent" if absent else "ok") and data["in_tested_range"]
    assert result.exit_code == (seams.SeamBroken.exit_code if absent else 0), result.output
    assert {s["seam"] for s in data["seams"]} == set(seams.names())
    assert {f for f, works in data["features"].items() if not works} == absent
    assert "naming the user's backend in a repro" in data["features"]


def test_a_missing_torch_internal_is_reported_with_the_feature_it_breaks(monkeypatch):
    import torch._dynamo.backends.registry as registry

    monkeypatch.delattr(registry, "_COMPILER_FNS")
    try:
        result = _doctor()
        assert result.exit_code == seams.SeamBroken.exit_code
        assert "naming the user's backend in a repro" in result.output and "not with this torch" in result.output
        assert "Traceback" not in result.output
    finally:
        seams.check.cache_clear()


def test_a_seam_whose_behaviour_changed_is_flagged_though_every_name_is_there(monkeypatch):
    # torch keeps BackendCompilerFailed and its inner_exception attribute, but stops
    # putting the wrapped error there: a probe that only checked names would pass.
    import torch._dynamo.exc as exc

    original = exc.BackendCompilerFailed.__init__

    def forgets_the_wrapped_error(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.inner_exception = None

    monkeypatch.setattr(exc.BackendCompilerFailed, "__init__", forgets_the_wrapped_error)
    try:
        result = _doctor()
        assert result.exit_code == seams.SeamBroken.exit_code, result.output
        assert "failure signatures" in result.output and "not with this torch" in result.output
    finally:
        seams.check.cache_clear()


def test_outside_the_tested_torch_range_a_broken_seam_stops_a_command_in_one_line(monkeypatch, tmp_path):
    import torch._dynamo.backends.registry as registry
    from click.testing import CliRunner

    from minifier.cli import main

    monkeypatch.setattr(seams, "TESTED_TORCH", ((9, 99),))
    monkeypatch.delattr(registry, "_COMPILER_FNS")
    seams.check.cache_clear()
    script = tmp_path / "any.py"
    script.write_text("print('hi')\n")
    try:
        result = CliRunner().invoke(main, ["run", "--out", str(tmp_path / "runs"), str(script)])
    finally:
        seams.check.cache_clear()
    assert result.exit_code == seams.SeamBroken.exit_code
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert "is not supported by pt2kit's the minifier" in line and "_COMPILER_FNS" in line and "minify doctor" in line


@pytest.mark.parametrize(("ci", "carried"), [("1", {"error_on_custom_op_aliasing": True}), (None, {"error_on_custom_op_aliasing": False})])
def test_config_a_ci_machine_defaults_differently_is_carried_into_repros(ci, carried):
    """torch defaults ``error_on_custom_op_aliasing`` from ``$CI``; a repro pins it either way."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = ci
    code = "import json; from pt2kit.seams import config; print(json.dumps(config.changed_values('torch._functorch.config')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == carried


def test_keys_that_act_only_on_custom_ops_are_left_out_of_graphs_without_one():
    import torch._functorch.config as functorch_config

    from minifier.capture.context import non_default_config

    # torch's own patch, not monkeypatch: pytest >= 9 restores an attribute missing from the
    # module's __dict__ by deleting it, and a deleted torch config key is hidden for good
    before = functorch_config.error_on_custom_op_aliasing
    with functorch_config.patch(error_on_custom_op_aliasing=True):
        carried = non_default_config(custom_ops=True).values.get("torch._functorch.config", {})
        assert carried.get("error_on_custom_op_aliasing") is True
        assert "error_on_custom_op_aliasing" not in non_default_config(custom_ops=False).values.get("torch._functorch.config", {})
    assert functorch_config.error_on_custom_op_aliasing is before


def test_a_seam_younger_than_this_torch_is_absent_not_broken_and_its_feature_says_which_torch_it_needs(monkeypatch):
    """torch 2.11 and 2.12 have no isolated cache regions: doctor passes and names the release
    ``explain.explain`` needs; asking for the feature is one line, inside the tested range too."""
    import dataclasses

    from pt2kit.seams import cache_regions

    def no_regions() -> None:
        raise AttributeError("torch.compile takes no isolate_recompiles")

    monkeypatch.setattr(cache_regions, "SEAM", dataclasses.replace(cache_regions.SEAM, since=(9, 1)))
    monkeypatch.setattr(cache_regions, "probe", no_regions)
    seams.check.cache_clear()
    try:
        result = _doctor("--json")
        assert result.exit_code == seams.SeamBroken.exit_code, result.output  # (not every feature works)
        data = json.loads(result.stdout)
        (status,) = [s for s in data["seams"] if s["seam"] == "cache_regions"]
        assert status["absent"] and not status["ok"] and status["error"].startswith("needs torch 9.1 or newer")
        assert data["status"] == "absent" and data["features"]["explain (isolated analysis)"] is False
        assert "needs torch 9.1 or newer" in _doctor().output
        assert seams.in_tested_range()
        with pytest.raises(seams.SeamBroken, match=r"explain.explain needs torch 9.1 or newer"):
            seams.require("explain.explain", "automatic_dynamic", "cache_regions")
        seams.require("the minifier", *seams.MINIFIER_SEAMS)  # (no SeamBroken)
    finally:
        seams.check.cache_clear()


def test_a_torch_outside_the_tested_releases_gets_one_line_once(monkeypatch, capsys):
    monkeypatch.setattr(seams, "TESTED_TORCH", ((2, 99),))
    seams._say_untested_once.cache_clear()
    try:
        seams.require("the minifier", "ops")
        seams.require("replay run", "ops")
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not among the releases pt2kit is tested with (2.99)" in err
        assert "minify doctor" in err
    finally:
        seams._say_untested_once.cache_clear()
        seams.check.cache_clear()


def test_outside_the_tested_releases_the_minifier_needs_only_its_own_seams(monkeypatch, capsys):
    """A torch that breaks explain's and replay's seams (cache regions, ``_compile``'s arguments, the
    bisector's debug info: what torch 2.12 changed) and none of the minifier's: ``minify run`` must
    not refuse to run there."""
    monkeypatch.setattr(seams, "TESTED_TORCH", ((2, 99),))
    seams._say_untested_once.cache_clear()
    broken = seams.SeamStatus("cache_regions", None, False, "AttributeError: no isolated regions")
    real_check = seams.check
    monkeypatch.setattr(seams, "check", lambda name: broken if name in ("cache_regions", "compiler_bisector") else real_check(name))
    try:
        seams.require("the minifier", *seams.MINIFIER_SEAMS)  # (no SeamBroken)
        with pytest.raises(seams.SeamBroken, match="cache_regions"):
            seams.require("explain", "cache_regions")
        assert set(seams.MINIFIER_SEAMS) <= set(seams.names())
        assert not {"cache_regions", "cache_size", "convert_frame", "mark_dynamic", "compiler_bisector"} & set(seams.MINIFIER_SEAMS)
    finally:
        seams._say_untested_once.cache_clear()
        real_check.cache_clear()
    capsys.readouterr()


def test_an_inner_compiles_keywords_name_its_graph_and_the_flags_a_repro_passes_again():
    from pt2kit.seams.compile_fx import graph_kind

    assert graph_kind({"is_backward": True, "cudagraphs": None}) == ("backward", {"is_backward": True})
    assert graph_kind({"is_inference": True, "is_backward": False}) == ("inference", {"is_inference": True})
    assert graph_kind({"is_backward": False, "graph_id": 3}) == ("forward", {})


def test_config_writes_staying_in_their_context_is_probed_and_the_probe_leaves_config_as_it_was(monkeypatch):
    """Reading a repro and an in-process query rely on torch keeping config in ContextVars; a torch that stored
    it globally would fail the probe (simulated: a "copy" that is the caller's own context), and either way the
    probe's write is undone."""
    import contextvars

    import torch._dynamo.config as dynamo_config

    from pt2kit.seams import config

    before = dynamo_config.assume_static_by_default
    # torch 2.12 on keeps config in ContextVars; 2.11 does not (run_isolated puts values back there)
    assert config.writes_stay_in_their_context() is (seams.torch_version() >= (2, 12))

    class TheCallersContext:
        def run(self, fn, *args):
            return fn(*args)

    monkeypatch.setattr(contextvars, "copy_context", TheCallersContext)
    config.writes_stay_in_their_context.cache_clear()  # (asked once per process)
    assert not config.writes_stay_in_their_context()
    # such a torch (2.11) gets the values put back by hand: a write inside run_isolated stays inside
    before_threshold = dynamo_config.recompile_limit
    config.run_isolated(setattr, dynamo_config, "recompile_limit", before_threshold + 1)
    assert dynamo_config.recompile_limit == before_threshold
    monkeypatch.undo()
    config.writes_stay_in_their_context.cache_clear()
    assert dynamo_config.assume_static_by_default is before
    assert "assume_static_by_default" not in config.changed_values("torch._dynamo.config")


def test_a_higher_order_ops_own_wrapper_is_torchs_compile_and_what_a_program_compiles_is_the_programs():
    import os

    import torch
    from torch._dynamo import external_utils

    from pt2kit.seams import hop_eager

    def _some_hop_wrapper(*args):  # as flex_attention defines its _flex_attention_hop_wrapper, then compiles it
        return args

    inside_torch = os.path.join(os.path.dirname(torch.__file__), "nn", "attention", "flex_attention.py")
    assert hop_eager.is_torch_own_compile(_some_hop_wrapper.__code__.replace(co_filename=inside_torch))
    assert not hop_eager.is_torch_own_compile(_some_hop_wrapper.__code__)  # the program's own function
    # what torch.compile(module) and torch.compile(jacfwd(f)) compile: torch's nested functions, the program's code
    assert not hop_eager.is_torch_own_compile(external_utils.wrap_inline(lambda: None).__code__)
    assert not hop_eager.is_torch_own_compile(torch.func.jacfwd(torch.sin).__code__)
    assert not hop_eager.is_torch_own_compile(torch.nn.Linear.forward.__code__)


def test_under_the_backend_hook_a_second_torch_compile_of_a_function_reuses_its_code_as_without_it():
    """Dynamo knows a backend by its innermost object: pt2kit's wrapper must not make it compile again.

    A recompile the program would not do hides a bug of dynamo's reuse (a guard it lacks),
    and costs a compile: first, do no harm.
    """
    import torch
    from torch._dynamo.utils import counters

    from pt2kit.seams.after_dynamo import dynamo_backends

    def twice(t):
        return t.cos() * 2

    def compiles(armed: bool) -> int:
        torch._dynamo.reset()
        counters.clear()
        wrapped: list[str] = []

        def wrap(fn, name):
            def recording(gm, example_inputs, **kwargs):
                wrapped.append(name)
                return fn(gm, example_inputs, **kwargs)

            return recording

        with dynamo_backends(wrap) if armed else contextlib.nullcontext():
            for _ in range(2):
                torch.compile(twice, backend="eager")(torch.randn(3))
        assert wrapped == (["eager"] if armed else [])
        return counters["stats"]["unique_graphs"]

    assert compiles(armed=False) == compiles(armed=True) == 1


def test_a_failure_compiling_compiled_autograds_backward_graph_is_told_from_one_in_the_programs_own_graph():
    import torch

    from pt2kit.seams import compiled_autograd

    compiled_autograd.mark_failures()
    compiled = []

    def fails_after_the_forward(gm, example_inputs):
        compiled.append(gm)
        if len(compiled) > 1:  # the forward compiles first; then compiled autograd's backward graph
            raise ValueError("planted: the backend refuses the backward graph")
        return gm.forward

    def step(x):
        (x.sin() * 2).sum().backward()

    torch._dynamo.reset()
    with torch._dynamo.config.patch(compiled_autograd=True):
        with pytest.raises(Exception) as through_compiled_autograd:
            torch.compile(step, backend=fails_after_the_forward)(torch.randn(4, requires_grad=True))
    torch._dynamo.reset()
    assert len(compiled) == 2
    assert compiled_autograd.raised_in_compiled_autograd(through_compiled_autograd.value)
    with pytest.raises(Exception) as in_the_program:
        torch.compile(lambda x: x.sin(), backend=fails_after_the_forward)(torch.randn(4))
    torch._dynamo.reset()
    assert not compiled_autograd.raised_in_compiled_autograd(in_the_program.value)
