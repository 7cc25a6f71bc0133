"""An `if` on a tensor's value: one graph break, at the `if`.

Run: python -m explain examples/explain/tensor_if.py
"""
import torch


def shrink_if_large(x):
    y = x * 2
    if y.abs().sum() > 10:  # graph break: data-dependent branch
        y = y / 10
    return y.relu()


if __name__ == "__main__":
    compiled = torch.compile(shrink_if_large, backend="eager")
    compiled(torch.randn(32))
