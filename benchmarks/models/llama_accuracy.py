"""Llama inference (random weights, from a config) with Inductor's planted relu accuracy bug."""

import torch
import torch._inductor.config as inductor_config
from transformers import LlamaConfig, LlamaForCausalLM

inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"

if __name__ == "__main__":
    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        hidden_size=64,
        intermediate_size=128,
        vocab_size=128,
        hidden_act="relu",
    )
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        got = torch.compile(model)(input_ids=ids).logits
        want = model(input_ids=ids).logits
    torch.testing.assert_close(got, want)
