"""What genuine torch bugs do that planted ones never did, end to end on purpose-built backends.

Each test is one way a real bug from PyTorch's issue tracker got a wrong verdict
(tests/minifier/real_bugs/ holds the bugs themselves, run in the slow group):

- the compiler rewrites the graph it was handed, in place (Inductor's reinplacing):
  pt2kit must keep the graph as it was handed over;
- the graph's only effect is a write into its input: the written input is an output;
- the float64 reference cannot run: eager is the reference, the graph is not to blame;
- an input is a ZeroTensor (the gradient of ``torch.sgn``): the repro makes one again.
"""

import json
import textwrap

import pytest

from support.paths import USER_MODULES
from minifier.minification import minify_script
from support.running import run_repro_without_pt2kit

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def verify_elsewhere(monkeypatch):
    """These tests are about what a repro's reader sees: run it elsewhere, as minify run does for users."""
    monkeypatch.setenv("PT2KIT_VERIFY_ELSEWHERE", "1")


def program(tmp_path, body, name="program.py"):
    path = tmp_path / name
    path.write_text(f"import sys\nsys.path.insert(0, {str(USER_MODULES)!r})\nimport torch\nimport planted  # noqa: F401\n\n" + textwrap.dedent(body))
    return path


def minify(session, script, tmp_path, **options):
    return minify_script(session, script, [], out=tmp_path / "runs", **options)


def test_the_graph_a_compiler_rewrites_in_place_is_kept_as_it_was_handed_over(session, tmp_path):
    # planted_wrong_cos adds 0.5 after each cos *in the graph it is given*, as Inductor's
    # passes rewrite theirs: the saved graph must be the one before, or eager would "fail" too
    script = program(tmp_path, """
        def f(x, w):
            y = torch.sin(x @ w) * 2 + 1
            return torch.cos(y).exp().sum(dim=0)

        torch.manual_seed(0)
        print(torch.compile(f, backend="planted_wrong_cos")(torch.randn(8, 16), torch.randn(16, 16)))
    """)
    result = minify(session, script, tmp_path, accuracy=True)
    assert result.failure.stage == "planted_wrong_cos"
    assert result.after.op_names() == ["aten.cos.default"]
    captured = (result.run_dir / "captured" / "g0.inference" / "repro.py").read_text()
    assert "aten.cos.default" in captured and "add.Tensor(cos, 0.5)" not in captured
    assert run_repro_without_pt2kit(result.repro).returncode == 1


def test_a_graph_whose_only_effect_is_writing_its_input_is_judged_on_that_input(session, tmp_path):
    script = program(tmp_path, """
        def scale(x, w):
            x.mul_(torch.sin(w) + 1)

        with torch.no_grad():
            torch.manual_seed(0)
            x, w = torch.randn(8), torch.randn(8)
            expected = x.clone()
            scale(expected, w)
            torch.compile(scale, backend="planted_lost_write")(x, w)
            torch.testing.assert_close(x, expected)
    """)
    result = minify(session, script, tmp_path, accuracy=True)
    report = json.loads((result.run_dir / "report.json").read_text())
    assert report["failure"]["kind"] == "accuracy" and report["graph"]["kind"] == "inference"
    assert sorted(result.after.op_names()) == ["aten.copy_.default", "aten.mul.Tensor"]
    done = run_repro_without_pt2kit(result.repro)
    assert done.returncode == 1 and "(written in place)" in done.stderr, done.stderr


def test_a_float64_reference_that_cannot_run_leaves_eager_as_the_reference(session, tmp_path):
    # a user's op with a float32-only kernel: the fp64 run raises; that is pt2kit's limit,
    # never the graph failing "at eager"
    script = program(tmp_path, """
        @torch.library.custom_op("pt2kit_test::fast_abs", mutates_args=())
        def fast_abs(x: torch.Tensor) -> torch.Tensor:
            if x.dtype != torch.float32:
                raise TypeError("fast_abs takes float32 only")
            return x.abs()

        @fast_abs.register_fake
        def _(x):
            return torch.empty_like(x)

        def f(x):
            return torch.cos(fast_abs(x) + 1) * 2

        torch.manual_seed(0)
        print(torch.compile(f, backend="planted_accuracy")(torch.randn(8)))
    """)
    result = minify(session, script, tmp_path, accuracy=True)
    assert result.failure.stage == "planted_accuracy"
    assert result.after.op_names() == ["aten.cos.default"]
    done = run_repro_without_pt2kit(result.repro)
    assert done.returncode == 1 and "AccuracyError" in done.stderr


def test_a_zerotensor_input_is_made_again_in_the_repro(session, tmp_path):
    script = program(tmp_path, """
        def layer(x, w):
            return torch.cos(x @ w) * 2

        torch.manual_seed(0)
        x, w = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
        y = torch.compile(layer, backend="planted_zero_tangent")(x, w)
        torch.sgn(y).sum().backward()  # sgn's gradient is a ZeroTensor
    """)
    result = minify(session, script, tmp_path)
    assert result.failure.failure.signature.exception == "SIGSEGV"
    assert result.after.kind == "backward" and result.after.node_count == 1
    assert "torch._efficientzerotensor(" in result.repro.read_text()
    assert run_repro_without_pt2kit(result.repro).returncode == -11


def test_a_repro_that_fails_only_beside_the_program_is_not_verified(session, tmp_path, monkeypatch):
    # The failure needs a file in the program's directory: every query runs there and
    # sees it; the repro, run elsewhere as its reader will, does not fail, and
    # report.json says so instead of "verified".
    monkeypatch.chdir(tmp_path)
    (tmp_path / "planted-marker").write_text("")
    script = program(tmp_path, """
        def f(x):
            return torch.cos(x) * 2

        print(torch.compile(f, backend="planted_cwd_marker")(torch.randn(4)))
    """)
    result = minify(session, script, tmp_path)
    report = json.loads((result.run_dir / "report.json").read_text())
    assert result.after.op_names() == ["aten.cos.default"]
    assert report["verified"] is False
    assert any("run with torch alone in another directory" in note and "passed" in note for note in report["notes"]), report["notes"]
    assert (result.run_dir / "logs" / "repro-elsewhere.log").exists()
    assert any(t.step.startswith("running repro.py elsewhere") for t in result.timeline)
