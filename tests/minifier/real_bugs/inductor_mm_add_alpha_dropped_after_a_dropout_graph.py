"""`torch.add(h @ w, b, alpha=2.5)` under Inductor adds `b` once: its mm-plus-bias rewrite drops `alpha`.

The program first compiles a dropout (a graph of its own), then the head. The head's graph is wrong
at Inductor only (eager, aot_eager, aot_eager_decomp_partition are right). Fixed in 2.15.

What made it hard: under `--accuracy`, the dropout graph came first and was judged wrong at every
stage that takes Inductor's decompositions, whose random numbers are not eager's: pt2kit minified the
dropout to a repro that "failed" whatever the bug, and never reached the head. An accuracy check of a
graph that draws random numbers now compiles it with `fallback_random` (eager's draws, as torch's own
accuracy minifier does), and the program's own compiled run of it is judged on its shape and dtype
only. Found by fresh-bug hunts (the alpha rewrite, and dropout under `--accuracy`).

Upstream: none found (own program)
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.mm", "aten.add.Tensor"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
}


@torch.compile
def noisy(x):
    return torch.nn.functional.dropout(x, 0.5, training=True) * 2


@torch.compile
def head(h, w, b):
    return torch.add(h @ w, b, alpha=2.5)


if __name__ == "__main__":
    torch.manual_seed(0)
    x, w, b = torch.randn(8, 8), torch.randn(8, 8), torch.randn(8)
    h = noisy(x)
    out = head(h, w, b)
    torch.testing.assert_close(out, torch.add(h @ w, b, alpha=2.5))
    print("ok")
