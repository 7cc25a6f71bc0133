"""Inductor's `empty_like` ignores `torch.use_deterministic_algorithms(True)`.

With deterministic algorithms on (and `torch.utils.deterministic.fill_uninitialized_memory`,
its default), eager fills the memory `empty_like` returns with NaN, so a program never reads
garbage. Inductor's lowering of `aten.empty.memory_format` allocates and returns the memory as
it is: the program's state outside the graph (a global flag, set once at the top) is what the
repro must carry. eager, aot_eager and aot_eager_decomp_partition give NaN. Found by a
fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/174386
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#174386",
    "kind": "accuracy",
    "stage": "inductor",
    "ops": ["aten.empty.memory_format"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "subsystem": ["lowerings", "aten.empty.memory_format"],
    "notes": "state outside the graph: deterministic algorithms' fill of uninitialized memory",
}

torch.use_deterministic_algorithms(True)


def fn(x):
    return torch.empty_like(x)


x = torch.randn(4, 4)
out1 = fn(x)
out2 = torch.compile(fn)(x)
print(out1, out2)
torch.testing.assert_close(out1, out2, equal_nan=True)
