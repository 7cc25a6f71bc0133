"""Every door a user comes in by, with the failure on the far side.

Three axes (what a user tried, and what the suite never had):

- **entry point**: ``minify run``, ``bisect`` and ``repro``; the ``TORCHDYNAMO_REPRO_*`` hook at levels 1-4,
  after dynamo and after aot; the API's ``save_repro``, ``bisect`` and ``minify`` on a function, a module and an
  already compiled module;
- **where it fails**: the forward's compile, the backward's lazy compile (at the first ``loss.backward()``),
  the forward or the backward as they run, a wrong answer in the forward or in the backward, an inference graph;
- **backend shape**: a registered name, an ``aot_autograd(fw_compiler=..., bw_compiler=...)`` object of the
  program's own, and a plain function that calls one.

The cross product is decided in this process (the hook's :class:`ReproOnFailure` as the backend of a real
``torch.compile``, with its minification step recorded rather than started); a representative cut runs end to
end as a user runs it: a script, the variables set, each repro run with torch alone in another directory on an
empty Inductor cache. The longest of those (a minute of processes each) are in the slow group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

from support.paths import USER_MODULES
from support.programs import MODEL_FUNCTION, minified

sys.path.insert(0, str(USER_MODULES))
import planted  # noqa: F401  registers the planted backends

from minifier.on_failure import Intent, ReproOnFailure
from minifier.repro.files import load_repro
from minifier.stages.run import run_case
from support.running import torch_alone, user_env


# --------------------------------------------------------------------------- #
# Where it fails, and the backend shapes
# --------------------------------------------------------------------------- #

#: Where a program fails -> (the planted backend, the message it fails with, the graph it fails in,
#: whether the program runs backward, level 4 needed to see it).
WHERE = {
    "forward compile": ("planted_compile_error", "planted: cannot compile aten.cos", "forward", True, False),
    "lazy backward compile": (
        "planted_backward_error", "planted: cannot compile aten.tanh_backward", "backward", True, False,
    ),
    "forward runtime": ("planted_runtime_error", "planted: aten.cos kernel failed at run time", "forward", True, False),
    "backward runtime": (
        "planted_backward_runtime_error", "planted: aten.tanh_backward kernel failed at run time", "backward", True,
        False,
    ),
    "inference compile": ("planted_inference_error", "planted: cannot compile aten.cos", "inference", False, False),
    "forward accuracy": ("planted_accuracy", "diverges from the fp64 reference", "forward", True, True),
    "backward accuracy": ("planted_backward_accuracy", "diverges from the fp64 reference", "backward", True, True),
}  # fmt: skip


def registered(name: str):
    """The planted backend by its registered name (what ``torch.compile(backend="name")`` resolves)."""
    return torch._dynamo.lookup_backend(name)


def own_aot_autograd(name: str):
    """The same compilers in an ``aot_autograd`` object of the program's own (registered nowhere)."""
    return aot_autograd(**{k: v for k, v in registered(name).kwargs.items() if k.endswith("_compiler")})


def plain_function(name: str):
    """A plain ``(gm, example_inputs)`` backend that hands the graph to AOTAutograd itself."""
    inner = own_aot_autograd(name)

    def my_backend(gm, example_inputs):
        return inner(gm, example_inputs)

    return my_backend


SHAPES = {"registered": registered, "own aot_autograd": own_aot_autograd, "plain function": plain_function}


class Recorded(ReproOnFailure):
    """The hook's guard, its minification step recorded instead of started (a fresh process, tested end to end below)."""

    def __init__(self, intent: Intent) -> None:
        super().__init__(intent)
        self.minified: list[tuple[Path, bool]] = []

    def minify(self, path, accuracy):
        self.minified.append((path, accuracy))
        return 0


def the_model():
    namespace: dict = {"torch": torch}
    exec(MODEL_FUNCTION, namespace)
    return namespace["f"]


def run_program(backend, name, guard, *, train):
    """The model program as a user writes it, compiled through ``guard`` (the hook at the backend's seat)."""
    torch.manual_seed(0)
    x, w = torch.randn(8, 16), torch.randn(16, 16, requires_grad=train)
    compiled = torch.compile(the_model(), backend=lambda gm, ex: guard.compile(backend, name, gm, ex))
    out = compiled(x, w)
    if train:
        out.sum().backward()
    return out


#: The level each backend shape's errors are asked at (a wrong answer needs 4): every level is walked through,
#: without multiplying the matrix by four.
LEVEL_OF_SHAPE = {"registered": 2, "own aot_autograd": 1, "plain function": 3}


#: ``after`` changes only what the saved graph is minified to, not what is caught: both are walked with a
#: registered backend, the other shapes after aot.
AFTER_AND_SHAPE = [("dynamo", "registered"), *(("aot", shape) for shape in SHAPES)]


@pytest.mark.parametrize(("after", "shape"), AFTER_AND_SHAPE)
@pytest.mark.parametrize("where", WHERE)
def test_the_hook_sees_the_failure_wherever_it_happens(after, where, shape, tmp_path):
    planted_name, message, _, train, accuracy = WHERE[where]
    level = 4 if accuracy else LEVEL_OF_SHAPE[shape]
    torch._dynamo.reset()
    backend = SHAPES[shape](planted_name)
    guard = Recorded(Intent(after, level, tmp_path / "repros"))
    with pytest.raises(Exception) as raised:  # the program still fails, with its own error
        run_program(backend, planted_name if shape == "registered" else None, guard, train=train)
    assert message in str(raised.value)
    if accuracy:
        assert type(raised.value).__name__ == "AccuracyError"
    else:
        assert "pt2kit" not in str(raised.value)  # the user's exception, unchanged
    runs = sorted((tmp_path / "repros").glob("run-*"))
    failed = [r for r in runs if not (r / "repro.py").is_file() or "saved before compiling" not in (r / "repro.py").read_text()]
    # one failure, one run directory (level 3 also saves each graph before compiling it)
    assert len(failed) == 1 and len(runs) == (2 if level == 3 else 1)
    (saved_path,) = failed[0].glob("captured/g*/repro.py")  # (g<N>: the hook numbers the graphs of the process)
    saved = load_repro(saved_path).case
    assert saved.boundary == "dynamo" and saved.backward == train  # its repro runs the backward too
    assert [accuracy for _, accuracy in guard.minified] == ([accuracy] if level in (2, 4) else [])
    if level in (1, 3):
        assert "not minified" in (failed[0] / "repro.py").read_text()  # dumped as captured


@pytest.mark.parametrize("where", WHERE)
def test_the_graph_the_hook_saved_fails_alone_the_same_way(where, tmp_path):
    """Saved with a registered backend, the graph fails through that stage in a fresh run, as in the program."""
    planted_name, message, _, train, accuracy = WHERE[where]
    torch._dynamo.reset()
    guard = Recorded(Intent("aot", 4 if accuracy else 1, tmp_path / "repros"))
    with pytest.raises(Exception):
        run_program(registered(planted_name), planted_name, guard, train=train)
    (saved,) = (tmp_path / "repros").glob("run-*/captured/g*/repro.py")
    torch._dynamo.reset()
    outcome = run_case(load_repro(saved).case, planted_name, accuracy=accuracy)
    assert outcome.failure is not None and message in str(outcome.failure.signature)


def test_a_healthy_training_step_is_untouched_at_every_level(tmp_path):
    """First, do no harm, where the hook now watches the backward: the same loss and gradients, nothing saved."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    x, w = torch.randn(8, 16), torch.randn(16, 16, requires_grad=True)
    expected = torch.compile(the_model(), backend="aot_eager")(x, w)
    expected.sum().backward()
    grad = w.grad.clone()
    for level in (1, 2, 4):
        torch._dynamo.reset()
        w.grad = None
        guard = Recorded(Intent("aot", level, tmp_path / f"repros-{level}"))
        out = torch.compile(the_model(), backend=lambda gm, ex: guard.compile(registered("aot_eager"), "aot_eager", gm, ex))(x, w)
        out.sum().backward()
        assert torch.equal(out, expected) and torch.equal(w.grad, grad)
        assert not (tmp_path / f"repros-{level}").exists() and not guard.minified


@pytest.mark.parametrize("after", ["dynamo", "aot"])
def test_the_hook_at_level_4_steps_a_compiled_optimizer_once(after, tmp_path):
    """Hunt 14: dynamo's graph of ``optimizer.step`` reads each parameter as an attribute and writes it in place;
    the level-4 reference ran that graph itself, in the program, and stepped the parameters twice a call."""
    torch._dynamo.reset()
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([p], lr=1.0, foreach=False)
    guard = Recorded(Intent(after, 4, tmp_path / "repros"))
    step = torch.compile(opt.step, backend=lambda gm, ex: guard.compile(registered("aot_eager"), "aot_eager", gm, ex))
    for _ in range(3):
        p.grad = torch.ones(3)
        step()
    assert p.tolist() == [-3.0, -3.0, -3.0]
    assert not (tmp_path / "repros").exists() and not guard.minified


def test_the_hook_at_level_4_sees_a_wrong_gradient_that_its_aot_graph_agrees_with(tmp_path):
    """pytorch#179804, a genuine torch bug: under an outer bf16 autocast, the compiled region's
    ``autocast(enabled=False)`` is lost in the backward AOTAutograd traces, so the weight's
    gradient is computed in bf16. The forward is right, and the backward aot graph run eagerly
    agrees with itself: only the dynamo graph's gradients, against eager's with the backward
    outside autocast (as the program calls it), show it."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    w = torch.nn.Linear(64, 64)
    h = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)

    def inner(x):
        with torch.autocast("cpu", enabled=False):
            return x.float() @ w.weight.float().T

    guard = Recorded(Intent("dynamo", 4, tmp_path / "repros"))
    compiled = torch.compile(inner, backend=lambda gm, ex: guard.compile(registered("aot_eager"), "aot_eager", gm, ex))
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(Exception) as raised:
        compiled(h)
    assert type(raised.value).__name__ == "AccuracyError" and "its backward: gradient of input" in str(raised.value)
    assert [accuracy for _, accuracy in guard.minified] == [True]
    (saved,) = (tmp_path / "repros").glob("run-*/captured/g*/repro.py")
    assert load_repro(saved).case.context.autocast  # the outer autocast rides with the graph


def test_the_hook_at_level_4_names_the_input_a_graph_writes_wrong(tmp_path):
    """pytorch#198102, a genuine torch bug: ``add_`` through a gapped ``unfold`` view of the input is
    lost under aot_eager. Here the dynamo graph returns nothing, so the wrong value is the input it
    writes into, named as the CLI and the repro name it."""
    torch._dynamo.reset()

    def fn(x):
        v = x.unfold(1, 1, 5)
        v.add_(v)

    guard = Recorded(Intent("dynamo", 4, tmp_path / "repros"))
    compiled = torch.compile(fn, backend=lambda gm, ex: guard.compile(registered("aot_eager"), "aot_eager", gm, ex))
    with pytest.raises(Exception) as raised:
        compiled(torch.arange(1, 25).reshape(4, 6))
    assert type(raised.value).__name__ == "AccuracyError", raised.value
    assert "input l_x_ (written in place): 16 of 24 values differ" in str(raised.value).lower(), raised.value
    # the graph as saved says it fails, and judges its outputs as its header says (it said "did not fail" before)
    (saved,) = (tmp_path / "repros").glob("run-*/captured/g*/repro.py")
    loaded = load_repro(saved)
    assert loaded.failure is not None and loaded.failure.kind == "accuracy" and loaded.accuracy, loaded
    alone = torch_alone(saved, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "16 of 24 values differ" in alone.stdout + alone.stderr, alone.stdout[-1500:]


# --------------------------------------------------------------------------- #
# The hook, end to end, as a user runs it
# --------------------------------------------------------------------------- #

TRAINING_LOOP = """
import torch
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func

def fw(gm, example_inputs):
    return make_boxed_func(gm.forward)

def bw(gm, example_inputs):
    if any(n.target == torch.ops.aten.tanh_backward.default for n in gm.graph.nodes):
        raise RuntimeError("my bw compiler cannot lower tanh_backward")
    return make_boxed_func(gm.forward)

backend = aot_autograd(fw_compiler=fw, bw_compiler=bw)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(model, backend=backend)
for i in range(3):
    loss = step(torch.randn(4, 8)).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
"""





@pytest.mark.e2e
@pytest.mark.parametrize("level", [pytest.param("1", marks=pytest.mark.slow), "2"])
def test_the_hook_catches_a_backward_that_its_own_aot_autograd_backend_cannot_compile(level, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINING_LOOP)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "aot", level, repros)
    assert done.returncode == 1 and "my bw compiler cannot lower tanh_backward" in done.stderr  # as without pt2kit
    assert "pt2kit: graph g0 failed in its backward graph" in done.stderr
    (run_dir,) = repros.glob("run-*")
    assert not (tmp_path / "torch_compile_debug").exists()  # torch's own minifier stayed out
    if level == "1":
        header = (run_dir / "repro.py").read_text().split("\nimport", 1)[0]
        assert "not minified" in header and "my bw compiler cannot lower tanh_backward" in header
    else:
        report = json.loads((run_dir / "report.json").read_text())
        assert report["status"] == "minified" and report["graph"]["kind"] == "backward"
        assert report["ops_after"] == ["aten.tanh_backward.default"]
        assert report["failure"]["stage"] == "aot_autograd(fw_compiler=fw, bw_compiler=bw)"  # not "AotAutograd"
        assert done.stdout == "" and "Minified" in done.stderr  # (the program's stdout is its own)
    alone = torch_alone(run_dir / "repro.py", tmp_path / "elsewhere")
    assert alone.returncode != 0 and "my bw compiler cannot lower tanh_backward" in alone.stderr


SEVERAL_BACKWARD_CALLS = """
import torch

x = torch.randn(3, 4, requires_grad=True)
first, second, third = torch.compile(lambda x: x.unbind(0), backend="aot_eager")(x)
first.sum().backward()
second.sum().backward()
"""


@pytest.mark.e2e
@pytest.mark.parametrize("between", ["written", "several calls"])
def test_the_hook_saves_what_the_program_did_between_the_forward_and_a_failing_backward(between, tmp_path):
    """A backward that fails at autograd's version check, before its graph runs, or at a second backward call
    through a graph the first freed: the repro the hook saves does the same between its forward and its backward,
    as the program did, and fails alone."""
    from support.programs import WRITTEN_BETWEEN

    program, error, says, op = {
        "written": (WRITTEN_BETWEEN, "modified by an inplace operation", "between the forward and the backward",
                    "torch.ops.higher_order.register_hook"),
        "several calls": (SEVERAL_BACKWARD_CALLS, "backward through the graph a second time", "the program's backward was 2 calls",
                          "Tensor.unbind"),
    }[between]  # fmt: skip
    script = tmp_path / "program.py"
    script.write_text(program)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "dynamo", "2", repros)
    assert done.returncode == 1 and error in done.stderr.splitlines()[-1]  # the program's own
    (run_dir,) = repros.glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "minified" and op in report["ops_after"], report
    assert says in (run_dir / "repro.py").read_text()
    alone = torch_alone(run_dir / "repro.py", tmp_path / "elsewhere")
    assert alone.returncode != 0 and error in alone.stderr


@pytest.mark.e2e
@pytest.mark.slow  # (a minute of processes: make slow; the cases beside it in make test)
def test_the_hook_at_level_4_minifies_a_wrong_gradient(model_script, tmp_path):
    script = model_script("planted_backward_accuracy", train=True)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "aot", "4", repros)
    assert done.returncode != 0 and "AccuracyError" in done.stderr and "its backward graph" in done.stderr
    (run_dir,) = repros.glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["failure"]["kind"] == "accuracy" and report["graph"]["kind"] == "backward"
    assert "aten.tanh_backward.default" in report["ops_after"]


@pytest.mark.e2e
@pytest.mark.slow  # (real Inductor, cold kernels)
def test_minify_repro_of_a_saved_graph_finds_the_wrong_mask_its_aot_forward_saves_for_the_backward(tmp_path):
    """pytorch#185517, a genuine torch bug: the aot forward's outputs include the bool mask it saves
    for the backward, wrong under Inductor. The dynamo graph the hook saves (level 3: every graph)
    is right by the fp64 rule (its gradient, made 0, is fp64's too), so ``minify repro --accuracy``
    judges that graph's aot graphs alone as well, and minifies the forward."""
    name = "inductor_bf16_scalar_unrounded_flips_saved_mask.py"
    script = tmp_path / name
    script.write_text((Path(__file__).parent / "real_bugs" / name).read_text())
    repros = tmp_path / "repros"
    env = user_env(TORCHDYNAMO_REPRO_AFTER="dynamo", TORCHDYNAMO_REPRO_LEVEL="3", TORCHDYNAMO_REPRO_DIR=str(repros))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode != 0 and "AssertionError: compiled gradient" in done.stderr  # the program's own
    (saved,) = repros.glob("run-*/captured/g0/repro.py")
    command = [sys.executable, "-m", "minifier", "repro", str(saved), "--accuracy", "--json", "--out", str(tmp_path / "runs")]
    ran = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=user_env(), timeout=900)
    report = json.loads(ran.stdout)
    assert ran.returncode == 0 and report["status"] == "minified", (report, ran.stderr[-2000:])
    assert report["graph"]["kind"] == "forward" and sorted(report["ops_after"]) == ["aten.add.Scalar", "aten.ge.Scalar"]
    alone = torch_alone(Path(report["repro"]), tmp_path / "elsewhere")
    assert alone.returncode != 0 and "AccuracyError" in alone.stderr, alone.stderr[-2000:]


def test_the_hook_at_level_4_leaves_a_compiler_aotautograd_caches_with_as_it_is(tmp_path):
    """A wrapper in place of Inductor's forward compiler turns AOTAutograd's cache off, and a program whose
    failure needs a cache hit (pytorch#185382, an Adam step across recompiles) passed under the hook.
    A user's plain compiler, which AOTAutograd never caches with, is still wrapped and its graphs judged."""
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    guard = ReproOnFailure(Intent("aot", 4, tmp_path / "repros"))
    cached = SerializableAOTDispatchCompiler(object, lambda gm, example_inputs: gm)
    plain = lambda gm, example_inputs: gm
    assert guard.watch_aot_compiler(None, "forward", cached) is cached
    assert guard.watch_aot_compiler(None, "inference", cached) is cached
    assert guard.watch_aot_compiler(None, "forward", plain) is not plain


# --------------------------------------------------------------------------- #
# minify run and bisect, with the failure in the backward
# --------------------------------------------------------------------------- #


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("backend", "accuracy", "kind"),
    [("planted_backward_runtime_error", False, "runtime_error"), ("planted_backward_accuracy", True, "accuracy")],
)
def test_minify_run_pins_a_backward_that_fails_as_it_runs(backend, accuracy, kind, model_script, in_process):
    report = minified(in_process, model_script(backend, train=True), accuracy=accuracy)
    assert report["status"] == "minified" and report["failure"]["kind"] == kind
    assert report["graph"]["kind"] == "backward"
    assert "aten.tanh_backward.default" in report["ops_after"]


# --------------------------------------------------------------------------- #
# The API on what users hand it
# --------------------------------------------------------------------------- #


@pytest.mark.e2e
@pytest.mark.parametrize(("needs_caches", "verdict"), [(True, "the bug is in a compile cache"), (False, "so not on a cache")])
def test_a_program_that_fails_only_when_run_plainly_is_said_so_not_called_healthy(needs_caches, verdict, in_process, tmp_path):
    """A failure that depends on state pt2kit's capture changes (fresh genuine bugs: an Inductor cache hit
    across recompiles served a stale constant, pytorch#185382's Adam step; under capture the program passed)
    gets exit 5 naming it, not "every graph passes", and one more plain run without compile caches says
    whether a cache is the matter. Planted here as a program that fails only when pt2kit is not loaded."""
    from pt2kit.errors import NotReproducible
    from minifier.minification import minify_script

    script = tmp_path / "only_plainly.py"
    cached = " and os.environ.get('TORCHINDUCTOR_FORCE_DISABLE_CACHES') != '1'" if needs_caches else ""
    script.write_text(
        "import os, sys\nimport torch\n"
        "out = torch.compile(lambda x: x + 1, backend='eager')(torch.ones(3))\n"
        f"if sys.modules.get('minifier') is None{cached}:  # (pt2kit's plain run blocks it; its capture has it loaded)\n"
        "    raise AssertionError('the third call saw a stale constant')\n"
    )
    session, _ = in_process
    for accuracy in (False, True):
        with pytest.raises(NotReproducible) as raised:
            minify_script(session, script, [], out=tmp_path / "runs", accuracy=accuracy)
        assert "fails when run plainly (AssertionError: the third call saw a stale constant)" in str(raised.value)
        assert "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1" in str(raised.value) and verdict in str(raised.value)
        if accuracy:  # its graphs were judged: report.json keeps each one's stages
            found = raised.value.report
            assert [g["label"] for g in found["graphs"]] == ["g0"] and found["graphs"][0]["stages"]["eager"] == "pass", found


def test_the_api_keeps_the_backend_an_already_compiled_module_was_compiled_with(tmp_path):
    from minifier.api import save_repro

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    x = torch.randn(2, 4)
    for compiled, stage in [
        (torch.compile(model, backend="planted_compile_error"), "planted_compile_error"),
        (torch.compile(lambda t: model(t).cos(), backend="planted_runtime_error"), "planted_runtime_error"),
        (model, "inductor"),  # not compiled: Inductor, as torch.compile's default
        (torch.compile(model), "inductor"),
    ]:
        run_dir = save_repro(compiled, x, out=tmp_path / "saved")
        assert load_repro(run_dir / "g0" / "repro.py").stage == stage
    # backend= names another stage: a registered name, or the function itself
    run_dir = save_repro(torch.compile(model, backend="planted_compile_error"), x, backend="aot_eager", out=tmp_path / "o")
    assert load_repro(run_dir / "g0" / "repro.py").stage == "aot_eager"
    run_dir = save_repro(model, x, backend=registered("planted_runtime_error"), out=tmp_path / "f")
    assert load_repro(run_dir / "g0" / "repro.py").stage == "planted_runtime_error"


def test_the_api_keeps_the_fullgraph_a_module_was_compiled_with(tmp_path):
    # torch.compiler.set_stance(force_backend=...) compiles without it: the frame would break and run,
    # where the program's compile fails (pytorch#185185, whose lifted frame then compiles with it too)
    from minifier.api import save_repro

    class Branching(torch.nn.Module):
        def forward(self, t):
            return t.cos() if t.sum() > 0 else t.sin()  # data-dependent: a break, an error under fullgraph

    compiled = torch.compile(Branching(), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="Data-dependent branching") as program:
        compiled(torch.ones(3))
    # the program's own error (a break where it asked for none), as the program raised it: no graph is saved
    with pytest.raises(type(program.value), match="Data-dependent branching"):
        save_repro(compiled, torch.ones(3), out=tmp_path / "saved")
    assert not list((tmp_path / "saved").glob("*/g*/repro.py"))


def test_the_api_takes_the_backend_a_plain_step_calls_its_compiled_model_with(tmp_path):
    # a training step is a plain function over a compiled model: compiled whole, the model's backend would be lost
    from minifier.api import save_repro

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    compiled = torch.compile(model, backend="planted_compile_error")
    holder = torch.nn.Module()
    holder.net = compiled

    def step(t):  # the compiled model from the closure
        return compiled(t).sum()

    for fn, name in [(step, "closure"), (lambda t: holder.net(t).sum(), "child module")]:
        run_dir = save_repro(fn, torch.randn(2, 4), out=tmp_path / name.replace(" ", "-"))
        assert load_repro(run_dir / "g0" / "repro.py").stage == "planted_compile_error", name
    # two models compiled with two backends: none is the stage, Inductor as torch.compile's default
    other = torch.compile(torch.nn.Linear(4, 4), backend="planted_runtime_error")
    run_dir = save_repro(lambda t: compiled(other(t)).sum(), torch.randn(2, 4), out=tmp_path / "two")
    assert load_repro(run_dir / "g0" / "repro.py").stage == "inductor"



def test_the_api_names_a_model_compiled_inside_the_function_by_its_backend_and_options(tmp_path):
    # torch.compile(model, mode=..., options=...) inside the handed function: its graphs went to the API's
    # stance, and its config (the failure may need it: max-autotune) was lost from every repro
    from minifier.api import save_repro

    class Net(torch.nn.Module):  # (its own code: Sequential's is compiled up to dynamo's recompile limit by now)
        def forward(self, t):
            return t.tanh() * 2

    model = Net()

    def step(t):
        return torch.compile(model, options={"epilogue_fusion": False})(t).sum()

    run_dir = save_repro(step, torch.randn(2, 4), out=tmp_path / "options")
    saved = load_repro(run_dir / "g0" / "repro.py")
    assert saved.stage == "inductor" and saved.case.config.get("torch._inductor.config", {}).get("epilogue_fusion") is False, saved.case.config
    run_dir = save_repro(lambda t: torch.compile(model, backend="planted_runtime_error")(t), torch.randn(2, 4), out=tmp_path / "named")
    assert load_repro(run_dir / "g0" / "repro.py").stage == "planted_runtime_error"


def test_the_api_never_compiles_with_the_backend_a_model_whose_forward_breaks_the_graph_was_compiled_with(tmp_path):
    # dynamo cannot inline such a model into the step: it runs the model as it is, and its own torch.compile would
    # compile it with the backend under suspicion, raising the program's failure out of save_repro
    from minifier.api import save_repro

    class Printing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, t):
            print("a graph break")
            return self.linear(t).tanh()

    compiled = torch.compile(Printing(), backend="planted_compile_error")
    run_dir = save_repro(lambda t: compiled(t).sum(), torch.randn(2, 4), out=tmp_path / "saved")
    stages = [load_repro(p).stage for p in sorted(run_dir.glob("g*/repro.py"))]
    assert stages and set(stages) == {"planted_compile_error"}, stages
    assert any("tanh" in p.read_text() for p in run_dir.glob("g*/repro.py"))  # the model's own graph is saved


def test_the_api_saves_a_steps_compiled_function_as_the_program_compiles_it(tmp_path):
    # pytorch#185497's step: compiled whole, the step's graph took in its own code and lost dynamic=True
    from minifier.api import save_repro

    compiled = torch.compile(lambda t: t.sin() * 2, backend="aot_eager", dynamic=True)

    def step(t):
        return compiled(t + 1).sum()

    run_dir = save_repro(step, torch.randn(4), out=tmp_path / "saved")
    (repro,) = run_dir.glob("g*/repro.py")
    case = load_repro(repro).case
    assert [getattr(n.target, "__name__", n.target) for n in case.op_nodes] == ["sin", "mul"], case.gm.code  # its graph alone
    assert any(i.symbolic_dims for i in case.inputs) or case.dynamic  # compiled with its own dynamic=True

PATCHING_SCRIPT = """
import torch
import minifier
from torch._inductor.lowering import lowerings

aten = torch.ops.aten


def broken_tanh(*args, **kwargs):
    raise RuntimeError("planted: tanh lowering broken")


lowerings[aten.tanh.default] = broken_tanh
lowerings[aten.sin.default] = lambda *args, **kwargs: None
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()))
print(minifier.save_repro(model, torch.randn(2, 4), out="saved"))
"""


def test_the_api_carries_the_scripts_patch_of_torch_into_its_repros_and_names_what_it_cannot(tmp_path):
    script = tmp_path / "patching.py"
    script.write_text(PATCHING_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    repro = (run_dir / "g0" / "repro.py").read_text()
    assert "def broken_tanh" in repro and "lowerings[aten.tanh.default] = broken_tanh" in repro
    assert "aten.sin.default" in json.loads((run_dir / "state_missing.json").read_text())[0]  # a lambda: named


API_SCRIPT = """
import json
import torch
import minifier

def my_backend(gm, example_inputs):
    if any(n.target in (torch.relu, torch.nn.functional.relu) for n in gm.graph.nodes):
        raise RuntimeError("my_backend: no relu")
    return gm.forward

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
compiled = torch.compile(model, backend=my_backend)
try:
    report = minifier.minify(compiled, torch.randn(3, 4), out="out", timeout=120)
    print(json.dumps(report))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


@pytest.mark.e2e
@pytest.mark.slow  # (a minute of processes: make slow; the cases beside it in make test)
def test_minify_on_a_module_compiled_with_a_backend_of_the_script(tmp_path):
    script = tmp_path / "api_user.py"
    script.write_text(API_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=user_env(), timeout=900)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report.get("status") == "minified", report
    assert report["failure"]["stage"] == "my_backend" and report["ops_after"] == ["torch.nn.functional.relu"]
    assert "repro ready" in done.stderr  # (the run's progress, as it came, for a call of minutes)
    repro = Path(report["repro"])
    assert (repro.parent / "g0" / "repro.py").exists()  # one run directory: the graphs it saved, and the repro
    assert "import minifier" not in repro.read_text() and "minifier" not in repro.read_text().split("def apply_config")[0]
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "my_backend: no relu" in alone.stderr


def test_the_api_saves_a_frame_dynamo_fails_to_trace_as_its_graph(tmp_path):
    """pytorch#191137, a genuine torch bug: ``_weight_norm_interface`` with a 1-D ``g`` broadcasts it
    wrongly while dynamo traces, before any graph exists. The API lifts the frame as ``minify run`` does."""
    from minifier.api import save_repro

    def fn(v, g):
        return torch.ops.aten._weight_norm_interface(v, g, 0)[0] * 2

    torch._dynamo.reset()
    run_dir = save_repro(torch.compile(fn), torch.randn(16, 8, 3, 3), torch.ones(16), out=tmp_path)
    (first, *_) = [Path(p) for p in json.loads((run_dir / "graphs.json").read_text())]
    case = load_repro(first).case
    assert "aten._weight_norm_interface" in case.op_names() or "torch.ops.aten._weight_norm_interface" in case.op_names(), case.op_names()
    torch._dynamo.reset()
    outcome = run_case(case, "eager")
    assert outcome.failure is not None and "Attempting to broadcast a dimension of length 16" in outcome.failure.signature.message


VMAP_OF_HESSIAN = """
import json
import torch
from minifier.api import minify
from pt2kit.errors import UserFacingError


def f(x):
    return (x.sin() * x).sum()


x = torch.randn(4, 3)
try:
    torch.compile(torch.vmap(torch.func.hessian(f)), backend="eager")(x)
    print(json.dumps({"fixed": torch.__version__}))
    raise SystemExit(0)
except Exception:  # the bug
    pass
torch._dynamo.reset()
try:
    minify(torch.compile(torch.vmap(torch.func.hessian(f))), x, out="runs")
except UserFacingError as e:
    print(json.dumps({"message": str(e)}))
"""


@pytest.mark.e2e  # (torch's failure leaves its dispatch state unbalanced in the process: never in pytest's own)
def test_the_api_says_a_failure_of_dynamos_tracing_is_dynamos_not_eagers(tmp_path):
    """pytorch#183015, a genuine torch bug: ``vmap(hessian(f))`` compiled whole; dynamo's fake run of it
    raises while tracing. The lifted frame passes alone, and the API said the function "raised run eagerly"
    and suggested accuracy=True."""
    script = tmp_path / "vmap_hessian.py"
    script.write_text(VMAP_OF_HESSIAN)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=user_env(), timeout=600)
    said = json.loads(done.stdout.strip().splitlines()[-1])
    if "fixed" in said:
        pytest.skip(f"pytorch#183015 is fixed in torch {said['fixed']}")
    message = said["message"]  # (whether or not the frame, in the user's __main__, can be lifted)
    assert message.startswith("dynamo failed tracing the function (TorchRuntimeError") and "run eagerly" not in message, message


def test_the_api_asks_for_strict_accuracy_by_its_own_flag():
    from minifier.api import _flags, _judged

    assert _flags({"accuracy": "strict", "after": "auto", "out": None}) == ["--strict-accuracy", "--after", "auto"]
    assert _flags({"accuracy": True, "timeout": 30}) == ["--accuracy", "--timeout", "30"]
    assert "accuracy='strict'" in _judged(True, 2) and "accuracy=True" in _judged(False, 2) and "bit for bit" in _judged("strict", 2)
    assert "its results" in _judged(True, 1) and "their results" in _judged(True, 2)


def test_the_api_says_a_bad_timeout_in_its_own_words(tmp_path):
    import minifier
    from pt2kit.errors import UsageError

    with pytest.raises(UsageError, match="timeout must be a positive number"):
        minifier.minify(torch.nn.Identity(), torch.randn(2), out=tmp_path, timeout=0)


# --------------------------------------------------------------------------- #
# Bad input: one line, a documented exit code, nothing lost
# --------------------------------------------------------------------------- #

MINIFY = [sys.executable, "-m", "minifier"]


def under_the_hook(script: Path, after: str, level: str, repros: Path) -> subprocess.CompletedProcess[str]:
    """``python script`` from its directory, as a user runs it with TORCHDYNAMO_REPRO_AFTER, _LEVEL and _DIR (``repros``) set."""
    env = user_env(TORCHDYNAMO_REPRO_AFTER=after, TORCHDYNAMO_REPRO_LEVEL=level, TORCHDYNAMO_REPRO_DIR=str(repros))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=script.parent, env=env, timeout=600)


def minify(*args, cwd=None, env=None, timeout=600):
    return subprocess.run([*MINIFY, *map(str, args)], capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.mark.parametrize("timeout", ["0", "-5"])
def test_a_timeout_that_is_not_positive_is_a_usage_error(timeout, tmp_path):
    script = tmp_path / "program.py"
    script.write_text("import torch\n")
    done = minify("run", "--timeout", timeout, script)
    assert done.returncode == 2 and "--timeout" in done.stderr and "Traceback" not in done.stderr


def test_an_unwritable_out_is_a_usage_error_not_a_pt2kit_bug(tmp_path):
    script = tmp_path / "program.py"
    script.write_text("import torch\n")
    (tmp_path / "a-file").write_text("")
    done = minify("run", "--json", "--out", tmp_path / "a-file" / "runs", script)
    assert done.returncode == 2 and "cannot write run directories to" in done.stderr
    assert json.loads(done.stdout)["exit_code"] == 2 and "pt2kit bug" not in done.stderr


def test_a_script_that_does_not_parse_is_said_at_once(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import torch\ndef f(x:\n    return x\n")
    started = time.monotonic()
    done = minify("run", "--out", tmp_path / "runs", script)
    assert done.returncode == 3 and "SyntaxError" in done.stderr and "line 2" in done.stderr
    assert time.monotonic() - started < 10  # before torch is imported: no program runs
    assert not (tmp_path / "runs").exists()


def test_minify_repro_names_a_missing_repro_as_such(tmp_path):
    done = minify("repro", tmp_path / "missing.py")
    assert done.returncode == 2 and f"repro not found: {tmp_path / 'missing.py'}" in done.stderr


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"status": "minified", "failure": 3}'])
def test_drawing_the_page_of_a_corrupt_report_is_one_line(content, tmp_path):
    (tmp_path / "report.json").write_text(content)
    done = subprocess.run([sys.executable, "-m", "minifier.pages.minify_page", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 6 and "cannot draw" in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- #
# Ctrl-C below the stage; a timeout on a loaded machine
# --------------------------------------------------------------------------- #


@pytest.mark.e2e
@pytest.mark.slow  # (a minute of processes: make slow; the cases beside it in make test)
def test_ctrl_c_below_the_stage_resumes_without_reducing_again(model_script, tmp_path):
    script = model_script("planted_compile_error")
    out = tmp_path / "runs"
    env = {**os.environ, "PT2KIT_SUBSYSTEM": "1"}
    restore_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    process = subprocess.Popen([*MINIFY, "run", "--out", str(out), str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=restore_sigint)
    deadline = time.monotonic() + 300
    while True:  # the repro is written, and its report says the run has gone below the stage
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before going below the stage"
        reports = list(out.glob("run-*/report.json"))
        try:
            if reports and json.loads(reports[0].read_text()).get("pending") == ["below the stage"]:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    assert process.returncode == 130
    (first,) = out.glob("run-*")
    assert (first / "repro.py").is_file()
    assert json.loads((first / "report.json").read_text())["pending"] == ["below the stage"]  # (as the stop left it)

    done = minify("run", "--json", "--out", out, script, env={"PT2KIT_SUBSYSTEM": "1"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["resumed_from"] == str(first) and report["ops_after"] == ["aten.cos.default"]
    assert report["reduction_queries"] == 0  # every answer of the reduction came from the checkpoint
    assert "subsystem" in report or "workaround" in report  # and below the stage ran this time
    assert "pending" not in report and "pending" not in json.loads((out / Path(report["run_dir"]).name / "report.json").read_text())
    assert json.loads((first / "checkpoint.json").read_text())["status"] == "done"
    again = minify("run", "--json", "--out", out, script, env={"PT2KIT_SUBSYSTEM": "0"})
    assert json.loads(again.stdout).get("resumed_from") is None  # a finished run is not resumed again


@pytest.mark.e2e
@pytest.mark.slow  # (a minute of processes: make slow; the cases beside it in make test)
def test_a_program_that_times_out_once_then_fails_is_not_flaky(model_script, tmp_path):
    script = model_script("planted_slow_first")
    env = {"PLANTED_SLOW_FIRST_COUNTER": str(tmp_path / "counter"), "PLANTED_SLOW_FIRST_SECONDS": "60"}
    done = minify("run", "--json", "--timeout", "8", "--out", tmp_path / "runs", script, env=env)
    report = json.loads(done.stdout)
    assert done.returncode == 0, report
    assert report["failure"]["kind"] == "compile_error" and report["ops_after"] == ["aten.cos.default"]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.gpu_check  # (two minutes of minify runs: make gpu-check-dry, before a GPU machine's run; not make slow)
def test_make_gpu_check_passes_in_its_dry_run_on_the_cpu(tmp_path):
    """make gpu-check's script, as a GPU machine runs it, on the CPU: every step ok, each repro failing alone."""
    record = tmp_path / "gpu-check.json"
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "gpu_check.py"), "--dry-run", "--json", str(record)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    steps = {s["name"]: s for s in json.loads(record.read_text())["steps"]}
    assert set(steps) == {"doctor", "kernel_compile_error", "training_step_backward", "wrong_answer"}
    assert all(s["ok"] for s in steps.values()) and "repro fails alone" in steps["training_step_backward"]["detail"]
    assert "accuracy at inductor" in steps["wrong_answer"]["detail"]


def test_an_assertion_a_compile_raised_is_torchs_invariant_not_a_wrong_answer():
    from minifier.bisect.plainly import looks_like_wrong_answer
    from pt2kit.signature import Failure, Signature

    partitioner = Signature("compile_error", "AssertionError", "Node add was invalid, but is output")
    assert not looks_like_wrong_answer(Failure(partitioner))
    users = Signature("runtime_error", "AssertionError", "compiled dst differs from eager")
    assert looks_like_wrong_answer(Failure(users))
    assert looks_like_wrong_answer(Failure(Signature("runtime_error", "ValueError", "Tensor-likes are not close!")))
    assert not looks_like_wrong_answer(Failure(Signature("crash", "SIGSEGV", "process killed by SIGSEGV")))


SAVED_OUTPUT_WRITTEN_BY_BACKWARD = '''import torch


class Offsets(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, offsets):
        ctx.save_for_backward(offsets)
        return x * 2

    @staticmethod
    def backward(ctx, grad_out):
        (offsets,) = ctx.saved_tensors
        offsets.add_(grad_out)
        return grad_out.clone(), None


def fn(x):
    offsets = x.clone()
    return Offsets.apply(x, offsets).clone(), offsets


out, offsets = torch.compile(fn, backend="aot_eager", fullgraph=True)(torch.randn(8, requires_grad=True))
out.sum().backward()
'''



SAVED_INPUT_WRITTEN_BY_THE_COMPILED_FORWARD = """import torch
from torch._dynamo.backends.common import aot_autograd

aot_eager = aot_autograd(fw_compiler=lambda gm, example_inputs: gm)


def writes_its_input(gm, example_inputs):
    compiled = aot_eager(gm, example_inputs)

    def run(*args):
        outputs = compiled(*args)
        args[0].add_(0)  # a write the graph never made, into an input its backward saved (pytorch#185497's kind)
        return outputs

    return run


x, w = torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
out = torch.compile(lambda t, v: ((t * v).sin() * 2).sum(), backend=writes_its_input)(x * 1.0, w)
out.backward()
"""


@pytest.mark.e2e
def test_the_hook_sees_a_backward_that_fails_before_its_graph_runs(tmp_path):
    # autograd checks the saved tensors' versions as AOTAutograd's backward unpacks them: before the
    # backward graph is compiled or run, where no wrapper of pt2kit's (or torch's) sees it
    script = tmp_path / "train.py"
    script.write_text(SAVED_INPUT_WRITTEN_BY_THE_COMPILED_FORWARD)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "aot", "1", repros)
    assert done.returncode == 1 and "modified by an inplace operation" in done.stderr  # the program's own error
    assert done.stderr.rstrip().splitlines()[-1].startswith("RuntimeError: one of the variables needed"), done.stderr[-800:]
    (run_dir,) = repros.glob("run-*")
    assert "graph g0 failed in its backward graph; repro in" in done.stderr
    alone = torch_alone(run_dir / "repro.py", tmp_path / "elsewhere")  # it carries the backend and runs the backward
    assert alone.returncode != 0 and "modified by an inplace operation" in alone.stderr, alone.stderr[-2000:]
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=user_env(), timeout=600)
    assert plain.stderr.splitlines()[-1] == done.stderr.rstrip().splitlines()[-1]  # the same error, hook or not

#: Where the kernel that kills the process is -> (its planted backend, the op it is in, the program's training step).
CRASHING = {
    "forward": ("planted_segfault", "cos", "crashing(torch.randn(8))"),
    "backward": ("planted_backward_segfault", "tanh", "crashing(torch.randn(8, requires_grad=True)).sum().backward()"),
}


@pytest.mark.e2e
@pytest.mark.parametrize(("after", "where"), [("dynamo", "forward"), ("aot", "forward"), ("aot", "backward")])
def test_the_hook_at_level_4_leaves_the_graph_whose_first_run_kills_the_process(after, where, tmp_path):
    # level 4 runs each compiled graph's first call (and its backward's) in the program's process to judge it: a
    # kernel that segfaults (or aborts on a heap it corrupted) ends the process before anything is saved after it
    backend, op, step = CRASHING[where]
    script = tmp_path / "crash.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(USER_MODULES)!r})\n"
        "import torch\n"
        "import planted  # noqa: F401\n"
        f"healthy = torch.compile(lambda x: torch.sin(x) * 2, backend={backend!r})\n"
        "print(healthy(torch.randn(8, requires_grad=True)).shape)  # (its kernels run)\n"
        f"crashing = torch.compile(lambda x: torch.{op}(x) + 1, backend={backend!r})\n"
        f"{step}\n"
    )
    repros = tmp_path / "repros"
    done = under_the_hook(script, after, "4", repros)
    assert done.returncode == -signal.SIGSEGV and "torch.Size([8])" in done.stdout, done.stderr[-2000:]
    (run_dir,) = repros.glob("run-*")  # the healthy graph's save went when its first call returned
    text = (run_dir / "repro.py").read_text()
    assert "before graph g1's first run" in text and f"torch.{op}" in text and "torch.sin" not in text
    alone = torch_alone(run_dir / "repro.py", tmp_path / "elsewhere")
    assert alone.returncode == -signal.SIGSEGV, alone.stderr[-2000:]


@pytest.mark.slow  # (real Inductor: freezing)
def test_the_hook_at_level_4_leaves_a_frozen_graph_to_the_dynamo_graphs_judge_without_an_internal_error(tmp_path):
    # (hunt 13) under freezing Inductor's compiled inference graph gets None for each weight it folded in; the
    # aot graph's judge ran it eagerly on those and said "pt2kit: internal error in _judge_run" to a healthy program
    script = tmp_path / "frozen.py"
    script.write_text(
        "import torch\n"
        "torch._inductor.config.freezing = True\n"
        "m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()\n"
        "x = torch.randn(4, 8)\n"
        "with torch.no_grad():\n"
        "    torch.testing.assert_close(torch.compile(m)(x), m(x))\n"
        "print('same')\n"
    )
    done = under_the_hook(script, "aot", "4", tmp_path / "repros")
    assert done.returncode == 0 and "same" in done.stdout, done.stderr[-2000:]
    assert "internal error" not in done.stderr, done.stderr[-2000:]


@pytest.mark.e2e
def test_the_hook_says_in_one_line_when_dynamo_fails_before_any_graph_exists(tmp_path):
    # no compiler is ever called, so nothing of the hook's (or torch's) sees it: one line after the traceback
    script = tmp_path / "tag.py"
    script.write_text(
        "import torch\n\n"
        "@torch.compile(backend='eager', dynamic=True)\n"
        "def f(x):\n"
        "    return x * len(f'{x.shape[0]:04d}')\n\n"
        "f(torch.randn(5))\n"
    )
    repros = tmp_path / "repros"
    done = under_the_hook(script, "dynamo", "2", repros)
    last = done.stderr.rstrip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("pt2kit: dynamo failed while tracing, before any graph existed"), done.stderr[-800:]
    assert f"`minify run {script}`" in last and not repros.exists()
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=user_env(), timeout=600)
    assert plain.returncode == 1 and "pt2kit" not in plain.stderr  # no intent, no line
    above = [line for line in done.stderr.splitlines()[:-1] if line.strip()]
    assert plain.stderr.rstrip().splitlines()[-1] == above[-1]  # the same error, just above


@pytest.mark.e2e
def test_the_hook_says_in_one_line_when_the_program_fails_where_no_graph_did(tmp_path):
    # a wrong answer the program checks itself: its compiled graphs ran and none failed, so nothing is saved
    script = tmp_path / "check.py"
    script.write_text(
        "import torch\n\n"
        "f = torch.compile(lambda x: x.sin() + 1, backend='eager')\n"
        "y = f(torch.randn(4))\n"
        "assert y.sum() > 1e9, 'the answer is wrong'\n"
    )
    for level, hint in (("2", "TORCHDYNAMO_REPRO_LEVEL=4 or `minify run --accuracy"), ("4", "equals eager's bit for bit (their aliasing too, where no input needs a gradient): the wrong answer arises outside what the hook watches")):
        repros = tmp_path / f"repros{level}"
        done = under_the_hook(script, "dynamo", level, repros)
        *_, error, last = done.stderr.rstrip().splitlines()
        assert done.returncode == 1 and error == "AssertionError: the answer is wrong", done.stderr[-800:]
        assert last.startswith("pt2kit: none of the 1 compiled graph(s) failed") and hint in last, last
        assert not repros.exists()


ROUNDS_OTHERWISE = """
import torch


def rounding(gm, example_inputs):
    # within any tolerance of eager, never equal to it: a compiler that rounds otherwise
    return lambda *args: [o + o.abs() * 1e-6 + 1e-7 for o in gm(*args)]


f = torch.compile(lambda x: x.sin() + 1, backend=rounding)
x = torch.randn(4)
assert torch.equal(f(x), x.sin() + 1), 'not bit for bit'
"""


@pytest.mark.e2e
def test_the_hooks_level_4_note_says_which_graph_rounds_otherwise_than_eager(tmp_path):
    # the program allows no rounding; the hook's rule does: its note names the graph whose last bits differ
    script = tmp_path / "bits.py"
    script.write_text(ROUNDS_OTHERWISE)
    done = under_the_hook(script, "dynamo", "4", tmp_path / "repros")
    *_, error, last = done.stderr.rstrip().splitlines()
    assert done.returncode == 1 and error == "AssertionError: not bit for bit", done.stderr[-800:]
    assert last.startswith("pt2kit: none of the 1 compiled graph(s) failed"), last
    assert "1 differ from eager's in the last bits (g0: " in last and f"`minify run --strict-accuracy {script}`" in last, last
    assert "equals eager's bit for bit" not in last


EAGER_COND_THEN_A_FAILING_COMPILE = """
import torch


def no_sin(gm, example_inputs):
    if any(n.target is torch.sin for n in gm.graph.nodes):
        raise RuntimeError("no sin here")
    return gm.forward


torch.cond(torch.tensor(True), lambda x: x.cos(), lambda x: x.sin(), (torch.ones(2),))  # torch compiles this for itself
torch.compile(lambda x: torch.sin(x) + 1, backend=no_sin)(torch.ones(2))
"""


@pytest.mark.e2e
def test_the_hook_leaves_the_graphs_torch_compiles_for_itself_alone_and_numbers_the_programs_as_minify_run(tmp_path):
    # torch.cond called eagerly runs by compiling a wrapper of torch's own: not the program's graph g0
    script = tmp_path / "prog.py"
    script.write_text(EAGER_COND_THEN_A_FAILING_COMPILE)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "dynamo", "1", repros)
    assert done.returncode == 1 and "no sin here" in done.stderr, done.stderr[-1500:]
    assert "graph g0 failed" in done.stderr, done.stderr[-1500:]
    assert [p.name for p in repros.glob("run-*/captured/*")] == ["g0"]


WHILE_LOOP_OF_BUFFERS_ONLY = """
import torch
from torch._higher_order_ops.while_loop import while_loop


class M(torch.nn.Module):  # pytorch#182036: a while_loop whose body returns nothing, its state in buffers
    def __init__(self):
        super().__init__()
        self.register_buffer("counter", torch.tensor(0))
        self.register_buffer("buf", torch.ones(8))

    def forward(self):
        def cond_fn():
            self.counter.add_(1)
            return self.counter < 3

        def body_fn():
            self.buf.add_(-1)
            return ()

        return while_loop(cond_fn, body_fn, ())


with torch.no_grad():
    torch.compile(M(), backend="aot_eager", fullgraph=True)()
"""


@pytest.mark.e2e
def test_the_hook_hands_a_while_loop_dynamo_will_not_trace_again_to_its_backend_in_dynamos_tracing_context(tmp_path):
    # the dynamo graph's while_loop carries dynamo's own form (mutated_arg_indices), which dynamo refuses to trace
    # again: handed to the backend it fails as the program did, once a fake mode with a ShapeEnv is ambient
    script = tmp_path / "loop.py"
    script.write_text(WHILE_LOOP_OF_BUFFERS_ONLY)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "aot", "2", repros)
    assert done.returncode == 1 and "hop is expected to return at least one output" in done.stderr, done.stderr[-1500:]
    (run_dir,) = repros.glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "minified" and report["failure"]["stage"] == "aot_eager", report
    assert report["ops_after"] == ["torch.ops.higher_order.while_loop"], report
    alone = torch_alone(run_dir / "repro.py", tmp_path / "elsewhere")
    assert alone.returncode != 0 and "hop is expected to return at least one output" in alone.stderr, alone.stderr[-2000:]


RANDOM_GRAPH_OF_ANOTHER_DTYPE = """
import torch


def widening(gm, example_inputs):  # pytorch#194547's kind: a random graph whose compiled output is another dtype
    def run(*args):
        return [o.double() if {bad} else o for o in gm(*args)]

    return run


x = torch.randn(8).half()
y = torch.compile(lambda t: torch.rand_like(t) + t, backend=widening)(x)
print("dtype", y.dtype)
"""


@pytest.mark.e2e
def test_the_hook_at_level_4_judges_a_random_graph_by_what_its_outputs_are(tmp_path):
    # compiled RNG draws other numbers than eager's, so values are not compared; a dtype, shape or flag still is
    for bad, fails in (("True", True), ("False", False)):
        script = tmp_path / f"noise_{bad}.py"
        script.write_text(RANDOM_GRAPH_OF_ANOTHER_DTYPE.replace("{bad}", bad))
        repros = tmp_path / f"repros_{bad}"
        done = under_the_hook(script, "dynamo", "4", repros)
        if fails:
            assert done.returncode == 1 and "output 0: torch.float64(8,) != eager torch.float16(8,)" in done.stderr, done.stderr[-1500:]
            report = json.loads(next(repros.glob("run-*/report.json")).read_text())
            category = "(shape or dtype: torch.float64 where eager gives torch.float16)"
            assert report["failure"]["message"].endswith(category) and report["ops_after"] == ["torch.rand_like"], report
        else:  # a healthy random graph: its own numbers, no verdict, nothing saved
            assert done.returncode == 0 and "dtype torch.float16" in done.stdout and not repros.exists(), done.stderr[-1500:]


@pytest.mark.e2e
def test_the_hook_hands_a_graph_dynamo_cannot_trace_again_to_the_backend(tmp_path):
    # pytorch#172956: the partitioner asserts; the graph holds autograd_function_apply, which dynamo cannot trace again,
    # so a repro that compiled it with torch.compile would run the Function eagerly and pass
    script = tmp_path / "train.py"
    script.write_text(SAVED_OUTPUT_WRITTEN_BY_BACKWARD)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "aot", "2", repros)
    assert done.returncode == 1 and "Node add was invalid, but is output" in done.stderr  # as without pt2kit
    (run_dir,) = repros.glob("run-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "minified" and report["failure"]["stage"] == "aot_eager", report
    assert "torch.ops.higher_order.autograd_function_apply" in report["ops_after"] and report["nodes_after"] < report["nodes_before"]
    repro = run_dir / "repro.py"
    assert "torch._dynamo.lookup_backend('aot_eager')(gm, list(inputs))" in repro.read_text()  # no torch.compile: no dynamo
    alone = torch_alone(repro, tmp_path / "elsewhere")
    assert alone.returncode != 0 and "Node add was invalid, but is output" in alone.stderr, alone.stderr[-2000:]



@pytest.mark.e2e
@pytest.mark.slow  # (a minute of processes: make slow)
def test_a_graph_dynamo_breaks_and_that_cannot_be_handed_over_gets_exit_5_naming_where(tmp_path):
    # the same bug compiled with dynamic=True: its graph has symbolic sizes, which a handed graph would not keep
    script = tmp_path / "train.py"
    script.write_text(SAVED_OUTPUT_WRITTEN_BY_BACKWARD.replace("fullgraph=True)", "fullgraph=True, dynamic=True)"))
    done = minify("run", "--json", "-j", "1", "--out", tmp_path / "runs", script, cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 5 and report["status"] != "minified", report
    assert "dynamo breaks g0 when pt2kit compiles it again (unsupported HigherOrderOperator: autograd_function_apply)" in report["message"]

def test_a_graph_with_symbolic_sizes_is_not_handed_to_its_backend():
    """A handed graph gets its inputs' static sizes: one dynamo compiled with symbolic sizes keeps torch.compile."""
    import torch.fx as fx

    from minifier.bisect.untraceable import handed
    from minifier.unit.case import GraphCase, GraphInput, TensorMeta

    gm = fx.symbolic_trace(lambda x: x.cos())
    x = torch.randn(4)
    static = GraphCase(gm, [GraphInput("x", x, TensorMeta.of(x), seed=0)])
    assert handed(static) is not None and handed(static).handed and not static.handed
    symbolic = GraphCase(gm, [GraphInput("x", x, TensorMeta.of(x), seed=0, symbolic_dims=(0,))])
    assert handed(symbolic) is None and handed(static.replace(dynamic=True)) is None


def test_a_handed_graph_keeps_the_calls_fx_would_run_rather_than_record():
    """FX traces a handed graph again for its backend; vmap's levels (dynamo records them for ``torch.vmap`` and
    ``create_block_mask``) and an in-place write (``y[0] = 1.0``) are calls it would run on proxies, or once for good."""
    import operator

    from torch._functorch import predispatch

    from minifier.repro.files import exec_repro
    from minifier.repro.writer import data_of, render
    from minifier.stages.run import run_case
    from minifier.unit.case import GraphCase, GraphInput, TensorMeta

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        y = torch.vmap(lambda row: row * 2)(x)
        y[0] = 1.0
        return y

    x = torch.randn(3, 4)
    torch._dynamo.reset()
    torch.compile(f, backend=keep)(x)
    (gm,) = graphs
    (name,) = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    case = GraphCase(gm, [GraphInput(name, x, TensorMeta.of(x), seed=0)]).replace(handed=True)
    assert run_case(case, "eager").failure is None
    namespace = exec_repro(render(case, stage="eager"), meta={"definitions": case.definitions})
    rebuilt = namespace["graph_module"](namespace["Repro"](data_of(case)))
    calls = [n.target for n in rebuilt.graph.nodes if n.op == "call_function"]
    assert calls == [n.target for n in gm.graph.nodes if n.op == "call_function"], calls
    assert predispatch._vmap_increment_nesting in calls and operator.setitem in calls
    assert torch.equal(rebuilt(x)[0], f(x))


SOFT_CAPPED_FLEX_ATTENTION = """
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.nn.attention.flex_attention import flex_attention


def fw(gm, example_inputs):  # a compiler that mishandles a tanh inside a score_mod
    bodies = [n.target for m in gm.modules() if m is not gm for n in m.graph.nodes]
    if torch.ops.aten.tanh.default in bodies:
        raise RuntimeError("cannot lower tanh in a score_mod")
    return make_boxed_func(gm.forward)


def soft_cap(score, b, h, q_idx, kv_idx):
    return 30.0 * torch.tanh(score / 30.0)


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.proj(x).view(2, 8, 3, 1, 16).permute(2, 0, 3, 1, 4)
        return flex_attention(q, k, v, score_mod=soft_cap).relu().sum()


with torch.no_grad():
    print(torch.compile(Attn(), backend=aot_autograd(fw_compiler=fw))(torch.randn(2, 8, 16)))
"""


@pytest.mark.e2e
@pytest.mark.slow  # (a minute of processes: make slow)
def test_the_hook_after_dynamo_hands_a_flex_attention_graph_dynamo_fails_to_trace_again(tmp_path):
    # dynamo's graph calls flex_attention with its block mask as dynamo wrote it, which dynamo fails on when a repro
    # compiles it (InternalTorchDynamoError around a ValueError); handed to the backend, it is FX that traces it again,
    # through the vmap levels and the in-place write create_block_mask left in it
    script = tmp_path / "attn.py"
    script.write_text(SOFT_CAPPED_FLEX_ATTENTION)
    repros = tmp_path / "repros"
    done = under_the_hook(script, "dynamo", "2", repros)
    assert done.returncode == 1 and "cannot lower tanh in a score_mod" in done.stderr, done.stderr[-1500:]
    report = json.loads(next(repros.glob("run-*/report.json")).read_text())
    assert report["status"] == "minified" and "torch.ops.higher_order.flex_attention" in report["ops_after"], report
    assert report["nodes_after"] < report["nodes_before"], report
    alone = torch_alone(Path(report["repro"]), tmp_path / "elsewhere")
    assert alone.returncode != 0 and "cannot lower tanh in a score_mod" in alone.stderr, alone.stderr[-2000:]


def test_level_4_checks_a_backward_compiled_ahead_with_donated_buffers_without_retaining_it(tmp_path):
    # A backward AOTAutograd compiled at the program's own plain backward donates its saved buffers and refuses
    # retain_graph=True; the check retains it for a backward compiled lazily (the program may retain it later),
    # and checks this one without. It raised AOTAutograd's refusal in the user's program (pytorch#185509's
    # training loop under TORCHDYNAMO_REPRO_LEVEL=4), where the wrong gradient was the failure to show.
    import types

    from pt2kit.seams.autograd_engine import refuses_retained_backward
    from minifier.unit.float64 import rng_state

    torch._dynamo.reset()

    def fn(x, w):
        return (x @ w).relu().sin()

    compiled = torch.compile(fn, backend="aot_eager")
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    compiled(x, w).sum().backward()  # (the program's first backward: compiled now, donating)
    with pytest.raises(RuntimeError) as refused:
        torch.autograd.grad(compiled(x, w).sum(), [x], retain_graph=True)
    assert refuses_retained_backward(refused.value)
    guard = Recorded(Intent("dynamo", 4, tmp_path / "repros"))
    case = types.SimpleNamespace(gm=fn, label=lambda: "g0")
    assert guard.check_gradients(compiled, case, [x.detach().requires_grad_(), w.detach().requires_grad_()], rng_state()) is None


class Tagged(torch.Tensor):
    """A plain tensor subclass (no ``__torch_dispatch__``): its class is part of the program's inputs."""


@pytest.mark.parametrize("level", [1, 4])
def test_the_hook_saves_a_tensor_subclass_input_as_its_class(level, tmp_path):
    """The values of the failing call replace the compile's fake ones as the capture reads them: the class of a
    plain subclass kept (it was dropped, so a bug that needs the class passed alone: pytorch#193932 under the hook)."""
    torch._dynamo.reset()
    guard = Recorded(Intent("aot", level, tmp_path / "repros"))
    backend = registered("planted_runtime_error")
    x = torch.randn(4).as_subclass(Tagged)
    with pytest.raises(Exception, match="planted"):
        torch.compile(lambda t: torch.cos(t) + 1, backend=lambda gm, ex: guard.compile(backend, "planted_runtime_error", gm, ex))(x)
    (saved,) = (tmp_path / "repros").glob("run-*/captured/g*/repro.py")
    (given,) = load_repro(saved).case.inputs
    assert given.meta.subclass is not None and given.meta.subclass.endswith("Tagged"), given.meta


def test_the_hook_at_level_4_judges_how_a_graphs_outputs_alias(tmp_path):
    """(hunt 12, pytorch#191449's shape) a graph whose outputs are one storage eagerly and two tensors compiled:
    every value right, the program's later write through one not seen through the other. Level 4 said "equal bit
    for bit, their aliasing not judged"; it judges it now, as `minify run --accuracy` does a dynamo graph's."""
    torch._dynamo.reset()
    guard = Recorded(Intent("dynamo", 4, tmp_path / "repros"))

    def unaliasing(gm, example_inputs):  # (a compiler that copies each output)
        return lambda *args: [o.clone() for o in gm(*args)]

    def f(x):
        y = x + 1
        return y, y.view(-1)

    with pytest.raises(Exception, match="alias differently") as raised:
        torch.compile(f, backend=lambda gm, ex: guard.compile(unaliasing, None, gm, ex))(torch.randn(2, 2))
    assert type(raised.value).__name__ == "AccuracyError"
    assert [accuracy for _, accuracy in guard.minified] == [True]
