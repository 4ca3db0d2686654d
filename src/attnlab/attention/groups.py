"""Grouped-query attention's two products (Ainslie et al. 2023; multi-query: Shazeer 2019) without
copying a key or a value.

``H_kv`` key/value heads serve ``H = g · H_kv`` query heads: query head ``h`` reads key/value head
``h // g`` (the order of ``repeat_interleave(g, dim=-3)``). Written out, each shared head would be
repeated ``g`` times — ``g`` copies of the cache a step. Here the ``g`` query heads of a group are
stacked as rows of one product instead::

    Q (..., H, n_q, d)  → (..., H_kv, g·n_q, d)      a view of the group's queries, one above another
    S = Q Kᵀ            → (..., H_kv, g·n_q, n_k)    = (..., H, n_q, n_k), each head's scores
    A V (A as S)        → (..., H_kv, g·n_q, d_v)    = (..., H, n_q, d_v)

so masks, the softmax and the weights keep their ``(..., H, n_q, n_k)`` shape. With ``H_kv = H``
both are the plain products.
"""

from __future__ import annotations

from torch import Tensor


def _stacked(t: Tensor, kv_heads: int) -> Tensor:
    """``(..., H, n, m)`` → ``(..., H_kv, g·n, m)``: each group's heads stacked as rows."""
    *lead, heads, n, m = t.shape
    return t.reshape(*lead, kv_heads, (heads // kv_heads) * n, m)


def grouped(q: Tensor, kv: Tensor) -> bool:
    """Whether ``kv`` ``(..., H_kv, n_k, d)`` has fewer heads than ``q`` ``(..., H, n_q, d)``."""
    return q.dim() >= 3 and kv.shape[-3] != q.shape[-3]


def scores(q: Tensor, k: Tensor) -> Tensor:
    """``Q Kᵀ`` ``(..., H, n_q, n_k)`` for ``q`` ``(..., H, n_q, d)`` and ``k`` ``(..., H_kv, n_k, d)``."""
    if not grouped(q, k):
        return q @ k.transpose(-2, -1)
    return (_stacked(q, k.shape[-3]) @ k.transpose(-2, -1)).view(*q.shape[:-1], k.shape[-2])


def mix(weights: Tensor, v: Tensor) -> Tensor:
    """``A V`` ``(..., H, n_q, d_v)`` for the weights ``(..., H, n_q, n_k)`` and ``v``
    ``(..., H_kv, n_k, d_v)``."""
    if not grouped(weights, v):
        return weights @ v
    return (_stacked(weights, v.shape[-3]) @ v).view(*weights.shape[:-1], v.shape[-1])
