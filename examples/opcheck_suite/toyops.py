"""A small custom-op library, as a user project would have one.

Six ops. One is correct; each of the others has one defect that plain eager
tests never notice, planted the way such bugs happen in practice:

=================  ==================================================  ==========================
op                 defect                                              found by
=================  ==================================================  ==========================
scaled_tanh        none: fake kernel and autograd formula are right    -
segment_offsets    fake kernel is off by one (written for an           test_faketensor
                   exclusive scan with a leading 0)
logsumexp_rows     shifts its input in place for stability and back:   test_schema
                   the input comes back an ulp off, undeclared
channel_scale      kernel writes NHWC (channels_last), fake kernel     test_faketensor
                   says NCHW: wrong strides
fast_gelu          kernel runs detached and no autograd formula        test_autograd_registration
                   exists: gradients are silently None
                   (torch.library.opcheck passes it)
pad_to_multiple    fake kernel memoizes by size with functools.cache:  test_aot_dispatch_dynamic
                   a SymInt is unhashable, so it breaks only with
                   dynamic shapes
=================  ==================================================  ==========================

The ops use every registration style opcheck covers: ``torch.library.custom_op``
with ``register_fake``/``register_autograd``, and ``Library.define`` with a
backend impl plus either ``torch.library.register_fake`` or a ``"Meta"`` impl.
"""

import functools

import torch
from torch import Tensor

lib = torch.library.Library("toyops", "DEF")


# -- scaled_tanh: correct ------------------------------------------------------------------
@torch.library.custom_op("toyops::scaled_tanh", mutates_args=())
def scaled_tanh(x: Tensor, scale: float) -> Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _scaled_tanh_setup(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x)
    ctx.scale = scale


def _scaled_tanh_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * ctx.scale * (1 - torch.tanh(x) ** 2), None


scaled_tanh.register_autograd(_scaled_tanh_backward, setup_context=_scaled_tanh_setup)


# -- segment_offsets: fake kernel has the wrong shape --------------------------------------
lib.define("segment_offsets(Tensor lengths) -> Tensor")


def _segment_offsets_cpu(lengths):
    return torch.cumsum(lengths, dim=0)  # inclusive scan: one offset per segment


lib.impl("segment_offsets", _segment_offsets_cpu, "CPU")


@torch.library.register_fake("toyops::segment_offsets", lib=lib)
def _(lengths):
    return lengths.new_empty(lengths.shape[0] + 1)  # BUG: written for an exclusive scan


def segment_offsets(lengths: Tensor) -> Tensor:
    return torch.ops.toyops.segment_offsets(lengths)


# -- logsumexp_rows: mutates its input without declaring it --------------------------------
@torch.library.custom_op("toyops::logsumexp_rows", mutates_args=())
def logsumexp_rows(x: Tensor) -> Tensor:
    row_max = x.amax(dim=1, keepdim=True)
    x.sub_(row_max)  # in place, to save a temporary...
    result = x.exp().sum(dim=1).log()
    x.add_(row_max)  # ...and "restored": BUG, x - m + m is not x in floating point
    return result + row_max.squeeze(1)


@logsumexp_rows.register_fake
def _(x):
    return x.new_empty(x.shape[0])


# -- channel_scale: fake kernel gets the strides wrong -------------------------------------
@torch.library.custom_op("toyops::channel_scale", mutates_args=())
def channel_scale(x: Tensor, weight: Tensor) -> Tensor:
    out = x * weight[:, None, None]
    return out.contiguous(memory_format=torch.channels_last)  # the kernel works in NHWC


@channel_scale.register_fake
def _(x, weight):
    return torch.empty_like(x, memory_format=torch.contiguous_format)  # BUG: the output is NHWC


# -- fast_gelu: differentiable, but no autograd formula ----------------------------------
lib.define("fast_gelu(Tensor x) -> Tensor")


def _fast_gelu_cpu(x):
    with torch.no_grad():  # stands in for a hand-written kernel autograd cannot see into
        return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


lib.impl("fast_gelu", _fast_gelu_cpu, "CPU")
lib.impl("fast_gelu", lambda x: torch.empty_like(x), "Meta")
# BUG: no torch.library.register_autograd("toyops::fast_gelu", ...)


def fast_gelu(x: Tensor) -> Tensor:
    return torch.ops.toyops.fast_gelu(x)


# -- pad_to_multiple: fake kernel breaks only with dynamic shapes --------------------------
@functools.cache
def _padded_length(length, multiple=8):
    return (length + multiple - 1) // multiple * multiple


@torch.library.custom_op("toyops::pad_to_multiple", mutates_args=())
def pad_to_multiple(x: Tensor) -> Tensor:
    out = x.new_zeros(x.shape[0], _padded_length(x.shape[1]))
    out[:, : x.shape[1]] = x
    return out


@pad_to_multiple.register_fake
def _(x):
    # BUG (only with dynamic shapes): x.shape[1] is then a SymInt, and functools.cache hashes it.
    return x.new_empty(x.shape[0], _padded_length(x.shape[1]))
