"""Seam: ``torch._C._ensureCUDADeviceGuardSet``, the no-op CUDA device guard fake tensors set without a GPU.

On a CUDA build of torch with no GPU (what a plain ``pip install torch`` gives on a CPU
machine), ``FakeTensorMode`` sets a no-op CUDA device guard the first time it is entered.
torch 2.11 segfaults when that first time is on another thread than a later compile's:
pt2kit's capture learns dynamo's own config patches by compiling a no-op on a thread of
its own (:func:`minifier.capture.context.learn_dynamo_own_patches`), and the program's
first compile, on the main thread, then crashed. :func:`set_here` sets the guard on the
calling thread first, as fake tensors would; with a GPU, or where torch no longer has
the call, it does nothing.
"""

from __future__ import annotations

from . import Seam

SEAM = Seam(
    wraps="torch._C._ensureCUDADeviceGuardSet (what FakeTensorMode.__enter__ calls without a GPU)",
    features=("capturing a program on a CUDA build without a GPU (torch 2.11)",),
)


def probe() -> None:
    import inspect

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    uses = "_ensureCUDADeviceGuardSet" in inspect.getsource(FakeTensorMode.__enter__)
    if uses and not callable(getattr(torch._C, "_ensureCUDADeviceGuardSet", None)):
        raise AttributeError("FakeTensorMode sets a CUDA device guard through a call torch._C no longer has")
    set_here()


def set_here() -> None:
    """Set the no-op CUDA device guard on this thread, where fake tensors would set it (no GPU); else nothing."""
    import torch

    ensure = getattr(torch._C, "_ensureCUDADeviceGuardSet", None)
    if ensure is not None and not torch.cuda.is_available():
        ensure()
