"""The listener's pyramidal bidirectional LSTM: each layer reads pairs of consecutive frames,
so every layer halves the time resolution.

Chan, Jaitly, Le & Vinyals (2016), "Listen, Attend and Spell", §3.1 (eq. 5): layer ``j``
concatenates the outputs of frames ``2i`` and ``2i + 1`` of the layer below,

    h_i^j = pBLSTM(h_{i-1}^j, [h_{2i}^{j-1}; h_{2i+1}^{j-1}])

so ``L`` layers shorten ``F`` frames to ``⌈F / 2^L⌉`` (an odd count gets one zero frame) and the
attention of Hasegawa-Johnson's ECE 417 Lecture 21 listener reads ``2^L`` times fewer keys.
Here the bottom layer is pyramidal too (it reads pairs of feature frames). Each layer runs over
the real frames of each utterance only (packed sequences); padded frames are zeroed first and
its outputs on padding are zero, so an utterance's output does not depend on its batch.

Shapes: features ``(B, F, D)``, lengths ``(B,)`` → ``(outputs (B, ⌈F / 2^L⌉, 2h), lengths (B,))``.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.attention.masks import lengths_to_mask
from attnlab.validation import check_positive


def halved(lengths: Tensor, times: int = 1) -> Tensor:
    """``⌈lengths / 2^times⌉``: the frames left after ``times`` halvings."""
    for _ in range(times):
        lengths = (lengths + 1) // 2
    return lengths


def zero_padding(x: Tensor, lengths: Tensor) -> Tensor:
    """``x`` ``(B, F, ...)`` with every frame at or past ``lengths[b]`` set to zero."""
    mask = lengths_to_mask(lengths.to(x.device), x.shape[1])  # (B, F)
    return x * mask.reshape(*mask.shape, *[1] * (x.dim() - 2)).to(x.dtype)


class PyramidalBLSTM(nn.Module):
    """``layers`` pyramidal BiLSTM layers of ``hidden_dim`` a direction over ``input_dim`` features."""

    def __init__(self, input_dim: int, hidden_dim: int, layers: int, dropout: float = 0.0) -> None:
        super().__init__()
        for name, value in (("input_dim", input_dim), ("hidden_dim", hidden_dim), ("layers", layers)):
            check_positive(name, value)
        widths = [2 * input_dim] + [4 * hidden_dim] * (layers - 1)  # pairs of frames below
        self.rnns = nn.ModuleList(nn.LSTM(w, hidden_dim, batch_first=True, bidirectional=True)
                                  for w in widths)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = 2 * hidden_dim

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``x`` ``(B, F, D)``, ``lengths`` ``(B,)`` → ``(outputs (B, F', 2h), lengths (B,))``."""
        x = zero_padding(x, lengths)
        for k, rnn in enumerate(self.rnns):
            if x.shape[1] % 2:
                x = nn.functional.pad(x, (0, 0, 0, 1))  # one zero frame: pairs
            x = x.reshape(x.shape[0], x.shape[1] // 2, 2 * x.shape[2])  # (B, F/2, 2d)
            lengths = halved(lengths)
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            x, _ = pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])
            if k < len(self.rnns) - 1 and self.training:
                x = self.dropout(x)
        return x, lengths
