"""A compile made unsound by a wrong static decision, the way pytorch#169602 made one.

The planted bug (pt2kit's test seam) gives ``x % 2`` the value range [0, 0], so dynamo decides
``x.shape[0] % 2 == 0`` *statically*: no guard is installed, and the graph traced at size 4
(the ``x * 2`` branch) is reused at size 3, where eager takes ``x + 1``.

    python -m validation guards --confirm examples/validation/planted_static_decision.py
"""
import torch

from pt2kit.seams.shape_env_faults import wrong_mod_bounds


def parity(x):
    if x.shape[0] % 2 == 0:
        return x * 2
    return x + 1


if __name__ == "__main__":
    compiled = torch.compile(parity, dynamic=True, backend="eager")
    with wrong_mod_bounds(2):
        compiled(torch.randn(4))
    x = torch.randn(3)
    print("eager", parity(x), "compiled", compiled(x))
