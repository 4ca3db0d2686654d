"""The normalisations of a Transformer block: layer norm and RMSNorm.

* :class:`LayerNorm` — Steinert-Threlkeld (Transformers I), "Final Ingredients: Layer
  Normalization": ``LN(x) = (x − μ) / σ · γ + β`` over each row, with ``σ = √(Var[x] + ε)``.
* :class:`RMSNorm` — Zhang & Sennrich 2019: ``x / √(mean(x²) + ε) · γ`` (no centring, no β).
* :func:`make_norm` — one config string (:data:`NORMS`) chooses the normalisation.

Both norms have two paths, like attention (docs/design.md, "Two paths, one function"): the
formula written out (:func:`layer_norm`, :func:`rms_norm`) and PyTorch's fused kernel
(default, faster forward and backward). Tests pin the formula to
``torch.nn.functional.layer_norm`` and the module to the formula.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.validation import check_positive, check_width

NORMS = ("layernorm", "rmsnorm")


def layer_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float) -> Tensor:
    """Steinert-Threlkeld's (Transformers I) layer norm written out:
    ``(x − μ) / √(σ² + ε) · γ + β`` over the last dim.

    ``σ²`` is the *biased* variance (divide by ``d``, not ``d − 1``) and ``ε`` sits inside the
    root, as in Ba et al. (2016) and ``torch.nn.functional.layer_norm`` (the slide writes
    ``σ + ε``; the two differ only for tiny ``σ``). ``x``: ``(..., d)``; ``weight`` (γ) and
    ``bias`` (β): ``(d,)`` or ``None``. Returns ``(..., d)``.
    """
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = (x - mu).pow(2).mean(dim=-1, keepdim=True)  # (..., 1) biased variance
    y = (x - mu) * torch.rsqrt(var + eps)  # (..., d)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x: Tensor, weight: Tensor | None, eps: float) -> Tensor:
    """RMSNorm written out: ``x / √(mean(x²) + ε) · γ`` over the last dim. ``x``: ``(..., d)``."""
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., d)
    return y if weight is None else y * weight


class LayerNorm(nn.Module):
    """Layer normalisation over the last dimension (Steinert-Threlkeld (Transformers I), "Layer
    Normalization").

    Args:
        d: width of each row.
        eps: ε, added to the variance inside the square root.
        bias: learn β (γ is always learned).
        fused: use ``torch.nn.functional.layer_norm`` (same formula, one kernel); ``False``
            evaluates :func:`layer_norm` line by line.

    Parameters: ``weight`` = γ ``(d,)`` (init 1), ``bias`` = β ``(d,)`` (init 0), named as in
    ``torch.nn.LayerNorm`` so state dicts map one to one. Input and output ``(..., d)``;
    ``norm(x, check=False)`` skips the width check (a layer's own activations).
    """

    def __init__(self, d: int, eps: float = 1e-5, *, bias: bool = True, fused: bool = True) -> None:
        super().__init__()
        check_positive("d", d)
        check_positive("eps", eps, allow_zero=True)
        self.d, self.eps, self.fused = d, eps, fused
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: Tensor, *, check: bool = True) -> Tensor:
        if check:  # False: a layer normalising its own activations
            check_width("x", x, self.d)
        if self.fused:
            return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(nn.Module):
    """Root-mean-square normalisation ``x / √(mean(x²) + ε) · γ`` (Zhang & Sennrich 2019).

    Layer norm without centring and without β: cheaper, used by LLaMA-style pre-LN blocks.
    ``weight`` = γ ``(d,)``. ``fused`` picks ``torch.nn.functional.rms_norm`` over the
    written-out :func:`rms_norm`. Input and output ``(..., d)``.
    """

    def __init__(self, d: int, eps: float = 1e-5, *, fused: bool = True) -> None:
        super().__init__()
        check_positive("d", d)
        check_positive("eps", eps, allow_zero=True)
        self.d, self.eps, self.fused = d, eps, fused
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor, *, check: bool = True) -> Tensor:
        if check:  # False: a layer normalising its own activations
            check_width("x", x, self.d)
        if self.fused:
            return F.rms_norm(x, (self.d,), self.weight, self.eps)
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}"


def make_norm(kind: str, d: int, eps: float = 1e-5, *, bias: bool = True) -> LayerNorm | RMSNorm:
    """The normalisation named by ``kind`` ∈ {"layernorm", "rmsnorm"} over width ``d``.

    ``bias`` (β) applies to layer norm only; RMSNorm has none.
    """
    if kind == "layernorm":
        return LayerNorm(d, eps, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(d, eps)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")
