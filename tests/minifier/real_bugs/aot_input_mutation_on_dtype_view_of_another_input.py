"""Two inputs on one memory, float32 and int32: AOTAutograd refuses a write into one of them.

`f(x, y)` writes `x.add_(1)` and reads `y.sum()`, where `y = x.view(torch.int32)` reads x's
memory as int32 (a tensor of its own, no autograd view). AOTAutograd's handling of inputs
that alias raises "does not yet handle input mutations on views with different dtypes". With
backend="eager" the program runs to the end. The graph fails alone only when its inputs
share memory again with their own dtypes: made again as float32 memory, y was float32
and the graph passed alone (exit 5 blamed the runtime wrappers). The repro reads the
memory as int32 (`torch.empty(0, dtype=torch.int32).set_(x's storage)`): 2 nodes. Found
by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/194747 (open)
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#194747",
    "kind": "compile_error",
    "stage": "aot_eager",
    "ops": ["Tensor.add_", "Tensor.sum"],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "notes": "an input mutation where another input reads the same memory as another dtype (of the same size)",
}


def f(x, y):
    x.add_(1)
    return y.sum()


def make_inputs():
    b = torch.arange(8.0, dtype=torch.float32)
    return b, b.view(torch.int32)


expected = f(*make_inputs())
actual = torch.compile(f)(*make_inputs())
torch.testing.assert_close(actual, expected)
print("OK")
