"""AOTAutograd regenerates a view of an aliased input from the wrong offset (synthetic base).

The compiled function receives a buffer and a view of it with a non-zero storage
offset (`tail = buf[1:]`), updates the buffer in place and returns a view of the
*view* (`tail[0]`).  AOTAutograd merges the two aliasing inputs into a synthetic base
and replays the output's ViewMeta sequence (recorded relative to `tail`) on the base,
dropping `tail`'s storage offset: the returned row is `buf[0]` instead of `buf[1]`.
Fails with backend="aot_eager" already (and therefore also with inductor).

Upstream: https://github.com/pytorch/pytorch/issues/198095
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#198095",
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["aten.add_.Tensor", "aten.select.int", "aten.slice.Tensor"],
    "fails_on_2_15": True,
    "notes": "aliased graph inputs (buf, buf[1:]) -> synthetic base; output alias of tail regenerated with offset 0",
}


def decay_and_peek(buf, tail):
    buf.mul_(0.5).add_(100.0)           # update the whole history in place
    return tail[0]                      # newest-but-one row, a view of `tail`


torch.manual_seed(0)
base = torch.randn(4, 6, dtype=torch.float64)

eb = base.clone()
expected = decay_and_peek(eb, eb[1:]).clone()
cb = base.clone()
actual = torch.compile(decay_and_peek, backend="aot_eager")(cb, cb[1:]).clone()

print("eager   :", [round(v, 3) for v in expected.tolist()])
print("compiled:", [round(v, 3) for v in actual.tolist()])
torch.testing.assert_close(cb, eb)
torch.testing.assert_close(actual, expected)
print("OK")
