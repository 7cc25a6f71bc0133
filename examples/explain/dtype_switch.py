"""The same function called with float32, then float64: dynamo recompiles for the new dtype.

Run: python -m explain examples/explain/dtype_switch.py
"""
import torch


def gelu_ish(x):
    return x * torch.sigmoid(1.702 * x)


if __name__ == "__main__":
    compiled = torch.compile(gelu_ish, backend="eager")
    compiled(torch.randn(8))
    compiled(torch.randn(8, dtype=torch.float64))  # recompile: dtype switch
