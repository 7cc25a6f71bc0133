"""A GPT-2 training step (random weights, from a config), compiled with Inductor's planted relu bug.

``python gpt2_train.py [LAYERS] [MODE]``: LAYERS transformer blocks (default 4); MODE is
torch's ``inject_relu_bug_TESTING_ONLY`` (default compile_error). The aot forward graph
grows with LAYERS (about 120 op nodes per block), for the cost curve.
"""

import sys

import torch
import torch._inductor.config as inductor_config
from transformers import GPT2Config, GPT2LMHeadModel

layers = int(sys.argv[1]) if len(sys.argv) > 1 else 4
inductor_config.cpp.inject_relu_bug_TESTING_ONLY = sys.argv[2] if len(sys.argv) > 2 else "compile_error"

if __name__ == "__main__":
    torch.manual_seed(0)
    config = GPT2Config(n_layer=layers, n_head=2, n_embd=64, vocab_size=128, n_positions=64, activation_function="relu")
    model = GPT2LMHeadModel(config)
    step = torch.compile(model)
    ids = torch.randint(0, 128, (2, 16))
    out = step(input_ids=ids, labels=ids)
    out.loss.backward()
    print(out.loss.item())
