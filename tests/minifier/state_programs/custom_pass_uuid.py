"""A custom post-grad pass (as a library registers one) whose uuid hashes its own file; the pass swaps sin for cos."""
import hashlib

import torch
import torch._inductor.config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass


class SinToCos(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.nodes:
            if node.target == torch.ops.aten.sin.default:
                node.target = torch.ops.aten.cos.default

    def uuid(self):
        return hashlib.sha256(open(__file__, "rb").read()).hexdigest()


inductor_config.post_grad_custom_post_pass = SinToCos()


def f(x):
    return (torch.sin(x) * 2).sum(dim=1)


torch.manual_seed(0)
x = torch.randn(8, 16)
torch.testing.assert_close(torch.compile(f)(x), f(x))
