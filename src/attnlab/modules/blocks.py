"""Transformer encoder and decoder layers (Steinert-Threlkeld (Transformers I), "Full
Transformer Encoder Block"; Ba (CSC413 Lecture 8), "Transformer Machine Translation";
Vaswani et al. §3.1, §5.4).

Each sub-layer ``f`` (self-attention, cross-attention, feed-forward) is wrapped in a residual
connection (Steinert-Threlkeld (Transformers I), "Residual Connections": replace ``f(x)`` with
``x + f(x)``) and a norm, by one helper, :meth:`TransformerLayer.sublayer`:

* post-LN (the paper, ``norm_first=False``): ``x ← Norm(x + Dropout(f(x)))``
* pre-LN (``norm_first=True``):              ``x ← x + Dropout(f(Norm(x)))``

Dropout sits where the paper puts it: on each sub-layer's output, before the residual add.
Pre-LN stacks need a final norm after the last layer (see :mod:`attnlab.modules.stacks`).
Every layer is built from one :class:`~attnlab.modules.block_config.BlockConfig`.

Masks follow docs/design.md's mask contract
(:func:`~attnlab.attention.masks.as_attention_mask`; bool ``True`` = allowed, or additive
float). A layer called by a user accepts a ``(B, n_k)`` key-padding mask (``True`` = real
token), a ``(B, n_q, n_k)`` mask, or any mask broadcastable to ``(B, H, n_q, n_k)`` given with 4
dimensions, and checks its arguments. A stack calls its layers with ``check=False``: the
arguments are checked and the masks in the 4-D form already, and the layer calls its own parts
(attention, feed-forward, norms) the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from torch import Tensor, nn

from attnlab.attention.masks import as_attention_mask, combine_masks
from attnlab.attention.multihead import KVCache, MultiHeadAttention, check_cache
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.feedforward import FeedForward
from attnlab.modules.norms import make_norm
from attnlab.validation import check_rank


def check_input(name: str, x: Tensor, d_model: int) -> None:
    """``x`` is a batch of token vectors ``(B, n, d_model)``."""
    check_rank(name, x, 3, "(B, n, d_model)")
    if x.shape[-1] != d_model:
        raise ValueError(f"{name} has width {x.shape[-1]} but d_model is {d_model}")


def check_memory(memory: Tensor, batch: int, d_model: int) -> None:
    """``memory`` is ``(B, S, d_model)`` with the queries' batch size ``batch``."""
    check_input("memory", memory, d_model)
    if memory.shape[0] != batch:
        raise ValueError(f"memory has batch size {memory.shape[0]} but x has batch size {batch}")


class TransformerLayer(nn.Module):
    """What the encoder and the decoder layer share: self-attention, a feed-forward network,
    ``num_norms`` norms and the residual dropout, all sized by one :class:`BlockConfig`.

    ``rotary``: an optional rotary position embedding for the self-attention (see
    :class:`~attnlab.attention.MultiHeadAttention`). Parameters are named as in
    ``nn.TransformerEncoderLayer`` where they correspond (``norm1``, ``norm2``, ...).
    """

    num_norms: ClassVar[int] = 2

    def __init__(self, config: BlockConfig, *, rotary: nn.Module | None = None) -> None:
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
        c = self.config = config.block
        self.d_model, self.num_heads, self.norm_first = c.d_model, c.num_heads, c.norm_first
        self.self_attn = MultiHeadAttention(
            c.d_model, c.num_heads, bias=c.bias, dropout=c.attn_dropout, rotary=rotary,
            num_kv_heads=c.num_kv_heads,
        )
        self.ffn = FeedForward(
            c.d_model, c.ffn_dim, activation=c.activation, dropout=c.activation_dropout, bias=c.bias
        )
        for i in range(1, self.num_norms + 1):
            setattr(self, f"norm{i}", make_norm(c.norm, c.d_model, c.norm_eps, bias=c.bias))
        self.dropout = nn.Dropout(c.dropout)

    def sublayer(
        self, x: Tensor, norm: nn.Module, f: Callable[..., Tensor | tuple], *args, **kwargs
    ) -> tuple[Tensor, Tensor | None]:
        """One residual sub-layer ``f`` (pre- or post-LN, see the module docstring) on ``x``
        ``(B, n, d)``; returns ``(x, attention weights or None)``. ``f`` and the norm are the
        layer's own parts, called with ``check=False``."""
        h = f(norm(x, check=False) if self.norm_first else x, *args, check=False, **kwargs)
        h, weights = h if isinstance(h, tuple) else (h, None)
        x = x + (self.dropout(h) if self.training else h)  # (B, n, d)
        return (x if self.norm_first else norm(x, check=False)), weights

    def self_mask(
        self, mask: Tensor | None, x: Tensor, past: int, attn_bias: Tensor | None, check: bool,
        name: str = "mask",
    ) -> Tensor | None:
        """The self-attention mask of ``x`` ``(B, n, d)`` over ``past`` cached + ``n`` new keys,
        ``attn_bias`` added: the contract's 4-D form, checked (``check``) or as the caller gave it."""
        if not check:
            return combine_masks(mask, attn_bias)
        shape = (x.shape[0], self.num_heads, x.shape[1], x.shape[1] + past)
        return as_attention_mask(mask, shape, name=name, bias=attn_bias)


class EncoderLayer(TransformerLayer):
    """Encoder block: self-attention then feed-forward, each residual + norm
    (Steinert-Threlkeld (Transformers I), "Full Transformer Encoder Block").

    ``EncoderLayer(config: BlockConfig, *, rotary=None)``.

    ``forward(x, mask=None, *, attn_bias=None, return_weights=False, is_causal=False,
    cache=None, check=True)``: ``x`` ``(B, n, d)``; ``attn_bias`` an additive float tensor
    broadcastable to ``(B, H, n, n)`` added to the scores (ALiBi, T5 relative bias). Returns
    ``(B, n, d)``, or ``(out, weights)`` with weights ``(B, H, n, n)`` when ``return_weights``.
    ``is_causal=True`` and a self-attention ``cache`` (:class:`KVCache`) make it a
    decoder-only (GPT) block; masks and biases then cover all ``n_k`` = cached + new keys.
    ``check=False`` (a stack's call): the arguments are checked and ``mask`` is in the
    contract's 4-D form already.
    """

    def new_cache(self) -> KVCache:
        """This layer's empty cache for incremental decoding: its self-attention keys/values."""
        return KVCache()

    def check_cache(self, cache: object, batch: int, name: str = "cache") -> int:
        """``cache`` is ``None`` or this layer's :class:`KVCache`; returns its positions."""
        check_cache(name, cache, batch)
        return 0 if cache is None else len(cache)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
        is_causal: bool = False,
        cache: KVCache | None = None,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, Tensor]:
        past = 0
        if check:
            check_input("x", x, self.d_model)
            past = self.check_cache(cache, x.shape[0])
        mask = self.self_mask(mask, x, past, attn_bias, check)
        x, weights = self.sublayer(
            x, self.norm1, self.self_attn,
            mask=mask, is_causal=is_causal, cache=cache, return_weights=return_weights,
        )  # (B, n, d)
        x, _ = self.sublayer(x, self.norm2, self.ffn)  # (B, n, d)
        return (x, weights) if return_weights else x


class DecoderLayer(TransformerLayer):
    """Decoder block: causal self-attention, cross-attention to the encoder memory, feed-forward.

    Ba (CSC413 Lecture 8), "Attention is All You Need": the decoder attends to the encoder
    annotations and, causally, to its own previous layer. ``DecoderLayer(config, *,
    rotary=None)``; the cross-attention uses no rotary embedding.

    ``forward(x, memory, *, self_mask=None, memory_mask=None, is_causal=True, cache=None,
    attn_bias=None, return_weights=False, check=True)``:

    * ``x`` ``(B, T, d)`` target tokens (only the new ones when decoding with a cache);
    * ``memory`` ``(B, S, d)`` encoder output;
    * ``self_mask`` over all ``n_k`` self-attention keys (cached + new): ``(B, n_k)`` padding
      or a full mask; ``memory_mask`` ``(B, S)`` source padding or a full mask;
    * ``is_causal`` blocks future positions (bottom-right aligned, correct with a cache);
    * ``cache`` a pair ``(self_cache, cross_cache)`` of :class:`KVCache`: self-attention keys
      grow each step, cross-attention keys/values are computed from ``memory`` once;
    * ``attn_bias`` additive float, broadcastable to ``(B, H, T, n_k)``, self-attention only;
    * ``check`` as for :class:`EncoderLayer`.

    Returns ``(B, T, d)``, or ``(out, (self_weights, cross_weights))`` when ``return_weights``.
    """

    num_norms = 3

    def __init__(self, config: BlockConfig, *, rotary: nn.Module | None = None) -> None:
        super().__init__(config, rotary=rotary)
        c = self.config
        self.cross_attn = MultiHeadAttention(
            c.d_model, c.num_heads, bias=c.bias, dropout=c.attn_dropout
        )

    def new_cache(self) -> tuple[KVCache, KVCache]:
        """This layer's empty caches: ``(self_cache, cross_cache)``."""
        return KVCache(), KVCache()

    def check_cache(self, cache: object, batch: int, name: str = "cache") -> int:
        """``cache`` is ``None`` or a pair ``(self_cache, cross_cache)`` of :class:`KVCache`;
        returns the self-attention positions it holds."""
        if cache is None:
            return 0
        if not (isinstance(cache, tuple | list) and len(cache) == 2):
            size = f" of length {len(cache)}" if isinstance(cache, tuple | list) else ""
            raise ValueError(
                f"{name} must be a pair (self_cache, cross_cache) of KVCache, "
                f"got {type(cache).__name__}{size}"
            )
        for part, entry in zip(("self", "cross"), cache, strict=True):
            check_cache(f"{name}'s {part} cache", entry, batch)
        return len(cache[0])

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
        check: bool = True,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        past = 0
        if check:
            check_input("x", x, self.d_model)
            check_memory(memory, x.shape[0], self.d_model)
            past = self.check_cache(cache, x.shape[0])
            shape = (x.shape[0], self.num_heads, x.shape[1], memory.shape[1])
            memory_mask = as_attention_mask(memory_mask, shape, name="memory_mask")
        self_mask = self.self_mask(self_mask, x, past, attn_bias, check, "self_mask")
        self_cache, cross_cache = (None, None) if cache is None else cache
        x, self_w = self.sublayer(
            x, self.norm1, self.self_attn,
            mask=self_mask, is_causal=is_causal, cache=self_cache, return_weights=return_weights,
        )  # (B, T, d)
        x, cross_w = self.sublayer(
            x, self.norm2, self.cross_attn, memory,
            mask=memory_mask, cache=cross_cache, return_weights=return_weights,
        )  # (B, T, d)
        x, _ = self.sublayer(x, self.norm3, self.ffn)  # (B, T, d)
        return (x, (self_w, cross_w)) if return_weights else x
