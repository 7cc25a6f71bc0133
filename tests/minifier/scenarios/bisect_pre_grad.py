"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_pre_grad.

A custom pre-grad pass (``torch._inductor.config.pre_grad_custom_pass``, a
``CustomGraphPass`` instance: not a literal config value) rewrites ``x + 1`` into
``x + 2``, so the compiled ``foo`` disagrees with eager. Upstream's bisector finds
backend ``inductor``, subsystem ``pre_grad_passes`` and ``pre_grad_custom_pass`` in its
debug info. The failure needs the pass: a repro without it does not fail (a
non-literal config dropped silently would lose the bug). The pass is importable (``if __name__``).
Expected from pt2kit (``minify run --accuracy``): stage ``inductor``, minified to the add,
and a repro that still applies the pass.
"""
import operator

import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphPass


class CustomPrePass(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph):
        nodes = graph.find_nodes(op="call_function", target=operator.add)
        if len(nodes) != 1:
            raise AssertionError(f"Expected 1 node, got {len(nodes)}")
        args = list(nodes[0].args)
        args[1] = 2
        nodes[0].args = tuple(args)

    def uuid(self):
        return hash("TestCompilerBisector.test_pre_grad.pass_class")


def foo(x):
    return x + 1


def test_fn():
    torch._dynamo.reset()

    inp = torch.rand([10])

    out = foo(inp)
    out_c = torch.compile(foo)(inp)

    return torch.allclose(out, out_c)


if __name__ == "__main__":
    with config.patch(pre_grad_custom_pass=CustomPrePass()):
        assert test_fn(), "compiled foo differs from eager"
