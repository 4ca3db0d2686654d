"""The speech encoders' front ends: the pyramidal BiLSTM halves the frames at each layer and the
convolutional subsampling quarters them, ``⌈F / 2^k⌉`` with the mask of the lengths that
remain; padded frames never change a real output, and an utterance in a batch gives what it
gives alone."""

from __future__ import annotations

import pytest
import torch

from attnlab.modules.pyramid import PyramidalBLSTM, halved, zero_padding
from attnlab.modules.subsampling import ConvSubsampling

D = 12


def batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(lengths), max(lengths), D, generator=g), torch.tensor(lengths)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_the_pyramid_halves_the_frames_at_each_layer(layers):
    torch.manual_seed(0)
    encoder = PyramidalBLSTM(D, 8, layers).eval()
    x, lengths = batch([37, 16, 5])
    out, kept = encoder(x, lengths)
    expected = [-(-n // 2**layers) for n in (37, 16, 5)]  # ⌈n / 2^L⌉
    assert out.shape == (3, -(-37 // 2**layers), 16)
    assert kept.tolist() == expected
    for row, n in enumerate(expected):  # zero past each length, the mask's complement
        assert out[row, n:].abs().sum() == 0 and out[row, :n].abs().sum() > 0


@pytest.mark.parametrize("module", ["pyramid", "conv"])
def test_padded_frames_change_nothing_and_a_batch_row_is_the_utterance_alone(module):
    torch.manual_seed(0)
    encoder = (PyramidalBLSTM(D, 8, 2) if module == "pyramid" else ConvSubsampling(D, 4, 16)).eval()
    x, lengths = batch([29, 18, 7])
    out, kept = encoder(x, lengths)
    noisy = x.clone()
    for row, n in enumerate(lengths.tolist()):
        noisy[row, n:] = 1e3 * torch.randn_like(noisy[row, n:])
    again, _ = encoder(noisy, lengths)
    torch.testing.assert_close(again, out, rtol=0, atol=0)
    for row, n in enumerate(lengths.tolist()):
        alone, _ = encoder(x[row : row + 1, :n], lengths[row : row + 1])
        torch.testing.assert_close(out[row : row + 1, : alone.shape[1]], alone, rtol=1e-5, atol=1e-6)


def test_the_convolutions_quarter_the_frames_and_the_channels():
    torch.manual_seed(0)
    conv = ConvSubsampling(D, 4, 16)
    assert conv.project.in_features == 4 * 3  # ⌈12 / 4⌉ = 3 channels a frame per filter
    x, lengths = batch([41, 8, 1])
    out, kept = conv(x, lengths)
    assert out.shape == (3, 11, 16) and kept.tolist() == [11, 2, 1]
    assert out[1, 2:].abs().sum() == 0 and out[2, 1:].abs().sum() == 0


def test_halving_and_zeroing_match_their_definitions():
    lengths = torch.tensor([1, 2, 7, 8, 9])
    assert halved(lengths, 2).tolist() == [-(-n // 4) for n in (1, 2, 7, 8, 9)]
    x = torch.ones(2, 4, 3, 2)
    out = zero_padding(x, torch.tensor([1, 3]))
    assert out[0, :1].eq(1).all() and out[0, 1:].eq(0).all() and out[1, 3:].eq(0).all()
