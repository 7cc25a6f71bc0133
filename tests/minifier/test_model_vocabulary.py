"""What real models add: higher-order ops, dynamic shapes, size-dependent bugs, and real models.

The planted-backend tests (tests/support/user_modules/planted.py) run the program under capture in its own process,
as ``minify run`` does, and ask the reducer's queries in this test's process (the decisions
are what they test; tests/minifier/test_minifier_cli.py keeps the command's own processes);
each repro then runs with torch alone. The slow ones run ``minify run`` whole, on real
Inductor with torch's own ``inject_relu_bug_TESTING_ONLY`` and on transformers models built
from small configs with random weights (no download).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from support.paths import USER_MODULES
from support.programs import minified
from pt2kit.script import PT2KIT_PACKAGES


def minify(script: Path, *flags: str, timeout: int = 1500) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--json", "--out", str(script.parent / "runs"), *flags, str(script)],
        capture_output=True, text=True, timeout=timeout, cwd=script.parent,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert done.returncode == 0, (report, done.stderr[-3000:])
    return report


def torch_alone(repro: Path) -> subprocess.CompletedProcess[str]:
    """Run a repro with pt2kit's packages unimportable."""
    blocker = textwrap.dedent(f"""
        import runpy, sys
        for name in {PT2KIT_PACKAGES!r}:
            sys.modules[name] = None
        sys.argv = [{str(repro)!r}]
        runpy.run_path({str(repro)!r}, run_name="__main__")
    """)
    env = {**os.environ, "PT2KIT_AUTOLOAD": "0", "PYTHONPATH": str(USER_MODULES)}
    return subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, cwd=repro.parent, env=env, timeout=900)


def write(tmp_path: Path, body: str, name: str = "program.py") -> Path:
    script = tmp_path / name
    script.write_text(f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\nimport planted  # noqa: F401\nimport torch\n" + textwrap.dedent(body))
    return script


# --------------------------------------------------------------------------- #
# Planted backends (e2e)
# --------------------------------------------------------------------------- #


@pytest.mark.e2e
@pytest.mark.parametrize("after", ["dynamo", "aot"])
def test_a_failure_only_on_the_automatic_dynamic_recompile_keeps_its_symbolic_sizes(after, tmp_path, in_process):
    backend = "planted_dynamic_dynamo" if after == "dynamo" else "planted_dynamic_aot"
    script = write(tmp_path, f"""
        def f(x, w):
            y = torch.sin(x @ w) * 2
            y = torch.cos(y) + y.shape[0]
            return torch.tanh(y).sum(0)

        if __name__ == "__main__":
            fn = torch.compile(f, backend={backend!r})
            w = torch.randn(16, 16)
            for n in (4, 6, 8):  # the second call recompiles with a symbolic batch size
                print(fn(torch.randn(n, 16), w).sum())
    """)
    report = minified(in_process, script, after=after)
    assert report["graph"]["index"] == 1  # the recompile, not the first (static) graph
    assert report["graph"]["boundary"] == after
    assert report["ops_after"] == (["torch.cos"] if after == "dynamo" else ["aten.cos.default"])
    assert any(i["dynamic_dims"] for i in report["inputs_after"])  # the failure needs a symbolic size: kept
    repro = Path(report["repro"])
    assert "mark_dynamic" in repro.read_text() or "symbolic_inputs" in repro.read_text()
    ran = torch_alone(repro)
    assert ran.returncode != 0 and "symbolic" in ran.stderr and "not supported" in ran.stderr, ran.stderr[-2000:]


@pytest.mark.e2e
def test_an_int_argument_that_stays_symbolic_is_a_free_symbol_of_the_aot_repro(tmp_path, in_process):
    # (no tensor's size gives n: the repro makes it a symbol of its own; the aot graph was
    # once unbuildable here and --after auto fell back to the dynamo graph, silently)
    script = write(tmp_path, """
        def f(x, n):
            return torch.cos(torch.sin(x) * n).sum()

        if __name__ == "__main__":
            print(torch.compile(f, backend="planted_dynamic_aot", dynamic=True)(torch.randn(6, 5), 3))
    """)
    report = minified(in_process, script)
    assert report["graph"]["boundary"] == "aot", report["graph"]
    assert report["ops_after"] == ["aten.cos.default"]
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "symbolic cos is not supported" in ran.stderr, ran.stderr[-2000:]


@pytest.mark.e2e
def test_a_jagged_tensors_aot_graph_is_minified_with_its_ragged_size_standing_as_a_symbol(tmp_path, in_process):
    # (the dynamo graph takes the nested tensor itself, which no repro builds yet; the aot
    # graph takes its values, offsets and the ragged size j1, a nested int with no value)
    script = write(tmp_path, """
        def f(nt, w):
            return torch.cos(torch.sin(nt * 2) * w)

        if __name__ == "__main__":
            nt = torch.nested.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)], layout=torch.jagged)
            print(torch.compile(f, backend="planted_compile_error")(nt, torch.randn(8)).values().sum())
    """)
    report = minified(in_process, script)
    assert report["graph"]["boundary"] == "aot", report["graph"]
    assert report["ops_after"] == ["aten.cos.default"]
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "planted: cannot compile aten.cos" in ran.stderr, ran.stderr[-2000:]


@pytest.mark.e2e
def test_an_aot_graph_saved_only_at_its_first_run_is_tried_when_its_dynamo_graph_cannot_be_rebuilt(tmp_path, in_process):
    # The branch's torch.ones(s0, s1) cannot be traced again by FX (sizes as varargs), so the
    # dynamo graph fails alone another way. Its aot graph holds a real constant (the
    # predicate), which fake inputs cannot save at compile time: it is saved at its first
    # run, under the name that run reports, and stands for the program's failure.
    script = write(tmp_path, """
        def h(x):
            pred = torch.tensor(True)
            return torch.cond(pred, lambda: torch.ones(x.shape[0], x.shape[1]), lambda: torch.zeros(x.shape[0], x.shape[1])).cos()

        if __name__ == "__main__":
            print(torch.compile(h, backend="planted_runtime_error", dynamic=True)(torch.randn(5, 7)))
    """)
    report = minified(in_process, script)
    assert report["graph"]["boundary"] == "aot", report["graph"]
    assert report["ops_after"] == ["aten.cos.default"]
    captured = {p.name for p in (Path(report["run_dir"]) / "captured").iterdir() if p.is_dir()}
    assert "g0.inference" in captured and "g0.inference2" not in captured, captured
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "planted: aten.cos kernel failed at run time" in ran.stderr, ran.stderr[-2000:]


@pytest.mark.e2e
def test_a_static_failure_of_a_dynamic_graph_becomes_a_static_repro(tmp_path, in_process):
    script = write(tmp_path, """
        def f(x):
            return torch.cos(torch.sin(x) * x.shape[0]).sum()

        if __name__ == "__main__":
            print(torch.compile(f, backend="planted_compile_error", dynamic=True)(torch.randn(6, 5)))
    """)
    report = minified(in_process, script)
    assert report["ops_after"] == ["aten.cos.default"]
    assert not any(i["dynamic_dims"] for i in report["inputs_after"])  # "fully static" kept: the simpler repro
    assert "mark_dynamic" not in Path(report["repro"]).read_text()


@pytest.mark.e2e
def test_a_size_dependent_bug_shrinks_to_the_smallest_failing_sizes(tmp_path, in_process):
    script = write(tmp_path, """
        def f(x):
            y = torch.sin(x) * 2 + 1
            return torch.cos(y).exp().sum(1)

        if __name__ == "__main__":
            print(torch.compile(f, backend="planted_multiple_of_7")(torch.randn(56, 100)))  # past SMALL_INPUTS: worth shrinking
    """)
    report = minified(in_process, script)
    assert report["ops_after"] == ["aten.cos.default"]
    (only,) = report["inputs_after"]
    assert only["shape"] == [7, 1], report["inputs_after"]
    # past each size's first try, sizes are asked two at a time: the queries of a batch
    # share the progress label it was asked under ("... · 12 queries · ..."). (Their
    # spans overlap too, but by less than the timeline's rounding when each takes 0.04 s.)
    batches = Counter(s["step"].split(" · ")[2] for s in report["timeline"] if s["step"].startswith("shrink_shapes"))
    assert 2 in batches.values(), report["timeline"]
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "multiple of 7" in ran.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("wrapper", ["checkpoint", "autograd_function"])
def test_higher_order_ops_round_trip_and_minify_to_the_op_inside(wrapper, tmp_path, in_process):
    """Activation checkpointing and an autograd.Function around the culprit, after dynamo (plain backend)."""
    script = write(tmp_path, """
        from torch.utils.checkpoint import checkpoint

        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.cos(x) * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2 * x

        def block(t):
            return torch.cos(t.sin() * 2).exp()

        def f(x):
            y = x.tanh() + 1
            y = """ + ("checkpoint(block, y, use_reentrant=False)" if wrapper == "checkpoint" else "Square.apply(y)") + """
            return (y * 3).sum()

        if __name__ == "__main__":
            x = torch.randn(8, 8, requires_grad=True)
            torch.compile(f, backend="planted_dynamo_error")(x).backward()
    """)
    report = minified(in_process, script, after="dynamo")
    assert report["graph"]["boundary"] == "dynamo"
    assert report["ops_after"] == ["torch.cos"], report["ops_after"]  # inlined, then shrunk to the op inside
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "torch.cos is not supported" in ran.stderr


# --------------------------------------------------------------------------- #
# Real Inductor and real models (slow)
# --------------------------------------------------------------------------- #

RELU_BUG = "import torch._inductor.config\ntorch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'\n"


@pytest.mark.slow
@pytest.mark.parametrize("wrapper", ["checkpoint", "cond", "autograd_function"])
def test_inductor_relu_bug_inside_a_higher_order_op_minifies_to_relu(wrapper, tmp_path):
    body = {
        "checkpoint": "y = checkpoint(lambda t: torch.relu(t @ w).sin(), x, use_reentrant=False)",
        "cond": "y = torch.cond(x.sum() > 0, lambda t: torch.relu(t @ w).sin(), lambda t: torch.relu(t @ w).cos(), (x,))",
        "autograd_function": "y = Relu.apply(x @ w).sin()",
    }[wrapper]
    script = tmp_path / "program.py"
    script.write_text(RELU_BUG + textwrap.dedent(f"""
        import torch
        from torch.utils.checkpoint import checkpoint

        class Relu(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.relu(x)

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * (x > 0)

        def f(x, w):
            {body}
            return (y * 2).sum()

        if __name__ == "__main__":
            torch.manual_seed(0)
            x, w = torch.randn(8, 8), torch.randn(8, 8)
            print(torch.compile(f)(x, w))
    """))
    report = minify(script)
    assert report["failure"]["stage"] == "inductor"
    assert report["ops_after"] == ["aten.relu.default"], report["ops_after"]
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "CppCompileError" in ran.stderr


@pytest.mark.slow
def test_an_inductor_bug_beside_dropout_is_minified_in_the_aot_graph(tmp_path):
    # Inductor's decompositions turn dropout into its own RNG prims (prims.inductor_seeds,
    # inductor_random...) in the aot graph it compiles; that graph is still the unit for
    # a crash, and the repro can run them
    script = tmp_path / "program.py"
    script.write_text(RELU_BUG + textwrap.dedent("""
        import torch

        def f(x, w):
            return torch.relu(torch.nn.functional.dropout(x @ w, 0.1, training=True)).sin().sum()

        if __name__ == "__main__":
            torch.manual_seed(0)
            x, w = torch.randn(8, 8), torch.randn(8, 8)
            print(torch.compile(f)(x, w))
    """))
    report = minify(script)
    assert report["graph"]["boundary"] == "aot", report["graph"]
    assert report["ops_after"] == ["aten.relu.default"], report["ops_after"]
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "CppCompileError" in ran.stderr


@pytest.mark.slow
def test_a_dynamic_gpt2_training_step_minifies_to_relu(tmp_path):
    pytest.importorskip("transformers", reason="pyproject.toml's models extra: make slow installs it (make models)")
    script = tmp_path / "gpt2_dynamic.py"
    script.write_text(RELU_BUG + textwrap.dedent("""
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        if __name__ == "__main__":
            torch.manual_seed(0)
            config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32, activation_function="relu")
            model = GPT2LMHeadModel(config)
            step = torch.compile(model, dynamic=True)
            ids = torch.randint(0, 64, (2, 12))
            out = step(input_ids=ids, labels=ids)
            out.loss.backward()
            print(out.loss.item())
    """))
    report = minify(script, timeout=2400)
    assert report["failure"]["stage"] == "inductor"
    # The forward graph fails alone at dynamo level, so either vocabulary is one relu.
    assert report["ops_after"] in (["aten.relu.default"], ["torch.nn.functional.relu"]), report["ops_after"]
    ran = torch_alone(Path(report["repro"]))
    assert ran.returncode != 0 and "CppCompileError" in ran.stderr
