"""What a notebook view carries: arrays checked at the view's entry point and written compactly.

Attention weights travel as the attention explorer writes them (:mod:`attnlab.explorer.quantize`):
each head ``(n_q, n_k)`` one record of ``n_q`` float32 row maxima and uint8 levels
``round(255 w_ij / m_i)`` (the lower triangle alone of a causal head, Vaswani et al. 2017,
"Attention Is All You Need", §3.2.3), zlib-compressed and base64-encoded
(:func:`attnlab.explorer.readings.packed`), and every head's ``32 × 32`` thumbnail — SmolLM2
reading 512 tokens, 30 layers × 9 heads, is about 12 MB of page instead of 283 MB of float32. A
payload is the JSON the page's script (``attention.js``, ``views.js``) draws.

Other arrays (a query's and keys' vectors, an image, a memory's weightings over time) are raw
float32 or uint8 levels between two bounds, base64-encoded. Every function checks its input and
says in one line what is wrong with it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnlab.explorer.quantize import LEVELS, quantize_heads, thumbnails
from attnlab.explorer.readings import packed

MAX_TOKENS = 2048  # a side of one drawn matrix: 2048² uint8 levels a head, a 2048-pixel canvas


def as_tensor(values: Any, name: str) -> Tensor:
    """``values`` (a tensor, an array or nested lists) as a float32 CPU tensor, every entry finite."""
    try:
        if isinstance(values, Tensor):
            tensor = values.detach()
        else:
            tensor = torch.as_tensor(np.asarray(values, dtype=float))
    except (TypeError, ValueError) as why:
        raise ValueError(f"{name} must be an array of numbers, got {type(values).__name__}: {why}") from None
    tensor = tensor.float().cpu()
    if not torch.isfinite(tensor).all():
        bad = int((~torch.isfinite(tensor)).sum())
        raise ValueError(f"{name} must be finite, got {bad} NaN or infinite entries")
    return tensor


def attention_weights(weights: Any, name: str = "weights") -> Tensor:
    """``weights`` ``(n_q, n_k)``, ``(H, n_q, n_k)`` or ``(L, H, n_q, n_k)`` as ``(L, H, n_q, n_k)``;
    non-negative (attention weights, or any map of relevance ≥ 0)."""
    tensor = as_tensor(weights, name)
    if not 2 <= tensor.dim() <= 4 or 0 in tensor.shape:
        raise ValueError(f"{name} must be (n_q, n_k), (H, n_q, n_k) or (L, H, n_q, n_k), got shape "
                         f"{tuple(tensor.shape)}")
    while tensor.dim() < 4:
        tensor = tensor.unsqueeze(0)
    if max(tensor.shape[-2:]) > MAX_TOKENS:
        raise ValueError(f"a view draws at most {MAX_TOKENS} tokens a side, got {tuple(tensor.shape[-2:])}: "
                         "slice the weights")
    if (low := float(tensor.min())) < 0:
        raise ValueError(f"{name} must be ≥ 0 (attention weights), got a minimum of {low:.4g}")
    return tensor


def token_labels(labels: Sequence[Any] | None, n: int, name: str, axis: str) -> list[str]:
    """``labels`` as ``n`` strings (``None``: the positions 1..n)."""
    if labels is None:
        return [str(i + 1) for i in range(n)]
    if isinstance(labels, str):
        raise ValueError(f"{name} must be a list of {n} labels, got one string {labels[:40]!r}")
    labels = [str(label) for label in labels]
    if len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the weights have {n} {axis}")
    return labels


def is_causal(weights: Tensor) -> bool:
    """Whether ``weights (L, H, n, n)`` attend only backwards: square, more than one token, and
    exactly 0 above every diagonal (a GPT's masked softmax)."""
    n_q, n_k = weights.shape[-2:]
    return n_q == n_k > 1 and not torch.triu(weights, diagonal=1).any()


def with_mean_head(weights: Tensor) -> tuple[Tensor, list[str]]:
    """``weights (L, H, n_q, n_k)`` and, when ``H > 1``, each layer's mean over its heads as a
    last head ``(L, H + 1, n_q, n_k)``; the heads' labels (``1 … H``, ``mean``)."""
    heads = weights.shape[1]
    labels = [str(h + 1) for h in range(heads)]
    if heads == 1:
        return weights, labels
    return torch.cat([weights, weights.mean(dim=1, keepdim=True)], dim=1), [*labels, "mean"]


def attention_payload(weights: Tensor, tokens: list[str], keys: list[str] | None = None, *,
                      head_labels: list[str] | None = None) -> dict[str, Any]:
    """The JSON of attention ``weights (L, H, n_q, n_k)`` over query ``tokens`` (and key
    ``keys``, a cross-attention's; ``None``: the tokens): records, thumbnails, shape, labels."""
    layers, heads, n_q, n_k = weights.shape
    causal = keys is None and is_causal(weights)
    size, data = thumbnails(weights)
    payload: dict[str, Any] = {
        "tokens": tokens, "layers": layers, "heads": heads, "causal": causal,
        "thumbnail": {"size": size, "data": base64.b64encode(data).decode("ascii")},
        "records": packed(quantize_heads(weights, causal)), "compressed": "deflate",
        "vmax": max(1.0, float(weights.max())),
    }
    if keys is not None:
        payload["keys"] = keys
    if head_labels is not None:
        payload["headLabels"] = head_labels
    return payload


def float32_base64(values: Tensor) -> str:
    """``values`` as little-endian float32 bytes, base64-encoded (row-major)."""
    return base64.b64encode(values.float().contiguous().numpy().astype("<f4").tobytes()).decode("ascii")


def uint8_base64(values: Tensor) -> str:
    """``values`` (integers 0..255) as bytes, base64-encoded (row-major)."""
    levels = values.round().clamp(0, LEVELS).to(torch.uint8).contiguous()
    return base64.b64encode(levels.numpy().tobytes()).decode("ascii")


def levels_between(values: Tensor, low: float, high: float) -> str:
    """``values`` as uint8 levels ``round(255 (v - low) / (high - low))``, base64-encoded: a
    value comes back as ``low + (high - low) level / 255``, within ``(high - low) / 510``."""
    span = high - low if high > low else 1.0
    return uint8_base64((values - low) * (LEVELS / span))


def image_payload(image: Any) -> dict[str, Any]:
    """An image ``(C, H, W)`` (``C`` = 1 or 3) or ``(H, W)`` in [0, 1] as uint8 ``H × W × C``."""
    pixels = as_tensor(image, "image")
    if pixels.dim() == 2:
        pixels = pixels.unsqueeze(0)
    if pixels.dim() != 3 or pixels.shape[0] not in (1, 3):
        raise ValueError(f"image must be (C, H, W) with C = 1 or 3, or (H, W), got shape "
                         f"{tuple(pixels.shape)}")
    if float(pixels.min()) < 0 or float(pixels.max()) > 1:
        raise ValueError(f"image must be in [0, 1], got values in [{float(pixels.min()):.4g}, "
                         f"{float(pixels.max()):.4g}]")
    channels, height, width = pixels.shape
    return {"width": width, "height": height, "channels": channels,
            "data": uint8_base64(pixels.permute(1, 2, 0) * LEVELS)}
