"""Port of test/dynamo/test_minifier.py::MinifierTests::test_cpu_device_module_after_dynamo (CPU).

Upstream: a module with Linear layers, parameters and buffers on "device" and on CPU
(here both are CPU), called from a compiled function that ends in ``torch.relu``;
torch's ``relu_compile_error_TESTING_ONLY`` backend raises ``ReluCompileError`` on it.
The graph holds ``call_module`` nodes, parameters and buffers. Upstream asserts the
launcher's module and that the repro raises ``ReluCompileError``.
Expected from pt2kit (``minify run --after dynamo``): minified to ``torch.relu``.
"""
import os

import torch
import torch._dynamo
import torch._inductor.config

# What upstream's MinifierTestBase puts at the top of every test program.
torch._inductor.config.pattern_matcher = False
torch._inductor.config.compile_threads = 1
torch._inductor.config.cpp.vec_isa_ok = False
torch._dynamo.config.repro_after = "dynamo"
torch._dynamo.config.repro_level = 2
torch._dynamo.config.debug_dir_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_debug")

device = "cpu"


class CpuDeviceModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.m_x = torch.nn.Linear(20, 20).to(device)
        self.m_y = torch.nn.Linear(20, 20)
        self.p_x = torch.nn.Parameter(torch.randn(20, 20).to(device))
        self.p_y = torch.nn.Parameter(torch.randn(20, 20))
        self.b_x = torch.nn.Buffer(torch.ones(20, 20).to(device))
        self.b_y = torch.nn.Buffer(torch.ones(20, 20))

    def forward(self, x, y):
        return self.m_x(x) + self.p_x + self.b_x, self.m_y(y) + self.p_y + self.b_y


mod = CpuDeviceModule()


@torch.compile(backend="relu_compile_error_TESTING_ONLY")
def inner(x1, y1):
    x2 = torch.randn(20, 20).to(device)
    y2 = torch.randn(20, 20)
    x3, y3 = mod(x1 + x2, y1 + y2)
    return torch.relu(x3.cpu() + y3)


inner(torch.randn(20, 20).to(device), torch.randn(20, 20))
