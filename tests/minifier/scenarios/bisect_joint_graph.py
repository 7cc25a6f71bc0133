"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_joint_graph.

A custom joint-graph pass (``torch._inductor.config.joint_custom_post_pass``, a
``CustomGraphPass`` instance) rewrites ``aten.add.Tensor(x, 1)`` into ``x + 2``, so the
compiled ``foo`` disagrees with eager. Upstream's bisector finds backend ``inductor``,
subsystem ``joint_graph_passes`` and ``joint_custom_post_pass`` in its debug info.
The pass is importable (``if __name__``).
Expected from pt2kit (``minify run --accuracy``): stage ``inductor``, minified to the add,
and a repro that still applies the pass.
"""
import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphPass

device_type = "cpu"


class CustomPostPass(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph):
        nodes = graph.find_nodes(op="call_function", target=torch.ops.aten.add.Tensor)
        if len(nodes) != 1:
            raise AssertionError(f"Expected 1 node, got {len(nodes)}")
        args = list(nodes[0].args)
        args[1] = 2
        nodes[0].args = tuple(args)

    def uuid(self):
        return hash("TestCompilerBisector.test_joint_graph.pass_class")


def foo(x):
    return x + 1


def test_fn():
    torch._dynamo.reset()

    inp = torch.rand([10], device=device_type)

    out = foo(inp)
    out_c = torch.compile(foo)(inp)

    return torch.allclose(out, out_c)


if __name__ == "__main__":
    with config.patch(joint_custom_post_pass=CustomPostPass()):
        assert test_fn(), "compiled foo differs from eager"
