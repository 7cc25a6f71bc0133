"""A complex constant with a negative zero part loses its sign in dynamo's graph code.

`x[0] = complex(-0.0, 0.0)` then `torch.angle(x)`: eager gives pi (the angle of -0+0j).
Dynamo's graph keeps the constant exactly, but FX writes the graph's `forward` with the
constant's `repr`, `(-0+0j)`, which Python reads as `0j`: the compiled program gives 0,
with every backend, `eager` included. A graph rebuilt from FX's code has the same lossy
constant, so its eager reference is wrong the same way and every stage "passed" (exit 5):
pt2kit now writes complex constants as `complex(-0.0, 0.0)` (`ExactComplex`). Found by a
fresh-bug hunt.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#197586",
    "kind": "accuracy",
    "stage": "eager",
    "ops": ["operator.setitem", "torch.angle"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "FX code generation writes complex constants with repr(): the sign of a zero part is lost",
}


class Model(torch.nn.Module):
    def forward(self, x):
        x[0] = complex(-0.0, 0.0)
        return torch.angle(x)


model = Model()
out_eager = model(torch.tensor([1 + 1j], dtype=torch.complex64))
out_compiled = torch.compile(model)(torch.tensor([1 + 1j], dtype=torch.complex64))
print(out_eager, out_compiled)
torch.testing.assert_close(out_compiled, out_eager)
