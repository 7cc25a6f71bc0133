"""A BERT forward and backward (random weights, from a config) whose compiled relu aborts at run time."""

import torch
import torch._inductor.config as inductor_config
from transformers import BertConfig, BertModel

inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"

if __name__ == "__main__":
    torch.manual_seed(0)
    config = BertConfig(
        num_hidden_layers=2,
        num_attention_heads=2,
        hidden_size=64,
        intermediate_size=128,
        vocab_size=128,
        hidden_act="relu",
    )
    model = BertModel(config)
    ids = torch.randint(0, 128, (2, 16))
    out = torch.compile(model)(input_ids=ids).last_hidden_state
    out.sum().backward()
    print(out.sum().item())
