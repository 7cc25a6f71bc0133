"""`torch.nan_to_num` on a complex tensor fails to compile (decomposition uses isneginf).

Eager `nan_to_num` supports complex inputs (it is applied to the real and imaginary
parts).  Under torch.compile, eager and aot_eager backends work, but with decompositions
enabled (aot_eager_decomp_partition, and therefore inductor) the `nan_to_num`
reference decomposition calls `torch.isneginf`/`isposinf`, which reject complex dtypes:
"RuntimeError: Complex dtype is not supported for isneginf, got dtype torch.complex64".

Upstream: https://github.com/pytorch/pytorch/issues/190275
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#190275",
    "kind": "compile_error",
    "stage": "aot_eager_decomp_partition",
    "ops": ["aten.nan_to_num.default"],
    "exception": "BackendCompilerFailed",
    "fails_on_2_15": False,
    "notes": "nan_to_num decomposition is real-only (isneginf/isposinf reject complex); wrapped as BackendCompilerFailed(RuntimeError)",
}


def clean_spectrum(sig):
    spec = torch.fft.fft(sig, dim=-1)
    spec = spec / spec.abs().amax(dim=-1, keepdim=True)
    spec = torch.nan_to_num(spec, nan=0.0, posinf=1.0, neginf=-1.0)
    return (spec * spec.conj()).real.sum(dim=-1)


torch.manual_seed(0)
sig = torch.randn(4, 32)
sig[1] = 0.0                      # an all-zero row makes 0/0 = nan in the spectrum

print("eager:", clean_spectrum(sig))
print("compiled:", torch.compile(clean_spectrum, backend="aot_eager_decomp_partition")(sig))
