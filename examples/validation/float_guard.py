"""A guard on a Python float: Z3 has no exact model of floats, so the verdict is *incomplete* (exit 7).

    python -m validation guards examples/validation/float_guard.py
"""
import torch

torch._dynamo.config.specialize_float = False  # keep the float symbolic, so it gets guards


def scale(x, r: float):
    if r > 0.5:
        return x * r
    return x - r


if __name__ == "__main__":
    torch.compile(scale, dynamic=True, backend="eager")(torch.randn(4), 0.7)
