"""Every shape of backend a user writes is minified, and its repro runs with torch alone.

A registered name in a module, a plain ``(gm, example_inputs)`` function defined in the
script (with or without ``if __name__ == "__main__":``), a lambda, a
``functools.partial`` and a closure: the last four have no importable name, so the
repro carries their source (minifier/capture/extract.py). Each script compiles a small
function whose graph holds many ops; the backend raises only when cos and exp meet
in one graph (a two-op bug), at dynamo level, with no AOTAutograd underneath.

How each shape is carried is decided in-process (``backend_definition`` on the script's
own objects); two shapes are minified whole, one carried as source (the closure) and one by
its registration (the rest take the same path from the definition to the repro). Those
runs capture the program in its own process, as ``minify run`` does, and ask the reducer's
queries in this one; each repro then runs with torch alone in a directory of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from minifier.capture.extract import Unrecoverable, backend_definition
from pt2kit.errors import FlakyFailure, NotReproducible, UserFacingError
from minifier.unit.case import BACKEND_NAME

from pt2kit.script import PT2KIT_PACKAGES
from support.programs import minified

PROGRAM = '''
import functools
import torch

SECRET = "cannot fuse cos with exp"


def rejects_pair(gm, example_inputs):
    targets = {{n.target for n in gm.graph.nodes}}
    if torch.cos in targets and torch.exp in targets:
        raise RuntimeError(f"pair backend: {{SECRET}}")
    return gm.forward


def make_backend(message):
    def closure_backend(gm, example_inputs):
        targets = {{n.target for n in gm.graph.nodes}}
        if torch.cos in targets and torch.exp in targets:
            raise RuntimeError(f"pair backend: {{message}}")
        return gm.forward
    return closure_backend


def f(x, w):
    y = torch.sin(x @ w) * 2 + 1
    y = torch.cos(y)
    y = torch.tanh(y) - y.mean()
    y = torch.exp(y)
    return torch.sigmoid(y).sum(dim=0)


{setup}
x, w = torch.randn(8, 16), torch.randn(16, 16)
{call}
'''

#: The shapes run end to end: (setup, the call that compiles and runs f).
SHAPES = {
    "closure": ("", 'print(torch.compile(f, backend=make_backend("cannot fuse cos with exp"))(x, w))'),
    "registered_in_script": (
        "torch._dynamo.register_backend(rejects_pair, name='pair_backend_in_script')",
        'print(torch.compile(f, backend="pair_backend_in_script")(x, w))',
    ),
}


def refused(in_process, script: Path, error: type[UserFacingError]) -> UserFacingError:
    """The error ``minify run`` ends with on ``script`` (the command prints its one line and exit code)."""
    with pytest.raises(error) as raised:
        minified(in_process, script)
    return raised.value


#: The backend expression of each shape with no importable name, as a program passes it to torch.compile.
UNNAMED = {
    "script_function": "rejects_pair",
    "lambda": "lambda gm, ex: rejects_pair(gm, ex)",
    "partial": "functools.partial(rejects_pair)",
    "closure": 'make_backend("cannot fuse cos with exp")',
}


def run_as_main(script: Path) -> dict:
    """The script's globals after running it as ``__main__`` (as ``python script.py`` does; nothing compiles yet)."""
    import runpy

    return runpy.run_path(str(script), run_name="__main__")


def carried(backend_expression: str, tmp_path: Path) -> tuple[str, dict, dict]:
    """The program's script with its backend bound to ``BACKEND`` instead of compiled with: return the backend's
    carried source, that source run (after ``import torch``, as a repro runs it) in a namespace of its own, and the
    script's globals."""
    script = tmp_path / "user_program.py"
    script.write_text(PROGRAM.format(setup="", call=f"BACKEND = {backend_expression}"))
    user = run_as_main(script)
    source = backend_definition(user["BACKEND"], script.read_text())
    namespace: dict = {"__name__": "repro"}
    exec("import torch\n" + source, namespace)  # pt2kit's output, run as the repro runs it
    return source, namespace, user


@pytest.mark.parametrize("shape", sorted(UNNAMED))
def test_each_unnamed_backend_is_carried_as_source_that_rejects_the_pair_alone(shape, tmp_path):
    source, namespace, user = carried(UNNAMED[shape], tmp_path)
    assert "BACKEND =" not in source and "x, w = " not in source  # the program itself never runs again
    assert "user_program" not in source
    backend = namespace[BACKEND_NAME]
    with pytest.raises(RuntimeError, match="pair backend: cannot fuse cos with exp"):
        backend(torch.fx.symbolic_trace(user["f"]), [])
    assert callable(backend(torch.fx.symbolic_trace(lambda x: torch.cos(x).sum()), []))


def test_a_backend_closing_over_a_tensor_is_unrecoverable_and_says_why(tmp_path):
    script = tmp_path / "tensor_closure.py"
    script.write_text(TENSOR_CLOSURE.split("if __name__")[0] + "BACKEND = make(torch.tensor(1))\n")
    user = run_as_main(script)
    with pytest.raises(Unrecoverable, match="Tensor has no literal form"):
        backend_definition(user["BACKEND"], script.read_text())


@pytest.mark.e2e
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_backend_shape_is_minified_to_the_pair_and_travels(shape, tmp_path, in_process):
    setup, call = SHAPES[shape]
    # no `if __name__ == "__main__":` on purpose: importing this script runs the program
    script = tmp_path / "user_program.py"
    script.write_text(PROGRAM.format(setup=setup, call=call))
    report = minified(in_process, script)
    assert report["status"] == "minified"
    assert report["failure"]["kind"] == "compile_error" and "cannot fuse cos with exp" in report["failure"]["message"]
    assert report["graph"]["boundary"] == "dynamo"
    assert sorted(report["ops_after"]) == ["torch.cos", "torch.exp"]

    repro = Path(report["repro"])
    source = repro.read_text()
    assert "import user_program" not in source  # the program never runs again
    assert str(tmp_path) not in source and os.path.expanduser("~") + "/" not in source
    ran = run_elsewhere(repro, tmp_path / "elsewhere")
    assert ran.returncode != 0 and "cannot fuse cos with exp" in ran.stderr, ran.stderr[-2000:]


def run_elsewhere(repro: Path, elsewhere: Path) -> subprocess.CompletedProcess[str]:
    """Run a repro on "another machine": a fresh directory holding only the run's files, torch alone."""
    elsewhere.mkdir()
    for item in repro.parent.iterdir():
        if item.is_file():
            (elsewhere / item.name).write_bytes(item.read_bytes())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import runpy, sys
        sys.path.insert(0, ".")  # as `python repro.py` would
        for name in {PT2KIT_PACKAGES!r}:
            sys.modules[name] = None
        sys.argv = ["repro.py"]
        runpy.run_path("repro.py", run_name="__main__")
    """)], capture_output=True, text=True, cwd=elsewhere, env={**env, "PT2KIT_AUTOLOAD": "0"}, timeout=300)


@pytest.mark.e2e
def test_a_backend_that_fails_only_sometimes_is_flaky(tmp_path, in_process):
    """The program's failing compile is trusted, not repeated; when nothing fails again, it is called flaky."""
    counter = tmp_path / "calls"
    script = tmp_path / "flaky.py"
    script.write_text(textwrap.dedent(f'''
        import pathlib
        import torch

        def sometimes(gm, example_inputs):
            path = pathlib.Path({str(counter)!r})
            calls = int(path.read_text()) if path.exists() else 0
            path.write_text(str(calls + 1))
            if calls == 0:
                raise RuntimeError("sometimes: a bad day")
            return gm.forward

        if __name__ == "__main__":
            print(torch.compile(lambda x: torch.cos(x).exp(), backend=sometimes)(torch.randn(4)))
    '''))
    error = refused(in_process, script, FlakyFailure)
    assert error.status == "flaky" and error.exit_code == 1


def test_a_failure_the_program_shows_on_every_run_and_its_graph_never_alone_is_not_called_flaky(tmp_path, in_process):
    """State the program sets and no repro carries (here an environment variable): the graph alone never fails,
    the program fails every time; exit 5 saying so, not exit 1 "flaky"."""
    script = tmp_path / "every_run.py"
    script.write_text(textwrap.dedent("""
        import os
        import torch
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        def fw(gm, example_inputs):
            def run(*args):
                if os.environ.get("PICKY_BAD_DAY"):
                    raise RuntimeError("picky: a bad day")
                return gm(*args)
            return make_boxed_func(run)

        picky = aot_autograd(fw_compiler=fw)

        if __name__ == "__main__":
            os.environ["PICKY_BAD_DAY"] = "1"
            print(torch.compile(lambda x: torch.cos(x).exp(), backend=picky)(torch.randn(4)))
    """))
    error = refused(in_process, script, NotReproducible)
    said = str(error)
    assert error.exit_code == 5 and "fails the same way on every run" in said and "never does" in said, said
    assert "state the program set" in said and "flaky" not in said, said
    # its report (report.json, --json) keeps what was found: the program's failure and each graph's stages
    session, _ = in_process
    session.keeps_found(error)  # (as the command does)
    assert "a bad day" in error.report["failure"]["message"], error.report
    assert "g0" in [g["label"] for g in error.report["graphs"]], error.report["graphs"]


@pytest.mark.e2e
def test_a_callable_object_backend_is_carried_with_its_state(tmp_path, in_process):
    script = tmp_path / "callable_object.py"
    script.write_text(textwrap.dedent('''
        import torch

        class Picky:
            def __init__(self, word):
                self.word = word

            def __call__(self, gm, example_inputs):
                if any(n.target is torch.exp for n in gm.graph.nodes):
                    raise RuntimeError(f"picky: {self.word}")
                return gm.forward

        if __name__ == "__main__":
            print(torch.compile(lambda x: torch.exp(torch.cos(x)).sin(), backend=Picky("no thanks"))(torch.randn(4)))
    '''))
    report = minified(in_process, script)
    assert report["ops_after"] == ["torch.exp"] and "picky: no thanks" in report["failure"]["message"]


TENSOR_CLOSURE = textwrap.dedent('''
    import torch

    def make(limit):
        def picky(gm, example_inputs):
            if limit.item() > 0:
                raise RuntimeError("picky: no thanks")
            return gm.forward
        return picky

    if __name__ == "__main__":
        print(torch.compile(lambda x: torch.cos(x).exp(), backend=make(torch.tensor(1)))(torch.randn(4)))
''')


@pytest.mark.e2e
def test_a_backend_whose_source_cannot_be_carried_is_named(tmp_path, in_process):
    """A closure over a tensor has no source form: exit 5, saying what to do."""
    script = tmp_path / "tensor_closure.py"
    script.write_text(TENSOR_CLOSURE)
    error = refused(in_process, script, NotReproducible)
    assert error.exit_code == 5
    assert "cannot be written into a repro" in str(error) and "register" in str(error)


# --------------------------------------------------------------------------- #
# Config that is not a literal: a pass function the failure needs
# --------------------------------------------------------------------------- #

PASS = """
def no_relu_pass(graph):
    for node in graph.nodes:
        if node.op == "call_function" and "relu" in str(node.target){extra}:
            raise RuntimeError("planted: the pre-grad pass rejects relu")
"""

CONFIG_PROGRAM = """
import torch
{setup}

def f(x):
    return torch.relu(x.sin() + 1).cos() * 2

if __name__ == "__main__":
    print(torch.compile(f)(torch.randn(8)))
"""


@pytest.mark.e2e
@pytest.mark.parametrize("where", ["module", "script"])
def test_a_config_pass_function_travels_by_reference_or_as_source(where, tmp_path, in_process):
    """``pre_grad_custom_pass`` is kept by reference when importable, carried when in the script."""
    if where == "module":
        (tmp_path / "user_passes.py").write_text(PASS.format(extra=""))
        setup = "import user_passes\ntorch._inductor.config.pre_grad_custom_pass = user_passes.no_relu_pass"
    else:
        setup = PASS.format(extra="") + "\ntorch._inductor.config.pre_grad_custom_pass = no_relu_pass"
    script = tmp_path / "user_program.py"
    script.write_text(CONFIG_PROGRAM.format(setup=setup))
    report = minified(in_process, script)
    assert report["ops_after"] == ["torch.relu"] and report["config_missing"] == []
    repro = Path(report["repro"])
    if where == "module":
        assert report["config"] == {"torch._inductor.config": {"pre_grad_custom_pass": {"pt2kit:import": "user_passes:no_relu_pass"}}}
        assert "torch._inductor.config.pre_grad_custom_pass = user_passes.no_relu_pass" in repro.read_text()
    else:
        assert "def no_relu_pass(graph):" in repro.read_text() and "import user_program" not in repro.read_text()
    ran = run_elsewhere(repro, tmp_path / "elsewhere")
    assert ran.returncode != 0 and "the pre-grad pass rejects relu" in ran.stderr, ran.stderr[-2000:]


@pytest.mark.e2e
def test_a_config_pass_pt2kit_cannot_carry_is_named_not_dropped(tmp_path, in_process):
    """A closure over a tensor has no source form: exit 5, and the message names the key."""
    setup = "def make_pass(marker):\n" + textwrap.indent(PASS.format(extra=" and bool(marker.all())"), "    ") + "    return no_relu_pass\n\n"
    setup += "torch._inductor.config.pre_grad_custom_pass = make_pass(torch.ones(1))"
    script = tmp_path / "user_program.py"
    script.write_text(CONFIG_PROGRAM.format(setup=setup))
    error = refused(in_process, script, NotReproducible)
    assert error.exit_code == 5
    assert "torch._inductor.config.pre_grad_custom_pass" in str(error) and "Tensor" in str(error)
