"""What every recognizer shares: ``encode``'s check of padded features ``(B, F, D)`` and their
lengths ``(B,)`` (``lengths=None``: every frame is real), and teacher forcing
(:class:`TeacherForcedRecognizer`) — Chorowski, Bahdanau, Serdyuk, Cho & Bengio 2015,
"Attention-Based Models for Speech Recognition"; Hasegawa-Johnson, ECE 417 Lecture 21."""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.validation import check_ids, check_rank


def check_features(features: Tensor, lengths: Tensor | None, n_mels: int) -> Tensor:
    """The ``lengths`` ``(B,)`` of ``features`` ``(B, F, n_mels)`` (all ``F`` when ``None``), after
    refusing, in one line, a wrong layout, width or length."""
    check_rank("features", features, 3, "(B, F, n_mels)")
    if not features.is_floating_point():
        raise TypeError(f"features must be floating point, got {features.dtype}")
    if features.shape[2] != n_mels or features.shape[0] == 0 or features.shape[1] == 0:
        raise ValueError(f"features must be (B >= 1, F >= 1, n_mels={n_mels}), got {tuple(features.shape)}")
    if lengths is None:
        return torch.full((features.shape[0],), features.shape[1], dtype=torch.long, device=features.device)
    check_rank("lengths", lengths, 1, "(B,)")
    if lengths.shape[0] != features.shape[0] or lengths.is_floating_point():
        raise ValueError(f"lengths must be (B={features.shape[0]},) integers, got {tuple(lengths.shape)} "
                         f"{lengths.dtype}")
    if int(lengths.min()) < 1 or int(lengths.max()) > features.shape[1]:
        raise ValueError(f"lengths must be in [1, F={features.shape[1]}], got "
                         f"{int(lengths.min())}..{int(lengths.max())}")
    return lengths


class TeacherForcedRecognizer:
    """A recognizer's ``forward``, for a model with ``encode(features, lengths)`` and the
    encoder–decoder's ``decode`` (put first among its bases)."""

    def forward(self, features: Tensor, lengths: Tensor | None, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: ``features`` ``(B, F, n_mels)``, ``lengths`` ``(B,)``, ``tgt_in``
        ``(B, T)`` → logits ``(B, T, V)``."""
        check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        if features.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"tgt_in has batch size {tgt_in.shape[0]} but features has batch size "
                             f"{features.shape[0]}")
        memory, mask = self.encode(features, lengths)
        return self.decode(tgt_in, memory, mask, check=False)
