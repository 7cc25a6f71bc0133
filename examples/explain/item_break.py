"""`.item()` turns a tensor into a Python number: one graph break, at the `.item()`.

Run: python -m explain examples/explain/item_break.py
"""
import torch


def scale_by_max(x):
    peak = x.abs().max().item()  # graph break: .item()
    return x / peak


if __name__ == "__main__":
    compiled = torch.compile(scale_by_max, backend="eager")
    compiled(torch.randn(16))
