"""`torch.rand(n, dtype=torch.bfloat16)` under Inductor returns values equal to 1.0.

`torch.rand` lies in [0, 1), and eager never returns 1.0. Inductor's own generator draws float32 and
rounds to bfloat16, so draws above 1 - 2**-9 become exactly 1.0 (199 of 100,000 here); a bucket index
made from them runs one past the last bucket. float16 has it too. With
`torch._inductor.config.fallback_random = True` (Inductor draws eager's numbers) the program passes.

What made it hard: no value can show it. Compared with eager's draws, Inductor's are all different,
bug or no bug, and pt2kit's repro of `torch.rand` alone "failed" (it would fail with the bug fixed).
An accuracy check now compiles a graph that draws random numbers with `fallback_random`, where its
values compare, so this graph passes; exit 5 then runs the program once with it and names Inductor's
own random numbers. Found by a fresh-bug hunt.

Upstream: none found (own program)
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["torch.rand"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "exit5": "the bug is in Inductor's own random numbers",
}


def sample_buckets(n, nbuckets):
    u = torch.rand(n, dtype=torch.bfloat16)
    return u, (u.float() * nbuckets).long()


if __name__ == "__main__":
    torch.manual_seed(0)
    u, idx = torch.compile(sample_buckets)(100000, 10)
    assert u.max() < 1, f"torch.rand returned {int((u >= 1).sum())} values equal to 1.0"
    assert idx.max() < 10, f"bucket index {int(idx.max())} out of range"
    print("ok")
