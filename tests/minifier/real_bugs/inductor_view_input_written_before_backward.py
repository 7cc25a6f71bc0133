"""A view input written in place by the compiled function, whose backward then finds a saved tensor at a new version.

`x` is a view (a slice of `squeeze(base * 1.0)`); the function interpolates a slice of it, then
writes `x.sub_(mean).div_(std)`. Eager, aot_eager and aot_eager_decomp_partition run the backward;
under Inductor, autograd's check of the saved tensors' versions fails as AOTAutograd's backward
unpacks them: "one of the variables needed for gradient computation has been modified by an
inplace operation". Fails without `dynamic=True` too. Fixed in 2.15 (where only float32
rounding of `mean.grad` is left, beyond `assert_close`'s tolerance).

What made it hard: the failure is raised before the backward graph is compiled or run, where no
compiler wrapper looks (the env-var hook wrote nothing, as torch's own does); pt2kit's rebuilt input
is a clone where the program's was a view, so the message named another autograd node and the
graph "failed differently"; and the API, compiling the step whole, lost `dynamic=True` and the
graph's boundary. Found by a fresh-bug hunt, not by the code.

Upstream: pytorch/pytorch#185497
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#185497",
    "kind": "runtime_error",
    "stage": "inductor",
    "ops": ["torch.nn.functional.interpolate", "Tensor.sub_", "Tensor.div_"],
    "exception": "RuntimeError",
    "fails_on_2_15": False,
    "notes": "a saved tensor's version changes under Inductor; raised in AOTAutograd's backward prologue",
}


def f(x, mean, std):
    y = F.interpolate(x[:, :64, :64].unsqueeze(0), size=(32, 32), mode="bilinear", align_corners=False)
    x.sub_(mean).div_(std)
    return y, x


def run(fn):
    torch.manual_seed(0)
    base = torch.randn(1, 3, 128, 128, requires_grad=True)
    x = (base * 1.0).squeeze(0)[:, :128, :128]
    mean = torch.randn(3, 1, 1, requires_grad=True)
    std = torch.randn(3, 1, 1).abs().add(0.5).requires_grad_()
    y, z = fn(x, mean, std)
    (y.sum() + z.sum()).backward()
    return base.grad, mean.grad, std.grad


eager = run(f)
compiled = run(torch.compile(f, dynamic=True))
torch.testing.assert_close(compiled, eager)
print("did not fail")
