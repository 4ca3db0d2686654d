"""Location-aware attention scores: the additive score plus features of where the previous
step attended (Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based Models
for Speech Recognition", eqs. 8-9; the score ``e_{i,j} = Score(s_{i-1}, h_j)`` of
Hasegawa-Johnson (ECE 417 Lecture 21), "Attention").

A content-only score ``e(s, h_j)`` gives the same weight to two identical source positions; a
decoder that should move monotonically along its input (speech, a translation that follows
the source order) also needs to know where it attended last. Chorowski et al. convolve the
previous alignment ``α_{i-1}`` with ``r`` learned filters ``F`` of width ``w`` and add the
features ``f_{i,j}`` of each position to the additive score::

    f_i = F * α_{i-1}                                      (eq. 8)
    e_{i,j} = wᵀ tanh(W s_{i-1} + V h_j + U f_{i,j} + b)    (eq. 9)

The location term is the ``extra`` of :meth:`AdditiveScore.hidden
<attnlab.attention.scoring.AdditiveScore.hidden>`: one more addend inside the ``tanh``, so the
key side ``V h_j`` is prepared once per source as for the additive score. With ``F = 0`` and
``b = 0`` it is :class:`~attnlab.attention.scoring.AdditiveScore` exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.attention.scoring import AdditiveScore
from attnlab.validation import check_floating, check_positive, check_tensor, shape_str

_NO_PREVIOUS = "the location-aware score needs the previous alignment, got None"


class LocationAwareScore(AdditiveScore):
    """``e(q, k_j; α_prev) = w_vᵀ tanh(W_q q + W_k k_j + U (F * α_prev)_j + b)``.

    Args:
        query_dim: ``d_q`` (the decoder state ``s_{i-1}``).
        key_dim: ``d_k`` (the encoder states ``h_j``).
        hidden_dim: ``h``, the width of the scoring network.
        filters: ``r``, the number of convolution filters ``F``.
        kernel_size: ``w``, their width; odd, so that feature ``j`` is centred on position ``j``.

    Shapes: ``q (..., n_q, d_q)``, ``k (..., n_k, d_k)``, ``previous (..., n_q, n_k)`` (the
    weights of the previous step; zero at padded positions, uniform or one-hot at the first
    step) → ``(..., n_q, n_k)``. ``previous`` must have the full batch shape of the scores.
    The score API of :class:`~attnlab.attention.scoring.Score`: ``prepare(k)`` is ``W_k k``,
    ``score(q, prepared, previous)`` adds the location term.
    """

    reads_previous = True

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, filters: int = 10,
                 kernel_size: int = 21) -> None:
        super().__init__(query_dim, key_dim, hidden_dim)
        check_positive("filters", filters)
        check_positive("kernel_size", kernel_size)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (centred on each position), got {kernel_size}")
        self.conv = nn.Conv1d(1, filters, kernel_size, padding=kernel_size // 2, bias=False)  # F
        self.w_f = nn.Linear(filters, hidden_dim, bias=True)  # U and b

    def score(  # type: ignore[override]
        self, query: Tensor, prepared: Tensor, previous: Tensor | None = None
    ) -> Tensor:
        """Eq. 9 for ``query (..., n_q, d_q)`` against ``prepared`` ``W_k k`` ``(..., n_k, h)``
        given ``previous (..., n_q, n_k)`` → ``(..., n_q, n_k)``."""
        if previous is None:
            raise ValueError(_NO_PREVIOUS)
        features = self.w_f(self.location(previous))  # (..., n_q, n_k, h): U f_{i,j} + b
        return super().score(query, prepared, extra=features)

    def check(self, q: Tensor, k: Tensor, previous: Tensor | None = None) -> None:
        super().check(q, k)
        if previous is None:
            raise ValueError(_NO_PREVIOUS)
        check_tensor("previous", previous)
        check_floating("previous", previous)
        scores = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        if previous.shape != scores:
            raise ValueError(
                f"previous must have the scores' shape {shape_str(scores)} (..., n_q, n_k), "
                f"got {shape_str(previous.shape)}"
            )

    def location(self, previous: Tensor) -> Tensor:
        """``f = F * α_prev`` at every position (eq. 8): ``(..., n_q, n_k)`` → ``(..., n_q, n_k, r)``."""
        n_k = previous.shape[-1]
        rows = previous.reshape(-1, 1, n_k)  # (B, 1, n_k)
        features = self.conv(rows)  # (B, r, n_k), zero-padded at both ends
        return features.transpose(1, 2).reshape(*previous.shape, -1)
