"""`x.add_(1)` on a 0-d float64 input: under torch.compile the write never reaches the caller's tensor.

A 0-d float64 CPU tensor passed in and written in place keeps its old value under aot_eager and
Inductor (a float32 one, or one of any other shape, is written). eager is right. Fixed in 2.15.
Found by `minify hunt` (seed 25): its judge compares the inputs after the run too.

Upstream: none found (searched: "torch.compile aot_eager in-place mutation of 0-d tensor input lost").
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["Tensor.add_"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "an input written in place, 0-d and float64: the write is lost",
}


def step(count):
    count.add_(1)
    return count.sin()


count = torch.tensor(-1.5, dtype=torch.float64)
torch.compile(step, backend="aot_eager")(count)
assert count.item() == -0.5, f"the compiled step left the input at {count.item()}, eager makes it -0.5"
