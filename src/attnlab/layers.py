"""Position-wise feed-forward network and the normalisations of a Transformer block.

* :class:`FeedForward` — "same MLP applied at each position" (seed 001, "Basic Transformer
  Encoder Block"; Vaswani et al. eq. 2 ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``), with ReLU,
  GELU or SwiGLU (Shazeer 2020, ``(Swish(x W) ⊗ x V) W_2``).
* :class:`LayerNorm` — seed 001, "Final Ingredients: Layer Normalization":
  ``LN(x) = (x − μ) / σ · γ + β`` over each row, with ``σ = √(Var[x] + ε)``.
* :class:`RMSNorm` — Zhang & Sennrich 2019: ``x / √(mean(x²) + ε) · γ`` (no centring, no β).
* :func:`make_norm` — one config string chooses the normalisation.

Both norms have two paths, like attention (DESIGN.md): the formula written out
(:func:`layer_norm`, :func:`rms_norm`) and PyTorch's fused kernel (default, faster fwd+bwd).
Tests pin the formula to ``torch.nn.functional.layer_norm`` and the module to the formula.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.validation import check_positive, check_probability, check_tensor

ACTIVATIONS = ("relu", "gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")


def _check_width(name: str, x: Tensor, d: int) -> None:
    check_tensor(name, x)
    if x.dim() == 0 or x.shape[-1] != d:
        width = "a scalar" if x.dim() == 0 else f"width {x.shape[-1]}"
        raise ValueError(f"{name} has {width} but the layer expects width {d} (last dimension)")


def layer_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float) -> Tensor:
    """Seed 001's layer norm written out: ``(x − μ) / √(σ² + ε) · γ + β`` over the last dim.

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
    """Layer normalisation over the last dimension (seed 001, "Layer Normalization").

    Args:
        d: width of each row.
        eps: ε, added to the variance inside the square root.
        bias: learn β (γ is always learned).
        fused: use ``torch.nn.functional.layer_norm`` (same formula, one kernel); ``False``
            evaluates :func:`layer_norm` line by line.

    Parameters: ``weight`` = γ ``(d,)`` (init 1), ``bias`` = β ``(d,)`` (init 0), named as in
    ``torch.nn.LayerNorm`` so state dicts map one to one. Input and output ``(..., d)``.
    """

    def __init__(self, d: int, eps: float = 1e-5, *, bias: bool = True, fused: bool = True) -> None:
        super().__init__()
        check_positive("d", d)
        check_positive("eps", eps, allow_zero=True)
        self.d, self.eps, self.fused = d, eps, fused
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        _check_width("x", x, self.d)
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

    def forward(self, x: Tensor) -> Tensor:
        _check_width("x", x, self.d)
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


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``FFN(x) = act(x W_1 + b_1) W_2 + b_2``.

    Seed 001 ("Basic Transformer Encoder Block": "same MLP applied at each position");
    Vaswani et al. eq. 2 with ReLU; GELU (Hendrycks & Gimpel, exact erf form, as BERT and
    ``nn.Transformer(activation="gelu")``); SwiGLU (Shazeer 2020):
    ``FFN(x) = (Swish(x W) ⊗ x V) W_2`` where ``w1`` holds ``[W; V]`` stacked, so one matmul
    computes both halves.

    Args:
        d_model: input and output width ``d``.
        d_ff: hidden width (per half for SwiGLU).
        activation: "relu", "gelu" or "swiglu".
        dropout: dropout on the hidden activations (PyTorch's layers have it; the paper
            does not — default 0).
        bias: learn ``b_1``, ``b_2``.

    ``x``: ``(..., d_model)`` → ``(..., d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        check_positive("d_model", d_model)
        check_positive("d_ff", d_ff)
        check_probability("dropout", dropout)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        hidden = 2 * d_ff if activation == "swiglu" else d_ff
        self.w1 = nn.Linear(d_model, hidden, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        _check_width("x", x, self.d_model)
        h = self.w1(x)  # (..., d_ff) or (..., 2 d_ff) for SwiGLU
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            gate, up = h.chunk(2, dim=-1)  # 2 × (..., d_ff)
            h = F.silu(gate) * up  # (..., d_ff)
        return self.w2(self.dropout(h))  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"
