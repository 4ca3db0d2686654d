"""Attention scoring functions ``e(q, k)`` (López et al. (Attention Mechanisms), "Attention
Scoring Functions"; Hasegawa-Johnson (ECE 417 Lecture 21)).

A score measures how well a query matches a key; a softmax over keys turns the scores of one
query into attention weights (Hasegawa-Johnson (ECE 417 Lecture 21), "Attention":
``α_ij = exp(e_ij) / Σ_j exp(e_ij)``).

Every score here maps queries ``(..., n_q, d_q)`` and keys ``(..., n_k, d_k)`` to scores
``(..., n_q, n_k)``; leading dimensions broadcast. Dot, scaled-dot and cosine scores need
``d_q = d_k``; :class:`AdditiveScore` and :class:`BilinearScore` map between different sizes
(López et al. (Attention Mechanisms), "Vectors q and k_i with different lengths").

**One score API.** The score modules (:class:`DotScore`, :class:`BilinearScore`,
:class:`AdditiveScore` and :class:`~attnlab.attention.location.LocationAwareScore`) split
``e(q, k)`` the way a decoder uses it: ``prepare(keys)`` once per source — the key side, which
"does not depend on i" (Bahdanau et al. 2015, appendix A.1.2) — then ``score(query, prepared,
previous)`` at every step. Bahdanau's and Luong's alignments, the location-aware score of
Chorowski et al., Show, Attend and Tell's soft attention and the LSTMN all score through it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.validation import check_floating, check_positive, check_tensor, shape_str


def check_query_key(q: Tensor, k: Tensor, *, same_width: bool) -> None:
    """Validate ``q (..., n_q, d_q)`` and ``k (..., n_k, d_k)``: rank ≥ 2, broadcastable batches."""
    for name, t in (("q", q), ("k", k)):
        check_tensor(name, t)
        check_floating(name, t)
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., n, d), "
                f"got shape {shape_str(t.shape)}"
            )
    if same_width and q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"k has width {k.shape[-1]} but q has width {q.shape[-1]} (needs d_q = d_k)"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"q and k must have broadcastable batch dimensions, got q {shape_str(q.shape)} "
            f"and k {shape_str(k.shape)}"
        ) from None


def _check_width(name: str, x: Tensor, width: int, arg: str) -> None:
    if x.shape[-1] != width:
        raise ValueError(f"{name} has width {x.shape[-1]} but {arg}={width}")


def dot_score(q: Tensor, k: Tensor) -> Tensor:
    """Dot-product score ``e(q, k) = qᵀk`` (Li (Transformer Part I), "Self-Attention"; López et
    al. (Attention Mechanisms), eq. 5).

    López et al. derive it from the Gaussian score ``−½‖q − k‖² = qᵀk − ½‖k‖² − ½‖q‖²`` by
    dropping the query-only term (it cancels in the softmax) and the key norm (roughly constant
    after normalisation layers).

    ``q (..., n_q, d)``, ``k (..., n_k, d)`` → ``(..., n_q, n_k)``.
    """
    check_query_key(q, k, same_width=True)
    return q @ k.transpose(-2, -1)  # (..., n_q, n_k)


def scaled_dot_score(q: Tensor, k: Tensor) -> Tensor:
    """Scaled dot-product score ``e(q, k) = qᵀk / √d`` (López et al. (Attention Mechanisms), eq. 6;
    Hasegawa-Johnson (ECE 417 Lecture 21)).

    Hasegawa-Johnson (ECE 417 Lecture 21), "The Scaled Dot-Product"; López et al. (Attention
    Mechanisms), "Dot Product Attention Function".

    Why ``√d``: if the ``d`` entries of ``q`` and ``k`` are independent with mean 0 and
    variance 1, each product ``q_t k_t`` has mean 0 and variance 1, so their sum ``qᵀk`` has
    mean 0 and variance ``d``. Dividing by ``√d`` brings the variance back to 1 whatever the
    width, which keeps the softmax out of its saturated, vanishing-gradient regime.

    ``q (..., n_q, d)``, ``k (..., n_k, d)`` → ``(..., n_q, n_k)``.
    """
    check_query_key(q, k, same_width=True)
    return (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)


def cosine_score(q: Tensor, k: Tensor, eps: float = 1e-8, *, check: bool = True) -> Tensor:
    """Cosine similarity ``e(q, k) = q̂ᵀk̂`` with ``x̂ = x / ‖x‖`` (Hasegawa-Johnson (ECE 417
    Lecture 21), "Cosine Distance").

    Ignores magnitudes: by Cauchy–Schwarz the score lies in ``[−1, 1]``. Norms are clamped to
    ``eps`` so a zero vector scores 0 instead of NaN.

    ``q (..., n_q, d)``, ``k (..., n_k, d)`` → ``(..., n_q, n_k)``; ``check=False`` for a
    caller that checked them (the NTM's content addressing).
    """
    if check:
        check_query_key(q, k, same_width=True)
    q_hat = F.normalize(q, dim=-1, eps=eps)  # (..., n_q, d)
    k_hat = F.normalize(k, dim=-1, eps=eps)  # (..., n_k, d)
    return q_hat @ k_hat.transpose(-2, -1)  # (..., n_q, n_k)


class Score(nn.Module):
    """The score API: ``e(q, k) = score(q, prepare(k))`` (module doc).

    * ``prepare(keys (..., n_k, d_k))`` → the prepared keys ``(..., n_k, ·)``, once per source;
    * ``score(query (..., n_q, d_q), prepared, previous=None)`` → ``(..., n_q, n_k)``, once per
      step. ``previous (..., n_q, n_k)`` is the previous step's alignment ``α_{i−1}``: Chorowski
      et al. (2015), eq. 1 write every attention as ``α_i = Attend(s_{i−1}, α_{i−1}, h)``;
      content-based scores ignore it, a location-aware one reads it (``reads_previous``).

    Both trust their caller (a model or attention module that checked its own inputs);
    ``forward(q, k, previous=None)`` is the checked entry point for a user.
    """

    same_width = False  # the score needs d_q = d_k (the dot score)
    reads_previous = False  # the score reads α_{i−1} (location-aware)

    def __init__(self, query_dim: int | None = None, key_dim: int | None = None) -> None:
        super().__init__()
        for name, value in (("query_dim", query_dim), ("key_dim", key_dim)):
            if value is not None:
                check_positive(name, value)
        self.query_dim, self.key_dim = query_dim, key_dim

    def prepare(self, keys: Tensor) -> Tensor:
        """The key side of the score: ``(..., n_k, d_k)`` → ``(..., n_k, ·)``."""
        raise NotImplementedError

    def score(self, query: Tensor, prepared: Tensor, previous: Tensor | None = None) -> Tensor:
        """Scores ``(..., n_q, n_k)`` of ``query (..., n_q, d_q)`` against prepared keys."""
        raise NotImplementedError

    def check(self, q: Tensor, k: Tensor, previous: Tensor | None = None) -> None:
        """The entry point's checks of ``q (..., n_q, d_q)`` and ``k (..., n_k, d_k)``:
        ``ValueError`` naming the argument."""
        check_query_key(q, k, same_width=self.same_width)
        if self.query_dim is not None:
            _check_width("q", q, self.query_dim, "query_dim")
        if self.key_dim is not None:
            _check_width("k", k, self.key_dim, "key_dim")

    def forward(self, q: Tensor, k: Tensor, previous: Tensor | None = None) -> Tensor:
        self.check(q, k, previous)
        return self.score(q, self.prepare(k), previous)  # (..., n_q, n_k)


class DotScore(Score):
    """:func:`dot_score` ``e(q, k) = qᵀk`` in the score API (Luong, Pham & Manning 2015,
    "Effective Approaches to Attention-based Neural Machine Translation", eq. 8, *dot*): the
    prepared keys are the keys themselves. No parameters."""

    same_width = True

    def prepare(self, keys: Tensor) -> Tensor:
        return keys  # (..., n_k, d)

    def score(self, query: Tensor, prepared: Tensor, previous: Tensor | None = None) -> Tensor:
        return query @ prepared.transpose(-2, -1)  # (..., n_q, n_k)


class AdditiveScore(Score):
    """Additive (Bahdanau) score ``e(q, k) = w_vᵀ tanh(W_q q + W_k k)`` (López et al. (Attention
    Mechanisms), eq. 9).

    ``W_q ∈ R^{h×d_q}``, ``W_k ∈ R^{h×d_k}`` and ``w_v ∈ R^h`` are learned, so queries and keys
    may have different sizes. Bahdanau et al. (2015), eq. 6 / appendix A.1.2 (no biases); Luong
    et al. (2015)'s *concat* score ``v_aᵀ tanh(W_a [h_t; h̄_s])`` is the same with
    ``W_a = [W_q  W_k]``. The prepared keys are ``W_k k``.

    Args:
        query_dim: ``d_q``.
        key_dim: ``d_k``.
        hidden_dim: ``h``, the width of the one-hidden-layer scoring network.

    Shapes: ``q (..., n_q, d_q)``, ``k (..., n_k, d_k)`` → ``(..., n_q, n_k)``. The hidden
    features take ``(..., n_q, n_k, h)`` memory.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        check_positive("hidden_dim", hidden_dim)
        self.w_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.w_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.w_k(keys)  # (..., n_k, h): W_k k

    def score(
        self, query: Tensor, prepared: Tensor, previous: Tensor | None = None, *,
        extra: Tensor | None = None,
    ) -> Tensor:
        """``w_vᵀ tanh(W_q q + extra + W_k k)`` → ``(..., n_q, n_k)``; ``extra`` as :meth:`hidden`."""
        return self.w_v(self.features(query, prepared, extra)).squeeze(-1)

    def features(self, query: Tensor, prepared: Tensor, extra: Tensor | None = None) -> Tensor:
        """The scoring network's hidden layer ``tanh(W_q q + extra + W_k k)`` ``(..., n_q, n_k, h)``,
        as ``2 σ(2x) - 1`` (the same function; PyTorch's CPU ``sigmoid`` is several times
        faster than its ``tanh`` on these sizes)."""
        return torch.sigmoid(2 * self.hidden(query, prepared, extra)).mul(2).sub(1)

    def hidden(self, query: Tensor, prepared: Tensor, extra: Tensor | None = None) -> Tensor:
        """``W_q q + extra + W_k k`` for every query-key pair, before the ``tanh``:
        ``(..., n_q, n_k, h)``. ``extra`` (broadcastable to ``(..., n_q, n_k, h)``) is what a
        variant adds to the sum: the location features ``U f_{i,j} + b`` of Chorowski et al.
        (:class:`~attnlab.attention.location.LocationAwareScore`), the LSTMN's ``W_x x_t``."""
        hidden = self.w_q(query).unsqueeze(-2)  # (..., n_q, 1, h): W_q q
        if extra is not None:
            hidden = hidden + extra  # (..., n_q, n_k | 1, h)
        return hidden + prepared.unsqueeze(-3)  # (..., n_q, n_k, h)

    def hidden_grad(self, grad_scores: Tensor, features: Tensor) -> tuple[Tensor, Tensor]:
        """The backward of :meth:`score` for a model that writes its own (the LSTMN's window,
        :mod:`attnlab.models.lstmn_window`): ``grad_scores`` ``(..., n_q, n_k)`` and the
        :meth:`features` it kept → the gradient of :meth:`hidden`'s sum ``(..., n_q, n_k, h)``
        (so of ``W_q q``, of ``extra`` and of ``W_k k``, summed over what each broadcasts) and
        of ``w_v`` ``(1, h)``."""
        grad_v = (grad_scores.unsqueeze(-2) @ features).flatten(0, -2).sum(0, keepdim=True)  # (1, h)
        return grad_scores.unsqueeze(-1) * self.w_v.weight[0] * (1 - features * features), grad_v


class BilinearScore(DotScore):
    """Bilinear score ``e(q, k) = qᵀ M k`` (López et al. (Attention Mechanisms), "Vectors q and k_i
    with different lengths").

    ``M ∈ R^{d_q×d_k}`` is learned and "translates between both spaces", so queries and keys may
    have different sizes (Luong et al. 2015, eq. 8, call it the *general* score). It is the dot
    score against the prepared keys ``M k``.

    Shapes: ``q (..., n_q, d_q)``, ``k (..., n_k, d_k)`` → ``(..., n_q, n_k)``.
    """

    same_width = False

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))  # M
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Keeps qᵀMk at unit variance for unit-variance q and k, the scaled-dot argument again.
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(self.query_dim * self.key_dim))

    def prepare(self, keys: Tensor) -> Tensor:
        return keys @ self.weight.transpose(0, 1)  # (..., n_k, d_q): M k
