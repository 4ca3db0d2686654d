"""The position-wise feed-forward network of a Transformer block.

Steinert-Threlkeld (Transformers I), "Basic Transformer Encoder Block": "same MLP applied at
each position"; Vaswani et al. eq. 2, ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``. The
activation is one of :data:`ACTIVATIONS`: ReLU (the paper), GELU, or SwiGLU (Shazeer 2020,
``(Swish(x W) ⊗ x V) W_2``).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.linear import Linear
from attnlab.validation import check_choice, check_positive, check_probability, check_width

ACTIVATIONS = ("relu", "gelu", "swiglu")


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``FFN(x) = act(x W_1 + b_1) W_2 + b_2``.

    Steinert-Threlkeld (Transformers I) ("Basic Transformer Encoder Block": "same MLP applied at
    each position"); Vaswani et al. eq. 2 with ReLU; GELU (Hendrycks & Gimpel, exact erf form,
    as BERT and ``nn.Transformer(activation="gelu")``); SwiGLU (Shazeer 2020):
    ``FFN(x) = (Swish(x W) ⊗ x V) W_2`` where ``w1`` holds ``[W; V]`` stacked, so one matmul
    computes both halves.

    Args:
        d_model: input and output width ``d``.
        d_ff: hidden width (per half for SwiGLU).
        activation: "relu", "gelu" or "swiglu".
        dropout: dropout on the hidden activations (PyTorch's layers have it; the paper
            does not — default 0).
        bias: learn ``b_1``, ``b_2``.

    ``x``: ``(..., d_model)`` → ``(..., d_model)``; ``ffn(x, check=False)`` skips the width
    check (a layer's own activations).
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
        check_choice("activation", activation, ACTIVATIONS)
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        hidden = 2 * d_ff if activation == "swiglu" else d_ff
        self.w1 = Linear(d_model, hidden, bias=bias)
        self.w2 = Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, *, check: bool = True) -> Tensor:
        if check:  # False: a layer transforming its own activations
            check_width("x", x, self.d_model)
        h = self.w1(x)  # (..., d_ff) or (..., 2 d_ff) for SwiGLU
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            gate, up = h.chunk(2, dim=-1)  # 2 × (..., d_ff)
            h = F.silu(gate) * up  # (..., d_ff)
        return self.w2(self.dropout(h) if self.training else h)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"
