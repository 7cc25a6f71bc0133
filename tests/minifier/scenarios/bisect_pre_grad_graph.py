"""CPU port of test/dynamo/test_compiler_bisector.py::TestCompilerBisector::test_bisect_pre_grad_graph.

A custom backend *defined in the program* (a ``MyBackend`` instance: not registered,
not importable by name) splits the dynamo graph in two and compiles each part with
``torch._inductor.standalone_compile``, while Inductor's C++ relu accuracy bug is on
(upstream uses Triton's; ``config.patch`` around the call, as upstream). The program
has no ``if __name__ == "__main__":`` (importing it to get the backend runs
the whole program again). Upstream's bisector finds backend ``inductor``, subsystem
``pre_grad_graph``.
Expected from pt2kit (``minify run --accuracy``): an accuracy failure in the custom
backend, minified to the relu, with a repro that carries the backend (or says what
the user must add) and no machine paths.
"""
import torch
from torch._inductor import config

config.test_configs.bisect_pre_grad_graph = True
config.test_configs.bisect_keep_custom_backend_for_inductor = True


def f(x):
    for _ in range(5):
        x = x + 1
    return x.relu()


class MyBackend:
    def __call__(self, gm, example_inputs):
        node_idx = 0

        def node_to_graph_id(node):
            nonlocal node_idx
            out = 0 if node_idx < 3 else 1
            node_idx += 1
            return out

        split_gm = torch.fx.passes.split_module.split_module(gm, None, node_to_graph_id, keep_original_order=True)

        for name, submod in split_gm.named_modules():
            if "submod_" in name:
                # the test case is simple enough that using
                # the original example_inputs works for sub
                # module
                submod.forward = torch._inductor.standalone_compile(
                    submod,
                    example_inputs,
                    dynamic_shapes="from_example_inputs",
                    options={},
                )

        return split_gm


def test_fn():
    torch._dynamo.reset()

    x = torch.randn(1024, device="cpu")
    with config.patch("cpp.inject_relu_bug_TESTING_ONLY", "accuracy"):
        opt_f = torch.compile(f, backend=MyBackend())
        return torch.allclose(opt_f(x), f(x))


assert test_fn(), "compiled f differs from eager"
