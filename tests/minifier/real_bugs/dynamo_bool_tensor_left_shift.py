"""Dynamo rejects `bool_tensor << int`, which eager computes (promoting to int64).

Eager `mask << 2` on a bool tensor type-promotes bool with the Python int to int64 and
returns 0/4.  Dynamo runs the op on FakeTensors while tracing, and the meta
implementation of lshift/rshift checks the *input* dtype before promotion, raising
"lshift: Expected input tensor to have an integral dtype. Got torch.bool".  Dynamo turns
that into TorchRuntimeError ("Dynamo failed to run FX node with fake tensors"), so the
program fails already with backend="eager".  Same for `>>`, and for int_tensor << bool_tensor.

Upstream: none found (searched: "torch.compile bool tensor left shift lshift Expected input
tensor to have an integral dtype", "meta lshift rshift bool torch.compile").  Related: the
closed PR https://github.com/pytorch/pytorch/pull/164064 ("Enable bool dtype for meta
lshift and rshift") targets the same meta-vs-eager mismatch; 2.13 does not have that fix.
"""
import torch

CASE = {
    "upstream": None,
    "kind": "compile_error",
    "stage": "eager",
    "ops": ["aten.__lshift__.Scalar"],
    "exception": "TorchRuntimeError",
    "fails_on_2_15": True,
    "notes": "meta for lshift requires integral input dtype before type promotion; eager promotes bool<<int to int64. Related closed PR pytorch/pytorch#164064",
}


def pack_flags(x):
    mask = x > 0
    bits = mask << 2            # bool << int -> int64 in eager
    return bits.sum(dim=1) + x.argmax(dim=1)


torch.manual_seed(0)
x = torch.randn(8, 5)

print("eager:", pack_flags(x))
print("compiled:", torch.compile(pack_flags, backend="eager")(x))
