"""The alignment model of an RNN decoder: how much decoder step ``i`` attends to source ``j``.

Bahdanau, Cho & Bengio (2015), "Neural Machine Translation by Jointly Learning to Align and
Translate", eqs. 5-6: ``e_ij = a(s_{i-1}, h_j)``, ``α_ij = softmax_j(e_ij)`` over the real source
tokens, ``c_i = Σ_j α_ij h_j`` (Hasegawa-Johnson (ECE 417 Lecture 21), "Attention"; López et al.
(Attention Mechanisms)). The score ``a`` is one of

* ``additive`` — ``w_vᵀ tanh(W_q s + W_k h_j)`` (Bahdanau; Luong et al.'s *concat*;
  :class:`AdditiveScore`)
* ``dot``      — ``sᵀ h_j`` (Luong, Pham & Manning 2015, "Effective Approaches to
  Attention-based NMT", eq. 8; needs ``d_q = d_k``; :class:`DotScore`)
* ``general``  — ``sᵀ M h_j`` (Luong et al. eq. 8; :class:`BilinearScore`)
* ``location`` — the additive score plus convolutional features of the previous alignment
  (Chorowski et al. 2015; :class:`LocationAwareScore`)

A decoder calls :meth:`Alignment.prepare` once per source (the key side of the score does not
depend on the step) and then :meth:`Alignment.forward` at every step: the score API of
:class:`~attnlab.attention.scoring.Score`, the same two calls whichever the score, followed by
the masked softmax. The weights equal ``masked_softmax`` of the score module's ``forward``
(tested).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.attention.location import LocationAwareScore
from attnlab.attention.masks import masked_softmax
from attnlab.attention.scoring import AdditiveScore, BilinearScore, DotScore, Score
from attnlab.validation import check_choice, check_positive

SCORES = ("additive", "dot", "general", "location")


class Alignment(nn.Module):
    """``α_i = softmax_j a(s_{i-1}, h_j)`` over the unmasked source positions, one step at a time.

    Args:
        score: one of :data:`SCORES`.
        query_dim: ``d_q``, the decoder state's width.
        key_dim: ``d_k``, the encoder states' width.
        hidden_dim: the scoring network's width (``additive`` and ``location``).
        filters, kernel_size: the location features (``location`` only).
    """

    def __init__(
        self, score: str, query_dim: int, key_dim: int, hidden_dim: int, *,
        filters: int = 10, kernel_size: int = 21,
    ) -> None:
        super().__init__()
        check_choice("score", score, SCORES)
        for name, value in (("query_dim", query_dim), ("key_dim", key_dim), ("hidden_dim", hidden_dim)):
            check_positive(name, value)
        if score == "dot" and query_dim != key_dim:
            raise ValueError(
                f"the dot score needs query_dim = key_dim, got {query_dim} and {key_dim}"
            )
        self.kind = score
        self.score: Score
        if score == "additive":
            self.score = AdditiveScore(query_dim, key_dim, hidden_dim)
        elif score == "location":
            self.score = LocationAwareScore(query_dim, key_dim, hidden_dim, filters, kernel_size)
        elif score == "general":
            self.score = BilinearScore(query_dim, key_dim)
        else:
            self.score = DotScore()

    def prepare(self, keys: Tensor) -> Tensor:
        """The key side of the score, computed once: ``keys (B, S, d_k)`` → ``(B, S, ·)``
        (``W_k h_j``; ``M h_j`` for ``general``; the keys themselves for ``dot``)."""
        return self.score.prepare(keys)

    def forward(
        self, query: Tensor, prepared: Tensor, mask: Tensor | None, previous: Tensor | None = None
    ) -> Tensor:
        """Weights ``(B, S)`` of the query ``(B, d_q)`` over the prepared keys ``(B, S, ·)``.

        ``mask`` ``(B, S)``: True = a real source token (padding gets weight exactly 0).
        ``previous`` ``(B, S)``: the previous step's weights (read by ``location`` only).
        """
        read = self.score.reads_previous and previous is not None
        before = previous.unsqueeze(1) if read else None  # (B, 1, S): α_{i-1}
        scores = self.score.score(query.unsqueeze(1), prepared, before)  # (B, 1, S), eq. 6
        return masked_softmax(scores.squeeze(1), mask, check=False)  # (B, S): the caller's mask

    @staticmethod
    def initial(mask: Tensor) -> Tensor:
        """The "previous" alignment before the first step: uniform over the real tokens of each
        source, ``mask (B, S)`` → ``(B, S)``."""
        real = mask.to(torch.float32)
        return real / real.sum(dim=1, keepdim=True).clamp(min=1.0)
