"""Additive (Bahdanau) attention (López et al. (Attention Mechanisms) eqs. 9–10;
Hasegawa-Johnson (ECE 417 Lecture 21) "Attention"; Ba (CSC413 Lecture 8)).

``Attention(q, D) = Σ_i softmax_i(w_vᵀ tanh(W_q q + W_k k_i)) v_i``: the additive score of
:class:`~attnlab.attention.scoring.AdditiveScore`, a masked softmax over keys, and attention
pooling of the values. Queries and keys may have different sizes, which is why Bahdanau et al.
(2015) used it between a decoder state ``s_{i−1}`` and encoder states ``h_j``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.masks import as_attention_mask, lengths_to_mask, masked_softmax
from attnlab.attention.scoring import AdditiveScore
from attnlab.validation import check_floating, check_probability, check_rank, shape_str


class AdditiveAttention(nn.Module):
    """Bahdanau attention over ``(key, value)`` pairs with a learned additive score.

    Args:
        query_dim: ``d_q``, width of the queries (e.g. the decoder state).
        key_dim: ``d_k``, width of the keys (e.g. the encoder states).
        hidden_dim: ``h``, width of the scoring network.
        dropout: dropout probability on the attention weights during training.

    Forward:
        queries ``(B, n_q, d_q)``, keys ``(B, n_k, d_k)``, values ``(B, n_k, d_v)``.
        ``mask``: docs/design.md's convention — boolean (``True`` = allowed) or additive float,
        read by the mask contract (:func:`~attnlab.attention.masks.as_attention_mask`): a 2-D
        mask is key padding ``(B, n_k)`` (``True`` = real key), as everywhere else; a 3-D one
        is ``(B, n_q, n_k)``. The ``(B, 1, 1, n_k)`` form of
        :func:`~attnlab.attention.masks.padding_mask` (e.g.
        ``padding_mask(lengths_to_mask(valid_lens, n_k))``) is accepted too.
        ``lengths``: optional ``(B,)`` numbers of valid keys (López et al. (Attention
        Mechanisms), "Masked Softmax Operation": keys ``i > l`` get weight 0); combined with
        ``mask``.

    Returns ``(B, n_q, d_v)``, or ``(output, weights (B, n_q, n_k))`` when ``return_weights``.
    A query whose every key is blocked gets zero weights and a zero output, never NaN.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        check_probability("dropout", dropout)
        self.score = AdditiveScore(query_dim, key_dim, hidden_dim)
        self.dropout = dropout

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        return_weights: bool = False,
        *,
        lengths: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        _check_inputs(queries, keys, values)
        self.score.check(queries, keys)
        batch, n_q, n_k = queries.shape[0], queries.shape[1], keys.shape[1]
        mask = _prepare_mask(mask, lengths, (batch, n_q, n_k))
        scores = self.score.score(queries, self.score.prepare(keys))  # (B, n_q, n_k)
        weights = masked_softmax(scores, mask, check=False)  # (B, n_q, n_k); checked above
        dropped = F.dropout(weights, self.dropout, self.training)  # (B, n_q, n_k)
        out = dropped @ values  # (B, n_q, d_v)
        return (out, weights) if return_weights else out


def _check_inputs(queries: Tensor, keys: Tensor, values: Tensor) -> None:
    for name, t, layout in (
        ("queries", queries, "(B, n_q, d_q)"),
        ("keys", keys, "(B, n_k, d_k)"),
        ("values", values, "(B, n_k, d_v)"),
    ):
        check_rank(name, t, 3, layout)
        check_floating(name, t)
    if keys.shape[:2] != values.shape[:2]:
        raise ValueError(
            f"values has shape {shape_str(values.shape)} but keys have shape "
            f"{shape_str(keys.shape)} (one value per key, same batch)"
        )
    if queries.shape[0] != keys.shape[0]:
        raise ValueError(
            f"keys have batch size {keys.shape[0]} but queries have batch size {queries.shape[0]}"
        )


def _prepare_mask(
    mask: Tensor | None, lengths: Tensor | None, weights_shape: tuple[int, int, int]
) -> Tensor | None:
    """Bring ``mask`` (and ``lengths``) to a mask broadcastable to ``(B, n_q, n_k)``."""
    batch, _, n_k = weights_shape
    if mask is not None:
        if mask.dim() == 4 and mask.shape[1] == 1:
            mask = mask.squeeze(1)  # (B, 1, n_q | 1, n_k) → (B, n_q | 1, n_k)
        mask = as_attention_mask(mask, weights_shape)  # (B, n_k) → (B, 1, n_k); checked
    if lengths is None:
        return mask
    check_rank("lengths", lengths, 1, "(B,)")
    if lengths.shape[0] != batch:
        raise ValueError(f"lengths has {lengths.shape[0]} entries but the batch size is {batch}")
    valid = lengths_to_mask(lengths, n_k)[:, None, :]  # (B, 1, n_k)
    if mask is None:
        return valid
    if mask.dtype == valid.dtype:
        return mask & valid
    return torch.where(valid, mask, float("-inf"))  # additive mask with padded keys at -inf
