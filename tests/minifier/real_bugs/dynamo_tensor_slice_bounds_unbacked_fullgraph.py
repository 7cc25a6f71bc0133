"""Slicing with bounds computed as tensors, under fullgraph=True: dynamo loses an unbacked size.

A center crop whose offsets are computed with tensor arithmetic (`(h - crop) / 2` as a
0-d tensor, then `.long()`) slices `x[:, :, h0:h1, w0:w1]` with tensor bounds. Dynamo
turns each bound into an unbacked int (`.item()`), and the slice's fake result has sizes
built from other unbacked symbols than the ones it registered: "Pending unbacked symbols
{u5} not in returned outputs". Without fullgraph the frame breaks there and runs;
with it the compile fails. Eager crops fine.

pt2kit lifts the frame's torch calls into a graph: the bounds are calls inside a slice
(they were left as tensor values, which wrote an invalid repro: exit 6), and the frame's
fullgraph=True is carried into the repro (without it the lifted graph breaks and passes).
Found by a fresh-bug hunt.
"""
import torch

CASE = {
    "upstream": "pytorch/pytorch#185185",
    "kind": "compile_error",
    "stage": "eager",
    "ops": ["Tensor.long", "operator.getitem"],
    "exception": "InternalTorchDynamoError",
    "fails_on_2_15": True,
    "notes": "tensor slice bounds become unbacked ints; the slice's fake sizes use other symbols than those pending",
}


class CenterCrop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("crop_size", torch.tensor(224, dtype=torch.float32))

    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        h0 = ((torch.tensor(h, dtype=torch.float32) - self.crop_size) / 2).long()
        w0 = ((torch.tensor(w, dtype=torch.float32) - self.crop_size) / 2).long()
        h1 = h0 + self.crop_size.long()
        w1 = w0 + self.crop_size.long()
        return x[:, :, h0:h1, w0:w1] * 2


m = CenterCrop()
x = torch.randn(1, 3, 256, 256)
expected = m(x)
torch.testing.assert_close(torch.compile(m, fullgraph=True)(x), expected)
