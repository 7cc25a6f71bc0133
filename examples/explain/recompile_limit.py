"""A recompile limit of 2, hit by a third dtype: that call (and the next) run eagerly.

Run: python -m explain examples/explain/recompile_limit.py
"""
import torch


def double(x):
    return x * 2


if __name__ == "__main__":
    torch._dynamo.config.recompile_limit = 2  # (torch 2.13 on also takes torch.compile(..., recompile_limit=2))
    compiled = torch.compile(double, backend="eager")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        compiled(torch.ones(4, dtype=dtype))  # the float16 call hits the limit
