"""GPT-2 inference with a graph break after every block (a print in a forward hook), Inductor's planted relu bug."""

import torch
import torch._inductor.config as inductor_config
from transformers import GPT2Config, GPT2LMHeadModel

inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


def announce(module, args, output):
    print("block done")


if __name__ == "__main__":
    torch.manual_seed(0)
    config = GPT2Config(n_layer=3, n_head=2, n_embd=64, vocab_size=128, n_positions=64, activation_function="relu")
    model = GPT2LMHeadModel(config).eval()
    for block in model.transformer.h:
        block.register_forward_hook(announce)
    ids = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        print(torch.compile(model)(input_ids=ids).logits.sum())
