"""One call that changes four things at once; TORCH_LOGS=recompiles names only the first.

Run: python -m explain examples/explain/many_guards.py
"""
import torch

OFFSET = 1


def affine(x, bias, n):
    return x * n + bias + OFFSET


if __name__ == "__main__":
    compiled = torch.compile(affine, backend="eager")
    compiled(torch.randn(4), torch.randn(4), 2)
    OFFSET = 5
    # x's dtype, bias's size, n and the global OFFSET all change:
    compiled(torch.randn(4, dtype=torch.float64), torch.randn(1), 3)  # recompile: four changes
