"""The convolutional front end that shortens a spectrogram four times before a Transformer
encoder reads it.

Zeyer, Bahar, Irie, Schlüter & Ney (2019), "A Comparison of Transformer and LSTM Encoder
Decoder Models for ASR", and the speech Transformers they compare with, put strided
convolutions under the self-attention layers: attention's cost grows with the square of the
frames. Two 3 × 3 convolutions of stride 2 (padding 1) over time and frequency, each followed
by a ReLU, take features ``(B, F, D)`` to ``(B, C, ⌈F / 4⌉, ⌈D / 4⌉)``; a linear layer maps each
frame's ``C · ⌈D / 4⌉`` values to ``d_model``. Padded frames are zeroed before each
convolution, so a real frame near the end reads zeros as it would alone: an utterance's output
does not depend on its batch (Hasegawa-Johnson, ECE 417 Lecture 21, reads the same spectrogram).

Shapes: features ``(B, F, D)``, lengths ``(B,)`` → ``(frames (B, ⌈F / 4⌉, d_model), lengths (B,))``.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnlab.modules.pyramid import halved, zero_padding
from attnlab.validation import check_positive


class ConvSubsampling(nn.Module):
    """Two stride-2 convolutions of ``channels`` over ``input_dim`` features, then ``d_model``."""

    def __init__(self, input_dim: int, channels: int, d_model: int) -> None:
        super().__init__()
        for name, value in (("input_dim", input_dim), ("channels", channels), ("d_model", d_model)):
            check_positive(name, value)
        self.conv1 = nn.Conv2d(1, channels, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.project = nn.Linear(channels * halved_int(input_dim, 2), d_model)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``x`` ``(B, F, D)``, ``lengths`` ``(B,)`` → ``(frames (B, ⌈F/4⌉, d_model), lengths)``."""
        h = zero_padding(x, lengths).unsqueeze(1)  # (B, 1, F, D)
        h = nn.functional.relu(self.conv1(h))  # (B, C, ⌈F/2⌉, ⌈D/2⌉)
        lengths = halved(lengths)
        h = zero_padding(h.transpose(1, 2), lengths).transpose(1, 2)
        h = nn.functional.relu(self.conv2(h))  # (B, C, ⌈F/4⌉, ⌈D/4⌉)
        lengths = halved(lengths)
        h = h.permute(0, 2, 1, 3).flatten(2)  # (B, ⌈F/4⌉, C·⌈D/4⌉)
        return zero_padding(self.project(h), lengths), lengths


def halved_int(size: int, times: int) -> int:
    """``⌈size / 2^times⌉`` for a plain int."""
    for _ in range(times):
        size = (size + 1) // 2
    return size
