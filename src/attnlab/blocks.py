"""Transformer encoder and decoder layers (seed 001 "Full Transformer Encoder Block",
seed 004 "Transformer Machine Translation"; Vaswani et al. §3.1, §5.4).

Each sublayer ``f`` (self-attention, cross-attention, feed-forward) is wrapped in a residual
connection (seed 001, "Residual Connections": replace ``f(x)`` with ``x + f(x)``) and a norm:

* post-LN (the paper, ``norm_first=False``): ``x ← Norm(x + Dropout(f(x)))``
* pre-LN (``norm_first=True``):              ``x ← x + Dropout(f(Norm(x)))``

Dropout sits where the paper puts it: on each sublayer's output, before the residual add.
Pre-LN stacks need a final norm after the last layer (see :mod:`attnlab.stacks`).

Masks follow DESIGN.md (bool ``True`` = allowed, or additive float). A layer accepts a
``(B, n_k)`` key-padding mask (``True`` = real token), a ``(B, n_q, n_k)`` mask, or any mask
broadcastable to ``(B, H, n_q, n_k)`` given with 4 dimensions.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnlab.attention.masks import combine_masks
from attnlab.attention.multihead import KVCache, MultiHeadAttention
from attnlab.layers import FeedForward, make_norm
from attnlab.validation import check_probability, check_rank, check_tensor, shape_str


def as_attention_mask(
    mask: Tensor | None, batch: int, n_k: int, name: str = "mask"
) -> Tensor | None:
    """Bring a layer's ``mask`` to a 4-D form broadcastable to ``(B, H, n_q, n_k)``.

    ``(B, n_k)`` key padding (``True`` = real token) → ``(B, 1, 1, n_k)``; ``(B, n_q, n_k)`` →
    ``(B, 1, n_q, n_k)``; 4-D masks pass through (checked later against the scores).
    """
    if mask is None:
        return None
    check_tensor(name, mask)
    if mask.dim() == 2:
        if tuple(mask.shape) != (batch, n_k):
            raise ValueError(
                f"{name} has shape {shape_str(mask.shape)} but a 2-D mask is a key-padding mask "
                f"(B, n_k) = ({batch}, {n_k})"
            )
        return mask[:, None, None, :]  # (B, 1, 1, n_k)
    if mask.dim() == 3:
        return mask[:, None]  # (B, 1, n_q, n_k)
    check_rank(name, mask, (2, 3, 4), "(B, n_k), (B, n_q, n_k) or (B, H, n_q, n_k)")
    return mask


def _check_input(name: str, x: Tensor, d_model: int) -> None:
    check_rank(name, x, 3, "(B, n, d_model)")
    if x.shape[-1] != d_model:
        raise ValueError(f"{name} has width {x.shape[-1]} but d_model is {d_model}")


class _Sublayers(nn.Module):
    """Shared construction: norms, feed-forward and residual dropout of a layer."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float,
        attention_dropout: float,
        activation_dropout: float,
        activation: str,
        norm_first: bool,
        norm: str,
        eps: float,
        bias: bool,
        rotary: nn.Module | None,
        num_norms: int,
    ) -> None:
        super().__init__()
        check_probability("dropout", dropout)
        check_probability("attention_dropout", attention_dropout)
        self.d_model, self.num_heads, self.norm_first = d_model, num_heads, norm_first
        self.norm_kind, self.eps = norm, eps
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, bias=bias, dropout=attention_dropout, rotary=rotary
        )
        self.ffn = FeedForward(
            d_model, d_ff, activation=activation, dropout=activation_dropout, bias=bias
        )
        for i in range(1, num_norms + 1):
            setattr(self, f"norm{i}", make_norm(norm, d_model, eps, bias=bias))
        self.dropout = nn.Dropout(dropout)

    def _residual(self, x: Tensor, norm: nn.Module, sublayer, *args, **kwargs):
        """One residual sublayer; returns ``(x, weights)`` (weights ``None`` unless asked)."""
        h = sublayer(norm(x) if self.norm_first else x, *args, **kwargs)
        h, weights = h if isinstance(h, tuple) else (h, None)
        x = x + self.dropout(h)  # (B, n, d)
        return (x if self.norm_first else norm(x)), weights


class EncoderLayer(_Sublayers):
    """Encoder block: self-attention then feed-forward, each residual + norm (seed 001).

    Args:
        d_model: width ``d``; ``num_heads`` must divide it.
        num_heads: ``H``.
        d_ff: feed-forward hidden width.
        dropout: residual dropout on each sublayer output (the paper's ``P_drop``).
        attention_dropout: dropout on attention weights (0 keeps PyTorch's fused CPU kernel).
        activation_dropout: dropout inside the feed-forward, after the activation.
        activation: "relu", "gelu" or "swiglu".
        norm_first: pre-LN when ``True``, post-LN (the paper) when ``False``.
        norm: "layernorm" or "rmsnorm"; ``eps`` its ε; ``bias`` for projections and LN β.
        rotary: optional rotary embedding for the self-attention (see MultiHeadAttention).

    ``forward(x, mask=None, *, attn_bias=None, return_weights=False)``: ``x`` ``(B, n, d)``;
    ``attn_bias`` an additive float tensor broadcastable to ``(B, H, n, n)`` added to the
    scores (ALiBi, T5 relative bias). Returns ``(B, n, d)``, or ``(out, weights)`` with
    weights ``(B, H, n, n)`` when ``return_weights``. ``is_causal=True`` and a self-attention
    ``cache`` (:class:`KVCache`) make it a decoder-only (GPT) block; masks and biases then
    cover all ``n_k`` = cached + new keys.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        norm: str = "layernorm",
        eps: float = 1e-5,
        bias: bool = True,
        rotary: nn.Module | None = None,
    ) -> None:
        super().__init__(
            d_model,
            num_heads,
            d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=activation,
            norm_first=norm_first,
            norm=norm,
            eps=eps,
            bias=bias,
            rotary=rotary,
            num_norms=2,
        )

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        _check_input("x", x, self.d_model)
        n_k = x.shape[1] + (len(cache) if cache is not None else 0)  # cached + new keys
        mask = combine_masks(as_attention_mask(mask, x.shape[0], n_k), attn_bias)
        x, weights = self._residual(
            x,
            self.norm1,
            self.self_attn,
            mask=mask,
            is_causal=is_causal,
            cache=cache,
            return_weights=return_weights,
        )  # (B, n, d)
        x, _ = self._residual(x, self.norm2, self.ffn)  # (B, n, d)
        return (x, weights) if return_weights else x


class DecoderLayer(_Sublayers):
    """Decoder block: causal self-attention, cross-attention to the encoder memory, feed-forward.

    Seed 004 ("Attention is All You Need": the decoder attends to the encoder annotations and,
    causally, to its own previous layer). Same arguments as :class:`EncoderLayer`; the
    cross-attention uses no rotary embedding.

    ``forward(x, memory, *, self_mask=None, memory_mask=None, is_causal=True, cache=None,
    attn_bias=None, return_weights=False)``:

    * ``x`` ``(B, T, d)`` target tokens (only the new ones when decoding with a cache);
    * ``memory`` ``(B, S, d)`` encoder output;
    * ``self_mask`` over all ``n_k`` self-attention keys (cached + new): ``(B, n_k)`` padding
      or a full mask; ``memory_mask`` ``(B, S)`` source padding or a full mask;
    * ``is_causal`` blocks future positions (bottom-right aligned, correct with a cache);
    * ``cache`` a pair ``(self_cache, cross_cache)`` of :class:`KVCache`: self-attention keys
      grow each step, cross-attention keys/values are computed from ``memory`` once;
    * ``attn_bias`` additive float, broadcastable to ``(B, H, T, n_k)``, self-attention only.

    Returns ``(B, T, d)``, or ``(out, (self_weights, cross_weights))`` when ``return_weights``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        norm: str = "layernorm",
        eps: float = 1e-5,
        bias: bool = True,
        rotary: nn.Module | None = None,
    ) -> None:
        super().__init__(
            d_model,
            num_heads,
            d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=activation,
            norm_first=norm_first,
            norm=norm,
            eps=eps,
            bias=bias,
            rotary=rotary,
            num_norms=3,
        )
        self.cross_attn = MultiHeadAttention(
            d_model, num_heads, bias=bias, dropout=attention_dropout
        )

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: tuple[KVCache, KVCache] | None = None,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        _check_input("x", x, self.d_model)
        _check_input("memory", memory, self.d_model)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(
                f"memory has batch size {memory.shape[0]} but x has batch size {x.shape[0]}"
            )
        self_cache, cross_cache = self._split_cache(cache)
        batch, n_k = x.shape[0], x.shape[1] + (len(self_cache) if self_cache is not None else 0)
        self_mask = combine_masks(as_attention_mask(self_mask, batch, n_k, "self_mask"), attn_bias)
        memory_mask = as_attention_mask(memory_mask, batch, memory.shape[1], "memory_mask")
        x, self_w = self._residual(
            x,
            self.norm1,
            self.self_attn,
            mask=self_mask,
            is_causal=is_causal,
            cache=self_cache,
            return_weights=return_weights,
        )  # (B, T, d)
        x, cross_w = self._residual(
            x,
            self.norm2,
            self.cross_attn,
            memory,
            mask=memory_mask,
            cache=cross_cache,
            return_weights=return_weights,
        )  # (B, T, d)
        x, _ = self._residual(x, self.norm3, self.ffn)  # (B, T, d)
        return (x, (self_w, cross_w)) if return_weights else x

    @staticmethod
    def _split_cache(
        cache: tuple[KVCache, KVCache] | None,
    ) -> tuple[KVCache | None, KVCache | None]:
        if cache is None:
            return None, None
        if not (isinstance(cache, tuple | list) and len(cache) == 2):
            size = f" of length {len(cache)}" if isinstance(cache, tuple | list) else ""
            raise ValueError(
                "cache must be a pair (self_cache, cross_cache) of KVCache, "
                f"got {type(cache).__name__}{size}"
            )
        return cache[0], cache[1]
