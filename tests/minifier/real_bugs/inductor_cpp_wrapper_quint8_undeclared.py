"""With cpp_wrapper=True, a quantize_per_tensor/dequantize pair fails to compile (C++ error).

Simulating int8 activations with `torch.quantize_per_tensor(...).dequantize()` works in
eager and with the default (Python-wrapper) Inductor.  With
`torch._inductor.config.cpp_wrapper = True` Inductor generates a C++ wrapper that
allocates/handles the intermediate quint8 tensor via `aoti_torch_dtype_quint8()`, which
does not exist in the AOTI shim headers, so g++ fails:
"error: 'aoti_torch_dtype_quint8' was not declared in this scope; did you mean
'aoti_torch_dtype_uint8'?" -> InductorError: CppCompileError.

Upstream: https://github.com/pytorch/pytorch/issues/183401
"""
import torch
import torch._inductor.config as inductor_config

CASE = {
    "upstream": "pytorch/pytorch#183401",
    "kind": "compile_error",
    "stage": "inductor",
    "ops": ["aten.quantize_per_tensor.default", "aten.dequantize.self"],
    "exception": "InductorError",
    "fails_on_2_15": True,
    "notes": "cpp_wrapper=True only; generated wrapper references missing aoti_torch_dtype_quint8 (CppCompileError)",
}

inductor_config.cpp_wrapper = True


class FakeQuantMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        q = torch.quantize_per_tensor(h, 0.05, 0, torch.quint8)   # simulate uint8 activations
        return self.fc2(q.dequantize())


torch.manual_seed(0)
model = FakeQuantMLP().eval()
x = torch.randn(4, 16)

with torch.no_grad():
    print("eager:", model(x).sum().item())
    print("compiled:", torch.compile(model)(x).sum().item())
