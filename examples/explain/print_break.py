"""A `print` inside a compiled function: one graph break, at the print.

Run: python -m explain examples/explain/print_break.py
(`backend="eager"` keeps the example fast; any backend breaks the graph the same way.)
"""
import torch


def normalize(x):
    x = x - x.mean()
    print("normalized")  # graph break: print
    return x / x.std()


if __name__ == "__main__":
    compiled = torch.compile(normalize, backend="eager")
    compiled(torch.randn(8))
