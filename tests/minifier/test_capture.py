"""Capture: the user's definitions and patches a repro carries, and the capture's event log."""

import torch

from minifier.unit.case import GraphId


# --------------------------------------------------------------------------- #
# Carrying the user's definitions
# --------------------------------------------------------------------------- #

SCRIPT_WITH_A_LIBRARY = '''
import torch
from torch.library import Library
test_ns = "_pt2kit_slice"
lib = Library(test_ns, "FRAGMENT")
lib.define("foo(Tensor a) -> Tensor")
def foo_impl(a):
    return a * 2
lib.impl("foo", foo_impl, "CPU")
model = torch.nn.Linear(2, 2)
print(torch.ops._pt2kit_slice.foo(torch.ones(2)))
'''


def test_a_custom_op_whose_namespace_is_in_a_variable_is_carried_with_its_library():
    from minifier.capture.extract import slice_script

    carried = slice_script(SCRIPT_WITH_A_LIBRARY, (), ["_pt2kit_slice"])
    assert 'lib = Library(test_ns, "FRAGMENT")' in carried and 'lib.impl("foo", foo_impl, "CPU")' in carried
    assert "def foo_impl" in carried and "model =" not in carried and "print(" not in carried
    namespace: dict = {}
    exec(compile(carried, "<carried>", "exec"), namespace)  # the op exists after the slice alone runs
    assert torch.equal(torch.ops._pt2kit_slice.foo(torch.ones(2)), torch.full((2,), 2.0))



SCRIPT_WITH_A_CUSTOM_OP_AND_ITS_USE = '''
import torch


@torch.library.custom_op("_pt2kit_slice_use::reverse_into", mutates_args=("dst",))
def reverse_into(src: torch.Tensor, dst: torch.Tensor) -> None:
    dst.copy_(src.flip(0))


def f(x):
    reverse_into(x.clone(), x)
    return x * 2.0


x = torch.arange(8.0)
eager = f(x.clone())
compiled = torch.compile(f)(x.clone())
'''


def test_a_custom_op_is_carried_without_the_program_that_calls_it():
    # pytorch#198031's program: what calls the op (its function, the eager run, the compile) is the user's
    # program; carried, the repro compiled the whole program as it was imported
    from minifier.capture.extract import slice_script

    carried = slice_script(SCRIPT_WITH_A_CUSTOM_OP_AND_ITS_USE, (), ["_pt2kit_slice_use"])
    assert "def reverse_into" in carried and "custom_op" in carried
    assert "def f" not in carried and "torch.compile" not in carried and "eager =" not in carried, carried


def test_a_table_entry_torch_keeps_for_a_custom_op_is_carried_with_it():
    # pytorch#190908: the op is effectful only once registered in torch's table, by a call of torch's own
    # that names the op as torch.ops.ns.op; a function that calls it the same way is still the program
    from minifier.capture.extract import slice_script

    registration = (
        "torch._higher_order_ops.effects._register_effectful_op(\n"
        "    torch.ops._pt2kit_slice_use.reverse_into.default, torch._higher_order_ops.effects._EffectType.ORDERED)\n"
    )
    script = SCRIPT_WITH_A_CUSTOM_OP_AND_ITS_USE.replace("\n\ndef f(x):", f"\n\n{registration}\n\ndef f(x):")
    script = script.replace("    reverse_into(x.clone(), x)", "    torch.ops._pt2kit_slice_use.reverse_into(x.clone(), x)")
    # the program checking the op's answer calls torch too, but calls the op and reads its own values
    script += "torch.testing.assert_close(torch.ops._pt2kit_slice_use.reverse_into(x, eager), compiled)\n"
    carried = slice_script(script, (), ["_pt2kit_slice_use"])
    assert registration in carried and "def reverse_into" in carried, carried
    assert "def f" not in carried and "torch.compile" not in carried and "assert_close" not in carried, carried

def test_carried_definitions_that_set_config_leave_the_reading_process_config_as_it_was():
    """A script's pass class is carried with the line that assigns it to Inductor's config; reading the repro (pt2kit's
    own process, a query's child, a test calling pt2kit in-process) binds the class but sets no config: the case's
    apply_config() does."""
    import torch._inductor.config as inductor_config

    from minifier.repro.files import exec_repro

    block = (
        "class PassCarriedForTheConfigTest:\n"
        "    def __call__(self, graph):\n"
        "        pass\n"
        "\n"
        "\n"
        "torch._inductor.config.post_grad_custom_post_pass = PassCarriedForTheConfigTest()"
    )
    source = f"import torch\nimport torch._inductor.config\n\n{block}\n\nREAD = True\n"
    before = inductor_config.post_grad_custom_post_pass
    namespace = exec_repro(source, meta={"definitions": block})
    assert namespace["READ"] and isinstance(namespace["PassCarriedForTheConfigTest"], type)
    assert inductor_config.post_grad_custom_post_pass is before


def test_carried_definitions_are_a_module_dynamo_can_import_when_it_inlines_their_code():
    # pytorch#176679's subclass: dynamo inlines its __torch_function__, and to read the function's globals it
    # imports the module the function says it is from: the carried definitions' own
    import sys

    from minifier.capture.context import class_reference
    from minifier.repro.files import exec_repro
    from pt2kit.script import is_carried_module, module_import_spec

    block = (
        "class ScaledForTheModuleTest(torch.Tensor):\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        raw = super().__torch_function__(func, types, args, kwargs or {})\n"
        "        return raw * 2.0 if func is torch.add else raw"
    )
    namespace = exec_repro(f"import torch\n\n{block}\n", meta={"definitions": block})
    cls = namespace["ScaledForTheModuleTest"]
    assert is_carried_module(cls.__module__) and sys.modules[cls.__module__].ScaledForTheModuleTest is cls
    a = torch.ones(2).as_subclass(cls)
    torch._dynamo.reset()
    out = torch.compile(lambda x, y: torch.add(x, y), backend="eager", fullgraph=True)(a, a)
    assert torch.equal(out.as_subclass(torch.Tensor), torch.full((2,), 4.0))
    # the script's own code, run again: never a module for a repro to import, and named as the script names it
    assert module_import_spec(cls.__module__) is None and class_reference(cls) == "ScaledForTheModuleTest"


def test_every_capture_event_reads_back_as_it_was_written_and_a_cut_line_is_skipped(tmp_path):
    from minifier.capture import events
    from minifier.capture.result import read_capture
    from pt2kit.signature import Signature

    boom = Signature("compile_error", "RuntimeError", "planted: boom")
    written = [
        events.GraphSaved(0, str(tmp_path / "g0" / "repro.py"), {"name": "f"}, 3, "eager", ["/src"]),
        events.GraphNotSaved(1, "ObjNotFoundError: not found as torch._dynamo.variables.builtin._f"),
        events.AotGraphSaved(0, "forward", str(tmp_path / "g0.forward" / "repro.py")),
        events.Running("g0.forward"),
        events.Ran("g0.forward"),
        events.AotGraphSaved(0, "forward", str(tmp_path / "g0.forward" / "repro.py"), real=True),
        events.AotInputsNotSaved(None, False, 10**9),
        events.Judged("g0.forward", boom, "RMSE 1.0"),
        events.Judged("g1.forward", error="ValueError: no verdict"),
        events.Patches({"torch.sin": "my_sin"}, False),
        events.StateMissing(["lowerings[aten.sin]"]),
        events.Unrecoverable(0, "a lambda"),
        events.FrameLifted(None, error="TypeError: no"),
        events.Failed(boom, "details", 1, where="backend", graph="g0.forward", kernel="cpp_fused_0"),
        events.Exited("3", 1),
        events.Finished(1),
        events.UnknownBackendNamed("no backend 'x'"),
    ]
    assert {type(e) for e in written} == set(events.Event.__args__)  # every kind is exercised
    lines = [events.to_line(e) for e in written]
    assert [events.parse_event(line) for line in lines] == written
    cut = lines[-1][: len(lines[-1]) // 2]
    assert events.parse_events([*lines, cut, '{"event": "from_the_future"}\n']) == written

    (tmp_path / "events.jsonl").write_text("".join(lines[:-3]) + cut)  # a crash mid-write
    read = read_capture(tmp_path)
    assert read.graph_paths == [tmp_path / "g0" / "repro.py"] and read.roots == ["/src"]
    assert read.failure is not None and read.failure.signature == boom and read.failed_graph == "g0.forward"
    assert read.kernel == "cpp_fused_0" and read.ran == {"g0.forward"}
    assert read.judged == {"g0.forward": read.judged["g0.forward"]} and read.judged["g0.forward"].details == "RMSE 1.0"
    assert [g.real for g in read.aot[0]] == [True]  # the latest version of a graph saved twice
    assert read.patches == {"torch.sin": "my_sin"} and not read.patches_carried
    assert read.state_missing == ["lowerings[aten.sin]"] and read.unrecoverable == ["a lambda"]
    assert read.failed_id == GraphId(0, "forward")
    # a graph pt2kit could not name is known by its label, which is no graph id
    (tmp_path / "events.jsonl").write_text(events.to_line(events.Failed(boom, graph="a inference graph")))
    assert read_capture(tmp_path).failed_graph == "a inference graph" and read_capture(tmp_path).failed_id is None


def test_a_patch_no_repro_can_carry_is_named_wherever_it_sits(monkeypatch):
    # The script's own functions, installed in torch: a named top-level one is carried as
    # source; a lambda or a nested function has no name to slice out of the script, in
    # a compiler table or as a class attribute alike, and is named in state_missing.
    import torch._inductor.codegen.cpp as cpp
    import torch._inductor.lowering as lowering
    from minifier.capture.patches import program_state

    script: dict = {"__name__": "__main__"}
    exec(
        "def doubled(x):\n    return f'{x} * 2'\n"
        "def outer():\n    def inner(x):\n        return x\n    return inner\n"
        "one = lambda x: f'std::max({x}, 1)'\n",
        script,
    )
    monkeypatch.setattr(cpp.CppOverrides, "relu", staticmethod(script["one"]), raising=False)
    monkeypatch.setattr(cpp.CppOverrides, "abs", staticmethod(script["doubled"]), raising=False)
    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.neg.default, script["outer"]())
    monkeypatch.setattr("minifier.capture.patches.script_source", lambda: None)  # (exec'd: no file to slice)
    state = program_state()
    assert sorted(state.missing) == [
        "torch._inductor.codegen.cpp.CppOverrides.relu = __main__.<lambda>",
        "torch._inductor.lowering.lowerings[aten.neg.default] = __main__.outer.<locals>.inner",
    ]
    assert state.patches == {"torch._inductor.codegen.cpp.CppOverrides.abs": "doubled"}


EAGER_COND_UNDER_VMAP = """
import torch

def per_row(r):
    return torch.cond(r.sum() > 0, lambda b: b.sin(), lambda b: b * 3, (r,))

if __name__ == "__main__":
    print(torch.vmap(per_row)(torch.randn(6, 4)).sum().item())
    print(torch.compile(lambda t: t.cos() + 1, backend="eager")(torch.randn(4)).sum().item())
"""


def test_an_eager_cond_under_vmap_compiles_itself_with_eager_under_the_capture(tmp_path, in_process):
    """First, do no harm (hunt j): ``torch.cond`` run eagerly compiles itself with ``backend="eager"``, which
    dynamo allows under ``vmap`` only when the backend is ``eager`` itself, read off ``torch.compile``'s wrapper
    (``compiler_fn``). pt2kit's wrapper hid it, and a healthy program failed under the capture with
    "Unsupported functorch tracing attempt"; it now runs to the end, and there is no failure to minify."""
    import pytest

    from pt2kit.errors import NoFailure
    from support.programs import minified

    script = tmp_path / "eager_cond.py"
    script.write_text(EAGER_COND_UNDER_VMAP)
    with pytest.raises(NoFailure):
        minified(in_process, script)
