"""Ordinary eager tests of toyops: every one of them passes with plain ``pytest``.

Run them with ``pytest --opcheck`` to check the ops themselves.
"""

import pytest
import torch
import toyops


def test_scaled_tanh_matches_reference():
    x = torch.randn(4, 8)
    for _ in range(200):  # many identical calls: opcheck checks this signature once
        y = toyops.scaled_tanh(x, 2.0)
    torch.testing.assert_close(y, torch.tanh(x) * 2.0)


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0])  # same signature each time: checked once
def test_scaled_tanh_scales(scale):
    x = torch.randn(4, 8)
    torch.testing.assert_close(toyops.scaled_tanh(x, scale), torch.tanh(x) * scale)


def test_scaled_tanh_gradient():
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: toyops.scaled_tanh(t, 1.5), (x,))


def test_segment_offsets():
    lengths = torch.tensor([2, 0, 3, 1])
    assert toyops.segment_offsets(lengths).tolist() == [2, 2, 5, 6]


def test_logsumexp_rows():
    x = torch.rand(16, 32, generator=torch.Generator().manual_seed(0)) * 10 + 0.5
    torch.testing.assert_close(toyops.logsumexp_rows(x), torch.logsumexp(x, dim=1))


def test_channel_scale():
    x = torch.randn(2, 3, 4, 4)
    weight = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(toyops.channel_scale(x, weight), x * weight[:, None, None])


def test_fast_gelu_in_a_training_step():
    x = torch.randn(4, 8, requires_grad=True)
    y = toyops.fast_gelu(x)
    torch.testing.assert_close(y, torch.nn.functional.gelu(x, approximate="tanh"))
    y.sum().backward()  # "works": only a warning says x.grad is wrong (it stays None)


@pytest.mark.parametrize("width", [5, 8, 13])
def test_pad_to_multiple(width):
    x = torch.randn(2, width)
    out = toyops.pad_to_multiple(x)
    assert out.shape[1] % 8 == 0
    torch.testing.assert_close(out[:, :width], x)
