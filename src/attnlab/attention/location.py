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

With ``F = 0`` and ``b = 0`` it is :class:`~attnlab.attention.scoring.AdditiveScore` exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.attention.scoring import AdditiveScore
from attnlab.validation import check_floating, check_positive, check_tensor, shape_str


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
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, filters: int = 10,
                 kernel_size: int = 21) -> None:
        super().__init__(query_dim, key_dim, hidden_dim)
        check_positive("filters", filters)
        check_positive("kernel_size", kernel_size)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (centred on each position), got {kernel_size}")
        self.conv = nn.Conv1d(1, filters, kernel_size, padding=kernel_size // 2, bias=False)  # F
        self.w_f = nn.Linear(filters, hidden_dim, bias=True)  # U and b

    def forward(self, q: Tensor, k: Tensor, previous: Tensor) -> Tensor:  # type: ignore[override]
        hidden = self.hidden(q, k)  # (..., n_q, n_k, h)
        check_tensor("previous", previous)
        check_floating("previous", previous)
        if previous.shape != hidden.shape[:-1]:
            raise ValueError(
                f"previous must have the scores' shape {shape_str(hidden.shape[:-1])} "
                f"(..., n_q, n_k), got {shape_str(previous.shape)}"
            )
        return self.w_v(torch.tanh(hidden + self.w_f(self.location(previous)))).squeeze(-1)

    def location(self, previous: Tensor) -> Tensor:
        """``f = F * α_prev`` at every position (eq. 8): ``(..., n_q, n_k)`` → ``(..., n_q, n_k, r)``."""
        n_k = previous.shape[-1]
        rows = previous.reshape(-1, 1, n_k)  # (B, 1, n_k)
        features = self.conv(rows)  # (B, r, n_k), zero-padded at both ends
        return features.transpose(1, 2).reshape(*previous.shape, -1)
