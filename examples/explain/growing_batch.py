"""A batch size that grows from call to call: dynamo recompiles for the new size.

Run: python -m explain examples/explain/growing_batch.py
"""
import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(16, 32)
        self.out = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


if __name__ == "__main__":
    model = torch.compile(MLP(), backend="eager")
    for batch in (2, 4, 8, 16):
        model(torch.randn(batch, 16))  # recompile: the batch size grows
