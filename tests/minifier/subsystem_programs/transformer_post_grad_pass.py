"""A real model (a transformer encoder layer) under a library's post-grad pass that is wrong.

The pass, registered as serving stacks register theirs, turns the feed-forward's relu
into abs: the compiled layer computes something else than eager. Inductor's own
pieces are right; the bisector's ``post_grad_passes`` subsystem holds the bug, and
``torch._inductor.config.disabled_passes`` turns that one pass off.
"""
import hashlib

import torch
import torch._inductor.config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass


class ReluToAbs(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.nodes:
            if node.target == torch.ops.aten.relu.default:
                node.target = torch.ops.aten.abs.default

    def uuid(self):
        return hashlib.sha256(open(__file__, "rb").read()).hexdigest()


inductor_config.post_grad_custom_post_pass = ReluToAbs()

torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
x = torch.randn(2, 6, 32)
torch.testing.assert_close(torch.compile(layer)(x), layer(x))
