"""`.item()` breaks the graph, and the code after the break is compiled for the number it returned.

Each call returns another number, and the batch grows: the rest of `forward` recompiles.
explain names what changed in your words (`h.abs().max().item()`, `h`), not dynamo's.

Run: python -m explain examples/explain/item_recompile.py
"""

import torch


class Normalize(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        scale = h.abs().max().item()  # graph break: .item()
        return h / scale


if __name__ == "__main__":
    model = torch.compile(Normalize(), backend="eager")
    for batch in (2, 4):
        model(torch.randn(batch, 8))  # recompile: a new batch size and a new scale
