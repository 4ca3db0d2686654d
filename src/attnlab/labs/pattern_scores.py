"""Numbers that say what an attention pattern does: how spread out it is and whether it
follows position (the heads and alignment labs; Li (Transformer Part I), "Multi-head
Attention": each head learns its own pattern; Ba (CSC413 Lecture 8), "Attention-Based Machine
Translation": "somehow it learns to go linearly through the input sentence").

For one head's weights ``α`` of shape ``(n_q, n_k)`` (row i: query i's distribution over the
keys, each row summing to 1 over its **visible keys** K_i — every key, or under a causal mask
the keys ``j ≤ i``):

* **entropy** of row i: ``H_i = −Σ_j α_ij ln α_ij`` in nats (``0 ln 0 = 0``), between 0 (all
  weight on one key) and ``ln |K_i|`` (uniform over the visible keys); the **normalised**
  entropy is ``H_i / ln |K_i|``.
* **previous-token score** (self-attention): ``α_{i, i−1}``, the weight on the key one position
  back.
* **diagonal score**: ``α_{i, d_i}``, the weight on the key at the **monotone diagonal**
  ``d_i = ⌊i (n_k − 1) / (n_q − 1) + ½⌋`` (the line from the first query and key to the last
  ones); for self-attention ``n_q = n_k`` and ``d_i = i``, the token itself. With a ``width`` w,
  the **diagonal mass** sums ``α_ij`` over ``|j − d_i| ≤ w`` (the alignment lab uses w = 1).

A head's score is the mean over its rows that have a choice (at least two visible keys: under a
causal mask the first row is left out, and the previous-token score starts at i = 1 anyway).
:func:`head_scores` gives all of them for every head, with the head marked "previous-token" or
"diagonal" when that score holds at least half the weight (:data:`MARK_AT`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.validation import check_rank

__all__ = [
    "MARK_AT", "HeadScores", "diagonal_mass", "diagonal_positions", "head_scores", "previous_token_weight",
    "row_entropy", "visible_keys",
]

MARK_AT = 0.5
"""A head is marked previous-token (diagonal) when that score is at least this (half the weight)."""


def visible_keys(n_q: int, n_k: int, *, causal: bool) -> Tensor:
    """``|K_i|`` for each query row ``(n_q,)``: ``n_k``, or ``min(i + 1, n_k)`` under a causal mask."""
    if causal:
        return torch.clamp(torch.arange(1, n_q + 1), max=n_k)
    return torch.full((n_q,), n_k, dtype=torch.long)


def row_entropy(weights: Tensor) -> Tensor:
    """``H_i = −Σ_j α_ij ln α_ij`` in nats of every row of ``weights (..., n_q, n_k)`` → ``(..., n_q)``,
    computed in float64 with ``0 ln 0 = 0``."""
    return torch.special.entr(weights.double()).sum(-1)


def diagonal_positions(n_q: int, n_k: int) -> Tensor:
    """The monotone diagonal ``d_i = ⌊i (n_k − 1) / (n_q − 1) + ½⌋`` of each row ``(n_q,)``
    (row 0 → key 0, the last row → the last key; a single row looks at key 0)."""
    if n_q == 1:
        return torch.zeros(1, dtype=torch.long)
    i = torch.arange(n_q, dtype=torch.float64)
    return torch.floor(i * (n_k - 1) / (n_q - 1) + 0.5).long()


def diagonal_mass(weights: Tensor, width: int = 0) -> Tensor:
    """Per row of ``weights (..., n_q, n_k)``, the weight within ``width`` keys of the monotone
    diagonal (:func:`diagonal_positions`) → ``(..., n_q)``."""
    check_rank("weights", weights, (2, 3, 4), "(..., n_q, n_k)")
    if width < 0:
        raise ValueError(f"width must be >= 0, got {width}")
    n_q, n_k = weights.shape[-2:]
    keys = torch.arange(n_k)
    band = (keys[None, :] - diagonal_positions(n_q, n_k)[:, None]).abs() <= width  # (n_q, n_k)
    return (weights.double() * band.to(weights.device)).sum(-1)


def previous_token_weight(weights: Tensor) -> Tensor:
    """``α_{i, i−1}`` of every row of self-attention ``weights (..., n, n)`` → ``(..., n)``
    (0 for row 0, which has no previous token)."""
    n_q, n_k = weights.shape[-2:]
    if n_q != n_k:
        raise ValueError(f"weights must be square self-attention (n, n), got ({n_q}, {n_k})")
    previous = torch.diagonal(weights.double(), offset=-1, dim1=-2, dim2=-1)  # (..., n - 1)
    return torch.cat([torch.zeros_like(previous[..., :1]), previous], dim=-1)


@dataclass(frozen=True)
class HeadScores:
    """One head's scores (module docstring): mean entropy (nats) over its rows with a choice,
    the mean maximum ``ln |K_i|`` over those rows, the mean normalised entropy, the
    previous-token score (``None`` for cross-attention) and the diagonal score."""

    entropy: float
    max_entropy: float
    normalised_entropy: float
    previous: float | None
    diagonal: float

    @property
    def marks(self) -> list[str]:
        """``"previous-token"`` and / or ``"diagonal"`` when that score is at least :data:`MARK_AT`."""
        marks = ["previous-token"] if self.previous is not None and self.previous >= MARK_AT else []
        return marks + (["diagonal"] if self.diagonal >= MARK_AT else [])


def head_scores(weights: Tensor, *, causal: bool, self_attention: bool = True) -> list[HeadScores]:
    """:class:`HeadScores` of each head of ``weights (H, n_q, n_k)`` (one layer, one sequence);
    ``causal``: the keys after each query were masked; ``self_attention``: queries and keys are
    the same positions (``n_q = n_k``), so the previous-token score applies."""
    check_rank("weights", weights, 3, "(H, n_q, n_k)")
    _, n_q, n_k = weights.shape
    counts = visible_keys(n_q, n_k, causal=causal)  # (n_q,)
    rows = counts >= 2  # rows with a choice
    if not bool(rows.any()):
        raise ValueError(f"weights of shape {tuple(weights.shape)} have no row with two visible keys")
    w = weights.detach().cpu()
    entropy = row_entropy(w)[:, rows]  # (H, rows)
    top = torch.log(counts[rows].double())  # (rows,)
    diagonal = diagonal_mass(w)[:, rows].mean(-1)  # (H,)
    previous = previous_token_weight(w)[:, rows].mean(-1) if self_attention else None
    return [
        HeadScores(
            entropy=float(entropy[h].mean()), max_entropy=float(top.mean()),
            normalised_entropy=float((entropy[h] / top).mean()),
            previous=None if previous is None else float(previous[h]), diagonal=float(diagonal[h]),
        )
        for h in range(w.shape[0])
    ]
