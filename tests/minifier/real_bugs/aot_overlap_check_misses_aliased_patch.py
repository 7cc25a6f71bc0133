"""AOTAutograd treats an image and an overlapping 2-D crop of it as non-aliasing; an in-place update is lost.

The compiled function receives a canvas and a crop view of it (`patch = canvas[1:, 2:]`),
darkens the patch in place and then brightens the whole canvas in place; it returns
nothing, so the only effect is the mutation of the inputs.  AOTAutograd asks
`torch._C._dynamo.guards.compute_overlapping_tensors([canvas, patch])` whether the two
aliasing inputs overlap; for this crop (shape (3, 4), stride (6, 1), offset 8) it wrongly
answers "no", so no synthetic base is built and the two input mutations are written back
independently: the canvas write-back overwrites the patch update, and the patch region
ends up as x + 0.1 instead of 0.5 * x + 0.1.  (Crops `canvas[1:]` or `canvas[:, 2:]`
are handled correctly.)  Fails with backend="aot_eager" already.

Upstream: none found (searched: "compute_overlapping_tensors", "aliased inputs treated as non-overlapping mutation lost", "synthetic base crop view mutation torch.compile")
"""
import torch

CASE = {
    "upstream": None,
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["aten.mul_.Tensor", "aten.add_.Tensor"],
    "fails_on_2_15": True,
    "notes": "compute_overlapping_tensors returns set() for (x, x[1:, 2:]); aliasing mutated inputs then skip the synthetic-base path",
}


def grade(canvas, patch, gain):
    patch.mul_(gain)                    # darken the region of interest (a view into canvas)
    canvas.add_(0.1)                    # then lift the whole canvas


torch.manual_seed(0)
image = torch.rand(4, 6)
gain = torch.tensor(0.5)

eager_img = image.clone()
grade(eager_img, eager_img[1:, 2:], gain)

compiled_img = image.clone()
torch.compile(grade, backend="aot_eager")(compiled_img, compiled_img[1:, 2:], gain)

print("eager   :", [round(v, 3) for v in eager_img[1].tolist()])
print("compiled:", [round(v, 3) for v in compiled_img[1].tolist()])
torch.testing.assert_close(compiled_img, eager_img)
print("OK")
