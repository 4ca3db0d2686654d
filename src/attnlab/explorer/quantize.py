"""Attention weights in few bytes: one head's ``(n, n)`` matrix as one binary record, and every
head's downsampled picture, for the explorer's attention map (:mod:`.readings`).

A GPT's self-attention over ``n`` tokens is ``(L, H, n, n)`` numbers — SmolLM2-135M reading
512 tokens, 30 · 9 · 512² ≈ 70.8 M, 283 MB as float32 — far too much to send as JSON. Each
head travels alone, as the page asks for it, in a record of ``4n + R`` bytes:

* ``n`` little-endian float32 row maxima ``m_i`` (each row's largest weight);
* the rows' weights quantized to uint8 against their own maximum, ``q_ij = round(255 w_ij / m_i)``,
  decoded as ``w_ij ≈ q_ij m_i / 255`` (:func:`dequantize`): within half a step, ``m_i / 510``, of
  the float weight, the largest weight of every row all but exact;
* of a causal model only the lower triangle, row ``i`` holding columns ``0..i`` (``R = n(n+1)/2``):
  the masked softmax puts exactly 0 above the diagonal (Vaswani et al. 2017, "Attention Is All
  You Need", §3.2.3), so nothing is lost; of a bidirectional one, every row (``R = n²``); of
  a cross-attention (``n`` queries over ``n_k`` keys: a translator's, a captioner's, the notebook
  views' heatmaps, :mod:`attnlab.views`), every row of ``n_k`` columns (``4n + R``, ``R = n n_k``).

At ``n = 512``, causal, a record is 133,376 bytes, the whole model 36 MB instead of 283 MB.
The attention map's overview (Vig 2019, "A Multiscale Visualization of Attention in the
Transformer Model": the model view, every layer × head at a glance) draws each head from
:func:`thumbnails`: the matrix average-pooled to at most ``size × size`` blocks, scaled to its own
largest block, uint8 — 30 · 9 · 32² = 276 KB for all of SmolLM2's heads.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

THUMBNAIL = 32
LEVELS = 255


def record_size(n: int, causal: bool, keys: int | None = None) -> int:
    """The bytes of one head's record over ``n`` queries (and ``keys`` keys, default ``n``)."""
    return 4 * n + (n * (n + 1) // 2 if causal else n * (n if keys is None else keys))


def quantize_heads(weights: Tensor, causal: bool) -> list[bytes]:
    """Every head of ``weights`` ``(L, H, n, n)`` (rows the queries, each summing to 1; not
    causal, ``(L, H, n, n_k)`` too) as its record, layer-major: record ``l · H + h`` is layer
    ``l``'s head ``h``. ``causal``: keep only the lower triangle (a ``ValueError`` when a weight
    above the diagonal is not 0)."""
    if weights.dim() != 4 or (causal and weights.shape[-1] != weights.shape[-2]):
        raise ValueError(f"attention weights must be (layers, heads, n, n), got {tuple(weights.shape)}")
    n, keys = weights.shape[-2:]
    flat = weights.detach().float().cpu().reshape(-1, n * keys)
    maxima = flat.view(-1, n, keys).amax(dim=-1)  # (L·H, n)
    scale = torch.where(maxima > 0, LEVELS / maxima, torch.zeros_like(maxima))
    rows, cols = torch.tril_indices(n, n) if causal else torch.ones(n, keys).nonzero().T
    kept, above = rows * keys + cols, torch.triu_indices(n, keys, 1)
    above = above[0] * keys + above[1]
    records = []
    for head, row_max, row_scale in zip(flat, maxima, scale, strict=True):  # ~1 ms a head at n = 512
        if causal and head.index_select(0, above).any():
            raise ValueError("a causal record keeps the lower triangle, but a weight above the diagonal "
                             "is not 0")
        levels = head.index_select(0, kept).mul_(row_scale.index_select(0, rows)).round_().clamp_(0, LEVELS)
        records.append(row_max.numpy().astype("<f4").tobytes() + levels.to(torch.uint8).numpy().tobytes())
    return records


def dequantize(record: bytes, n: int, causal: bool, keys: int | None = None) -> Tensor:
    """One head's ``(n, n)`` float32 weights (``(n, keys)`` of a cross-attention) from its
    record (zeros above the diagonal of a causal one) — what the page's script decodes,
    written again in Python."""
    keys = n if keys is None else keys
    if len(record) != record_size(n, causal, keys):
        size = record_size(n, causal, keys)
        raise ValueError(f"a record of {n} tokens has {size} bytes, got {len(record)}")
    maxima = np.frombuffer(record[:4 * n], dtype="<f4")
    levels = np.frombuffer(record[4 * n:], dtype=np.uint8).astype(np.float32)
    matrix = np.zeros((n, keys), dtype=np.float32)
    if causal:
        matrix[np.tril_indices(n)] = levels
    else:
        matrix[:] = levels.reshape(n, keys)
    return torch.from_numpy(matrix * (maxima / LEVELS)[:, None])


def thumbnails(weights: Tensor, size: int = THUMBNAIL) -> tuple[int, bytes]:
    """``(t, data)``: every head of ``weights`` ``(L, H, n, n_k)`` average-pooled to ``t × t``
    blocks (``t = min(max(n, n_k), size)``; a short side's rows repeated), each scaled to its own
    largest block, as uint8, layer-major then row-major (``L · H · t²`` bytes)."""
    t = min(max(weights.shape[-2:]), size)
    pooled = torch.nn.functional.adaptive_avg_pool2d(weights.detach().float().cpu(), t)  # (L, H, t, t)
    top = pooled.amax(dim=(-2, -1), keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    levels = (pooled / top * LEVELS).round().clamp(0, LEVELS).to(torch.uint8)
    return t, levels.contiguous().numpy().tobytes()
