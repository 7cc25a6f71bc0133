"""A 30-layer MLP training step (Linear, LayerNorm, ReLU; SGD) with Inductor's planted relu bug.

The deep, plain case of issue 41: most of the program's time is Inductor compiling one long
forward and its backward, so the program's own time to fail is long beside the failing op.
"""

import torch
import torch._inductor.config as inductor_config

inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


def mlp(width: int = 64, depth: int = 30) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 1)
    loss = torch.nn.functional.mse_loss(torch.compile(model)(x), y)
    loss.backward()
    optimizer.step()
    print(loss.item())
