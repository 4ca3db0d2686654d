"""Sequence pooling: one vector per sequence from its token states (not attention pooling).

A sentence embedding or a classifier's feature reads the token states ``h`` ``(B, n, d)`` of
the real (non-padding) tokens one of four ways, named by :data:`POOLINGS`:

* ``mean`` — their average, ``Σ_i m_i h_i / max(Σ_i m_i, 1e-9)`` (sentence-transformers);
* ``max`` — the per-feature maximum over them (0 for a row without any);
* ``cls`` — the first token ``h_0`` (BERT's ``[CLS]``; Devlin et al. 2019);
* ``last`` — the last real token (GPT-1's "extract" token; Radford et al. 2018, §3.2).

(Attention *pooling* — a query weighting a database of values — is
:mod:`attnlab.attention.pooling`.) Sequences are right-padded: the mask ``(B, n)`` is ``True``
on the first tokens of each row.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.validation import check_choice, check_rank, shape_str

POOLINGS = ("mean", "max", "cls", "last")


def as_bool_mask(mask: Tensor | None, shape: tuple[int, int], name: str = "attention_mask") -> Tensor | None:
    """``(B, n)`` with 1 = real token (bool or integer) → bool ``(B, n)``; ``None`` stays ``None``."""
    if mask is None:
        return None
    check_rank(name, mask, 2, "(B, n)")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(
            f"{name} has shape {shape_str(mask.shape)} but input_ids have shape {shape_str(shape)}"
        )
    if mask.is_floating_point():
        raise ValueError(f"{name} must be bool or integer (1 = real token), got {mask.dtype}")
    return mask if mask.dtype == torch.bool else mask != 0


def pool(hidden: Tensor, attention_mask: Tensor | None = None, mode: str = "mean") -> Tensor:
    """Sequence vectors ``(B, d)`` from token states ``hidden`` ``(B, n, d)``.

    ``attention_mask`` ``(B, n)``: bool or 0/1, ``1`` = real token; ``None`` = all real.
    ``mode`` is one of :data:`POOLINGS` (see the module docstring).
    """
    check_rank("hidden", hidden, 3, "(B, n, d)")
    check_choice("mode", mode, POOLINGS)
    if mode == "cls":
        return hidden[:, 0]  # (B, d)
    mask = as_bool_mask(attention_mask, hidden.shape[:2])
    if mask is None:
        if mode == "last":
            return hidden[:, -1]  # (B, d)
        return hidden.mean(dim=1) if mode == "mean" else hidden.amax(dim=1)  # (B, d)
    m = mask.unsqueeze(-1)  # (B, n, 1)
    if mode == "last":
        last = (mask.sum(dim=1) - 1).clamp(min=0)  # (B,) index of the last real token
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # (B, d)
    if mode == "mean":
        total = (hidden * m.to(hidden.dtype)).sum(dim=1)  # (B, d)
        count = m.sum(dim=1).to(hidden.dtype).clamp(min=1e-9)  # (B, 1)
        return total / count  # (B, d)
    out = hidden.masked_fill(~m, float("-inf")).amax(dim=1)  # (B, d)
    return out.masked_fill(~m.any(dim=1), 0.0)
