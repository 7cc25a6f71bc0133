"""With `enable_trace_load_build_class`, an append to a local class's attribute made before a graph break is lost.

`class Holder: items = []` inside the compiled function, `Holder.items.append(1)`, then a
graph break, then another append: eagerly the list ends with two items, compiled with one,
so the result is off by one. The flag is not torch's default, and the program passes without
it; every graph is right alone, and the program fails the same way with
`backend="eager"`: the bug is dynamo's side-effect replay across the break. pt2kit says so
(exit 5) and names the flag it was captured under. Found by a fresh-bug helper.

Upstream: https://github.com/pytorch/pytorch/issues/192872
"""
import torch
import torch._dynamo

CASE = {
    "upstream": "pytorch/pytorch#192872",
    "kind": "runtime_error",
    "stage": "eager",
    "ops": [],
    "exception": "AssertionError",
    "fails_on_2_15": True,
    "exit5": "under the dynamo config it sets (first suspects): enable_trace_load_build_class = True",
    "notes": "a side effect on a class built inside the frame, lost at a graph break, only under a non-default flag",
}

torch._dynamo.config.enable_trace_load_build_class = True


def fn(t):
    class Holder:
        items = []

    Holder.items.append(1)
    y = t * 2
    torch._dynamo.graph_break()
    Holder.items.append(2)
    return (y * 3).sum() + len(Holder.items)


t = torch.arange(3.0)
expected = fn(t)
got = torch.compile(fn, backend="inductor")(t)
assert torch.equal(got, expected), f"compiled {got.item()}, eager {expected.item()}"
