"""Blame: the kernel a program failed in names the nodes the reducer asks about first (minifier/capture/blame.py).

The fast tests read kernels off lines of generated code written here, and follow them
through a stand-in for a compiled graph; the slow ones run torch's own planted Inductor relu
bug, as a compile error (the kernel's nodes are known exactly) and as an abort in a
graph Inductor serves from its cache (known by the ops the kernel's name lists).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pt2kit.opaque import opaque_wrapper
from minifier.capture.blame import ORIGINS, TRAIL, blamed_nodes, follow_kernels, kernel_in_trail, kernel_in_traceback, write_origins
from pt2kit.seams.kernel_origins import ops_in_kernel_name

GENERATED = """\
def call(args):
    buf0, buf1 = args
    cpp_fused_relu_threshold_backward_view_6(buf0, buf1)
    return (buf1,)


def cpp_fused_relu_threshold_backward_view_6(a, b):
    raise RuntimeError("the kernel threw")
"""


def _generated_module(tmp_path: Path) -> Path:
    path = tmp_path / "cgenerated.py"
    path.write_text(GENERATED)
    return path


def test_an_exception_raised_inside_a_kernel_call_names_the_kernel(tmp_path):
    path = _generated_module(tmp_path)
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    try:
        try:
            namespace["call"]([1, 2])
        except RuntimeError as inner:
            raise ValueError("wrapped by torch") from inner
    except ValueError as error:
        assert kernel_in_traceback(error) == "cpp_fused_relu_threshold_backward_view_6"
    try:
        raise KeyError("nothing to do with a kernel")
    except KeyError as error:
        assert kernel_in_traceback(error) is None


class _Compiled:
    """Stands in for Inductor's CompiledFxGraph: ``current_callable`` is the generated module's ``call``."""

    def __init__(self, namespace: dict) -> None:
        self.current_callable = namespace["call"]


def test_the_trail_names_the_kernel_entered_and_never_left(tmp_path):
    # follow_kernels wraps the kernels in the generated module's namespace: each writes
    # its name as it is entered and "-" as it returns, so a crash inside one leaves its
    # name last; unfollowing puts the kernels back, and a kernel that returned is not blamed
    path = _generated_module(tmp_path)
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    calls = []
    namespace["cpp_fused_relu_threshold_backward_view_6"] = lambda a, b: calls.append((a, b)) or "ran"
    namespace["cpp_fused_cos_7"] = lambda *a: os.kill(os.getpid(), 0)
    kernel = namespace["cpp_fused_relu_threshold_backward_view_6"]
    trail_path = tmp_path / TRAIL
    trail = os.open(trail_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    # (as the capture hands it over: inside pt2kit's own wrappers, which the trail looks through)
    unfollow = follow_kernels(trail, opaque_wrapper(print, opaque_wrapper(print, _Compiled(namespace))))
    assert namespace["call"]([1, 2]) == (2,) and calls == [(1, 2)]
    assert trail_path.read_text() == "cpp_fused_relu_threshold_backward_view_6\n-\n"
    assert kernel_in_trail(trail_path) is None  # it returned
    unfollow()
    assert namespace["cpp_fused_relu_threshold_backward_view_6"] is kernel
    os.write(trail, b"cpp_fused_cos_7\n")  # what a kernel that never returned leaves
    assert kernel_in_trail(trail_path) == "cpp_fused_cos_7"
    assert follow_kernels(trail, object())() is None  # not a compiled Inductor graph: nothing to follow
    os.close(trail)
    assert kernel_in_trail(tmp_path / "missing.txt") is None


def test_a_kernel_name_lists_the_ops_it_was_made_of():
    ops = {"relu", "view", "add", "native_layer_norm", "layer_norm", "_safe_softmax", "threshold_backward", "le"}
    assert ops_in_kernel_name("cpp_fused_relu_threshold_backward_view_6", ops) == {"relu", "threshold_backward", "view"}
    assert ops_in_kernel_name("cpp_fused__safe_softmax_clone_native_layer_norm_12", ops) == {"_safe_softmax", "native_layer_norm"}
    assert ops_in_kernel_name("triton_poi_fused_relu_0", ops) == set()


def test_blamed_nodes_are_the_kernels_own_when_known_else_the_first_node_of_each_op_it_lists(tmp_path):
    graph = tmp_path / "g0.forward" / "repro.py"
    graph.parent.mkdir()
    nodes = ["view", "relu", "le", "view_1", "relu_1", "le_1", "add"]
    aten = {"view": "view", "relu": "relu", "le": "threshold_backward", "view_1": "view", "relu_1": "relu", "le_1": "threshold_backward", "add": "add"}
    write_origins(graph.parent, {"cpp_fused_relu_threshold_backward_view_1": ["view_1", "relu_1", "le_1", "gone_from_the_graph"]}, aten)
    assert blamed_nodes("cpp_fused_relu_threshold_backward_view_1", graph, nodes) == ["view_1", "relu_1", "le_1"]
    # served from Inductor's cache: no kernel was written in this run, its name still lists its ops
    assert blamed_nodes("cpp_fused_relu_threshold_backward_view_6", graph, nodes) == ["view", "relu", "le"]
    assert blamed_nodes("cpp_fused_tanh_2", graph, nodes) == []
    assert blamed_nodes(None, graph, nodes) == []
    (graph.parent / ORIGINS).write_text("{not json")
    assert blamed_nodes("cpp_fused_relu_threshold_backward_view_1", graph, nodes) == []


# --------------------------------------------------------------------------- #
# Real Inductor (slow)
# --------------------------------------------------------------------------- #

PROGRAM = """
import torch
import torch._inductor.config
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {mode!r}

def f(x, w):
    y = torch.sin(x @ w) * 2
    for _ in range(12):
        y = torch.tanh(y @ w + 1).exp().clamp(max=3)
    y = torch.relu(y @ w + 0.5)
    return (y.cos() * 3).sum(dim=0)

if __name__ == "__main__":
    torch.manual_seed(0)
    x, w = torch.randn(64, 64), torch.randn(64, 64, requires_grad=True)
    out = torch.compile(f)(x, w)
    out.sum().backward()
    print(out.sum().item())
"""


def _minify(script: Path, cache: Path) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--json", "--out", str(script.parent / "runs"), str(script)],
        capture_output=True, text=True, timeout=1500, cwd=script.parent, env=env,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert done.returncode == 0, (report, done.stderr[-3000:])
    return report


def _reduction_steps(report: dict) -> list[str]:
    return [s["step"] for s in report["timeline"] if " queries · " in s["step"]]


@pytest.mark.slow
def test_a_cpp_compile_error_is_blamed_on_its_kernels_nodes_and_asked_about_first(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(PROGRAM.format(mode="compile_error")))
    report = _minify(script, tmp_path / "cache")  # a cache of its own: the failing compile writes its kernels
    assert report["kernel"] and "relu" in report["kernel"], report["kernel"]
    assert report["ops_after"] == ["aten.relu.default"]
    steps = _reduction_steps(report)
    assert steps[0].startswith("follow_blame"), steps
    first = int(steps[0].rsplit("· ", 1)[1].split()[0])
    assert first <= 8 and 8 * first < report["nodes_before"], (first, report["nodes_before"])  # a part of the kernel: its relu and what fused with it
    assert not any(step.startswith("sample_op_kinds") for step in steps), steps  # the blamed nodes failed alone


@pytest.mark.slow
def test_an_abort_in_a_cached_graph_is_blamed_by_the_ops_its_kernel_name_lists(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(PROGRAM.format(mode="runtime_error")))
    cache = tmp_path / "cache"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                           env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PT2KIT_AUTOLOAD": "0"})
    assert plain.returncode == -6, plain.stderr[-2000:]  # the program alone aborts (and leaves its graph in the cache)
    report = _minify(script, cache)
    assert report["failure"]["kind"] == "crash"
    assert report["kernel"] and "relu" in report["kernel"], report["kernel"]
    assert report["kernel"] in (Path(report["run_dir"]) / "captured" / TRAIL).read_text().split()[-1:]  # entered, never left
    assert report["ops_after"] == ["aten.relu.default"]
    assert _reduction_steps(report)[0].startswith("follow_blame")
