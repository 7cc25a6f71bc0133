"""Small functions whose valid input sizes are worth knowing: try them with ``python -m validation sizes``.

    python -m validation sizes --fn examples/validation/shapes.py:view4 --ranks 1 --box 0:12
    python -m validation sizes --fn examples/validation/shapes.py:matmul --ranks 2,2 --box 0:4 --no-specialize --check-brute-force
    python -m validation sizes --fn examples/validation/shapes.py:view_by --ranks 1,1 --box 0:6 --merge
    python -m validation sizes --fn examples/validation/shapes.py:loop --ranks 1 --box 0:100

Run as a script it compiles two of them with dynamic shapes, so that
``python -m validation guards examples/validation/shapes.py`` has compiles to check (all sound).
"""
import torch


def view4(x):
    return x.view(-1, 4)


def matmul(x, y):
    return x @ y


def view_by(x, y):
    return x.view(y.shape[0], -1)


def loop(x):
    total = x.new_zeros(())
    for i in range(x.shape[0]):  # specializes on x.shape[0]: one graph per size
        total = total + x[i]
    return total


def nonzero_pairs(x):
    return x.nonzero().view(2, -1)  # valid or not depends on the values, not only the sizes


if __name__ == "__main__":
    compiled = torch.compile(view4, dynamic=True, backend="eager")
    for n in (8, 12, 16):
        compiled(torch.randn(n))
    torch.compile(matmul, dynamic=True, backend="eager")(torch.randn(3, 5), torch.randn(5, 2))
    print("done")
