"""A Python int argument that changes between calls: dynamo recompiles for the new value.

Run: python -m explain examples/explain/changing_int.py
"""
import torch


def shift(x, n):
    return x + n


if __name__ == "__main__":
    compiled = torch.compile(shift, backend="eager")
    x = torch.randn(4)
    for n in (1, 2, 3):
        compiled(x, n)  # recompile: n changes
