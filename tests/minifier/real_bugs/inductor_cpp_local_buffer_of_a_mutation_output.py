"""Inductor's C++ outer-loop fusion promotes a buffer an index_put writes to a local one: KeyError.

A mask is built by writing zeros into a full tensor with advanced indexing (`index_put`),
then added before a softmax. Inductor fuses the softmax's loops with an outer loop and
promotes the mask's buffer to a kernel-local buffer, though the buffer is a mutation's
output, then looks it up by name: "InductorError: KeyError: 'buf1'". eager, aot_eager
and aot_eager_decomp_partition all work.

The aot graph's add of the input and the mask is not needed: the failure keeps when the
add reads the index_put alone (its second operand). The reducer tries each same-shaped
operand, not only the first, which is the graph input here. Found by a fresh-bug hunt.

Upstream: pytorch/pytorch#196570. Still fails on 2.15.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#196570",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.index_put.default", "aten.amax.default", "aten.sub.Tensor"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "CPP outer-loop local-buffer promotion of a mutation's output buffer (KeyError 'buf1'); an operand other than the first stands in",
}


def f(x):
    m = torch.full((8, 8), -10000.0)
    m[torch.arange(8).unsqueeze(0), torch.arange(8).unsqueeze(1)] = 0
    return torch.softmax(x + m, dim=-1)


x = torch.randn(8, 8)
eager = f(x)
compiled = torch.compile(f)(x)
torch.testing.assert_close(compiled, eager)
