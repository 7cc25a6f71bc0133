"""A view taken under `torch.inference_mode()` inside a compiled function breaks AOTAutograd.

Eager runs `with torch.inference_mode(): k.transpose(-2, -1)` on a normal tensor without
complaint.  Dynamo traces it fine (backend="eager" works), but AOTAutograd's
functionalization creates the view of a non-inference tensor while inference mode is
on and fails: "RuntimeError: Cannot set version_counter for inference tensor"
(aot_eager, aot_eager_decomp_partition and inductor all fail the same way).

Upstream: https://github.com/pytorch/pytorch/issues/180823
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#180823",
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["aten.view.default", "aten.transpose.int", "aten.matmul.default"],
    "exception": "BackendCompilerFailed",
    "fails_on_2_15": True,
    "notes": "view op traced under _enter_inference_mode inside the graph; functionalization cannot set version counter",
}


class Scores(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x):
        q = self.proj(x).view(2, 10, 4, 16).transpose(1, 2)
        k = x.view(2, 10, 4, 16).transpose(1, 2)
        with torch.inference_mode():
            kt = k.transpose(-2, -1)
        return (q @ kt).softmax(dim=-1)


torch.manual_seed(0)
model = Scores().eval()
x = torch.randn(2, 10, 64)

with torch.no_grad():
    print("eager:", model(x).shape)
    print("compiled:", torch.compile(model, backend="aot_eager")(x).shape)
