"""Any pointwise op on flex_attention's output breaks Inductor's CPU flex-attention template.

Inductor fuses the op (here `* 2`; `.relu()` or a cast do the same) into its C++
flex-attention template as an epilogue, which the template then refuses:
"NotImplementedError: Unsupported for `epilogue_nodes` in CppFlexAttentionTemplate".
flex_attention alone compiles; eager, aot_eager and aot_eager_decomp_partition all work.
Fixed in 2.15.

The graph holds the flex_attention higher-order op with its score_mod and mask_mod
bodies. Called eagerly (the reference below), flex_attention compiles a wrapper of its
own (`flex_attention.<locals>._flex_attention_hop_wrapper`): that graph is torch's, not
the program's. pt2kit minifies the aot graph to the op, its output and the multiply.

Upstream: none found (searched: "Unsupported for epilogue_nodes CppFlexAttentionTemplate",
"flex_attention cpu epilogue inductor"). Found by a fresh-bug hunt, not by the code.
"""
import torch
from torch.nn.attention.flex_attention import flex_attention

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["torch.ops.higher_order.flex_attention", "operator.getitem", "aten.mul.Tensor"],
    "exception": "NotImplementedError",
    "fails_on_2_15": False,
    "notes": "a pointwise epilogue fused into the CPU flex-attention template (NotImplementedError); torch's own eager flex wrapper is no graph of the program",
}


def fn(q, k, v):
    return flex_attention(q, k, v) * 2


torch.manual_seed(0)
q, k, v = (torch.randn(1, 2, 64, 32) for _ in range(3))
eager = fn(q, k, v)
compiled = torch.compile(fn)(q, k, v)
torch.testing.assert_close(compiled, eager)
