"""A ResNet training step (transformers' ResNet, random weights, from a config) with Inductor's planted relu bug."""

import torch
import torch._inductor.config as inductor_config
from transformers import ResNetConfig, ResNetModel

inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"

if __name__ == "__main__":
    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic")
    model = ResNetModel(config)
    pixels = torch.randn(2, 3, 32, 32)
    out = torch.compile(model)(pixel_values=pixels).pooler_output
    out.sum().backward()
    print(out.sum().item())
