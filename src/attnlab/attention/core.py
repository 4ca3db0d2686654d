"""Scaled dot-product attention: ``softmax(QKᵀ/√d_k + M) V`` (Li (Transformer Part I),
Steinert-Threlkeld (Transformers I), Hasegawa-Johnson (ECE 417 Lecture 21)).

Two paths, one function (docs/design.md):

* **explicit** — :func:`explicit_attention`, the lecture formula line by line; taken when
  ``return_weights=True`` so the weights can be inspected and plotted;
* **fast** — otherwise :func:`~attnlab.attention.kernels.dispatch` picks the quicker way to the
  same value: ``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient
  kernels, memory linear in ``n``), or this formula where it is faster (half precision on CPU,
  short sequences). Everything about speed lives in :mod:`attnlab.attention.kernels`.

Tests pin the two paths to each other. Both follow docs/design.md's mask contract
(:func:`~attnlab.attention.masks.as_attention_mask`) and both return zeros for a query whose
every key is blocked.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.attention import groups, kernels
from attnlab.attention.masks import as_attention_mask, causal_mask, combine_masks, masked_softmax
from attnlab.validation import check_floating, check_probability, check_tensor, shape_str


def self_attention(x: Tensor) -> Tensor:
    """Untrained self-attention ``Y = softmax(X Xᵀ) X`` (Li (Transformer Part I), "Self-Attention
    in Matrix Notation").

    ``x``: ``(..., n, d)`` tokens as rows. Returns ``(..., n, d)``: each output token is a
    convex combination of all input tokens, weighted by inner-product similarity.
    """
    check_tensor("x", x)
    check_floating("x", x)
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., n, d), got shape {shape_str(x.shape)}")
    weights = torch.softmax(x @ x.transpose(-2, -1), dim=-1)  # (..., n, n)
    return weights @ x  # (..., n, d)


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t)
        check_floating(name, t)
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., n, d), got shape {shape_str(t.shape)}"
            )
    if not (q.dim() == k.dim() == v.dim()):
        raise ValueError(
            f"q, k and v must have the same number of dimensions, got q {shape_str(q.shape)}, "
            f"k {shape_str(k.shape)}, v {shape_str(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype) and not torch.is_autocast_enabled(q.device.type):
        raise ValueError(
            f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"k has width {k.shape[-1]} but q has width {q.shape[-1]} (q·k needs d_q = d_k)"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q has width 0 but attention needs d_k >= 1, got shape {shape_str(q.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"v has length {v.shape[-2]} but k has length {k.shape[-2]} (one value per key)")
    heads_shared = q.dim() >= 3 and k.shape[-3] > 0 and q.shape[-3] % k.shape[-3] == 0  # grouped-query
    if k.shape[:-2] != v.shape[:-2] or q.shape[:-3] != k.shape[:-3] or not (
        q.shape[:-2] == k.shape[:-2] or heads_shared
    ):
        raise ValueError(
            f"q, k and v must share their batch dimensions (k and v may have H_kv heads dividing q's "
            f"H), got q {shape_str(q.shape)}, k {shape_str(k.shape)}, v {shape_str(v.shape)}"
        )


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    dropout: float = 0.0,
    return_weights: bool = False,
    scale: float | None = None,
    check: bool = True,
) -> Tensor | tuple[Tensor, Tensor]:
    """``Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V`` (Li (Transformer Part I) "Scaled Self-Attention").

    Args:
        q: ``(..., n_q, d_k)`` queries, e.g. ``(B, H, n_q, d_h)``.
        k: ``(..., n_k, d_k)`` keys.
        v: ``(..., n_k, d_v)`` values.
        mask: boolean (``True`` = allowed) or additive float, read by the mask contract
            (:func:`~attnlab.attention.masks.as_attention_mask`) against the scores
            ``(B, ..., n_q, n_k)``: a 2-D mask is key padding ``(B, n_k)`` (``B`` = the first
            dimension; with 2-D scores, no batch, that is ``(n_q, n_k)`` itself), a 3-D one
            ``(B, n_q, n_k)``, else the scores' rank. The lecture's ``(n_q, n_k)`` matrix ``M``
            for batched scores is ``M[None, None]``.
        is_causal: also block future keys (bottom-right aligned, see :func:`causal_mask`).
        dropout: dropout probability on the weights (pass 0 at evaluation). On CPU any
            dropout > 0 makes PyTorch leave its fused kernel for the O(n²) math path.
        return_weights: also return the weights ``(..., n_q, n_k)``; uses the explicit path.
        scale: score scale, default ``1/√d_k``.
        check: validate the arguments and bring ``mask`` to the scores' rank; ``False`` for a
            caller that did both (:class:`~attnlab.attention.MultiHeadAttention`).

    Returns:
        ``(..., n_q, d_v)`` output, or ``(output, weights)`` when ``return_weights``.
    """
    if check:
        _check_qkv(q, k, v)
        check_probability("dropout", dropout)
        mask = as_attention_mask(mask, (*q.shape[:-1], k.shape[-2]))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if return_weights:
        return explicit_attention(q, k, v, mask, is_causal=is_causal, dropout=dropout, scale=scale)
    return kernels.dispatch(
        explicit_attention, q, k, v, mask, is_causal=is_causal, dropout=dropout, scale=scale
    )


def explicit_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, is_causal: bool, dropout: float, scale: float
) -> tuple[Tensor, Tensor]:
    """The formula line by line: ``S = (Q/√d_k) Kᵀ``, ``A = softmax(S + M)`` (``M`` the mask,
    plus ``-∞`` above the causal diagonal), output ``A V``. Returns ``(output (..., n_q, d_v),
    weights (..., n_q, n_k))``; half-precision scores take the softmax in float32."""
    if is_causal:
        mask = combine_masks(mask, causal_mask(q.shape[-2], k.shape[-2], device=q.device))
    # (Q/√d_k) Kᵀ = Q Kᵀ/√d_k: scaling the (n_q, d_k) queries is cheaper than the (n_q, n_k) scores.
    scores = groups.scores(q * scale, k)  # (..., n_q, n_k)
    if scores.dtype in (torch.bfloat16, torch.float16):  # the softmax in float32, like the kernels
        weights = masked_softmax(scores.float(), mask, check=False).to(scores.dtype)
    else:
        weights = masked_softmax(scores, mask, check=False)  # (..., n_q, n_k)
    dropped = F.dropout(weights, dropout) if dropout > 0 else weights
    return groups.mix(dropped, v), weights  # (..., n_q, d_v), (..., n_q, n_k)
