"""Stacks of Transformer layers: encoder, decoder and the encoder-decoder (no embeddings).

Seed 004 ("Transformer Machine Translation": "the transformer model uses N stacked
self-attention layers"); Vaswani et al. Figure 1 with ``N = 6``. Each stack may end with a
final norm — pre-LN stacks need it (their residual stream is never normalised otherwise);
``nn.Transformer`` adds one to both of its stacks even in post-LN.

Masks: ``(B, n)`` bool key-padding masks (``True`` = real token) or full attention masks,
as in :mod:`attnlab.blocks`. The stacks turn them into ``(B, 1, 1, n)`` once and combine the
causal triangle with the target padding once, not in every layer.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from attnlab.attention.masks import causal_mask, combine_masks
from attnlab.attention.multihead import KVCache
from attnlab.blocks import DecoderLayer, EncoderLayer, as_attention_mask
from attnlab.layers import make_norm
from attnlab.validation import check_positive, check_rank


def _final_norm(
    final_norm: bool | None, layer: EncoderLayer | DecoderLayer, bias: bool
) -> nn.Module | None:
    if final_norm is None:
        final_norm = layer.norm_first
    return make_norm(layer.norm_kind, layer.d_model, layer.eps, bias=bias) if final_norm else None


class TransformerEncoderStack(nn.Module):
    """``num_layers`` :class:`EncoderLayer` s and an optional final norm.

    ``TransformerEncoderStack(num_layers, d_model, num_heads, d_ff, *, final_norm=None,
    **layer_kwargs)``: ``layer_kwargs`` go to :class:`EncoderLayer` (dropout, activation,
    norm_first, norm, eps, bias, ...). ``final_norm=None`` adds one exactly when pre-LN
    (as ``nn.TransformerEncoder(norm=LayerNorm)`` does when asked).

    ``enc(x, mask=None, *, attn_bias=None, return_weights=False)``: ``x`` ``(B, n, d)``,
    ``mask`` ``(B, n)`` (True = real token) or a full mask. Returns ``(B, n, d)``, or
    ``(out, [weights per layer (B, H, n, n)])``.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        final_norm: bool | None = None,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__()
        check_positive("num_layers", num_layers)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, **layer_kwargs) for _ in range(num_layers)
        )
        self.norm = _final_norm(final_norm, self.layers[0], layer_kwargs.get("bias", True))
        self.d_model = d_model

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        check_rank("x", x, 3, "(B, n, d_model)")
        mask = as_attention_mask(mask, x.shape[0], x.shape[1])  # (B, 1, 1, n) or full
        mask = combine_masks(mask, attn_bias)  # once, not in every layer
        weights = []
        for layer in self.layers:
            x = layer(x, mask, return_weights=return_weights)
            if return_weights:
                x, w = x
                weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if return_weights else x


class TransformerDecoderStack(nn.Module):
    """``num_layers`` :class:`DecoderLayer` s and an optional final norm.

    Constructed like :class:`TransformerEncoderStack`. ``dec(x, memory, *, self_mask=None,
    memory_mask=None, is_causal=True, cache=None, attn_bias=None, return_weights=False)``
    takes the arguments of :meth:`DecoderLayer.forward`, with ``cache`` a list of per-layer
    ``(self_cache, cross_cache)`` pairs from :meth:`new_cache`. Returns ``(B, T, d)``, or
    ``(out, [(self_weights, cross_weights) per layer])``.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        final_norm: bool | None = None,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__()
        check_positive("num_layers", num_layers)
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, **layer_kwargs) for _ in range(num_layers)
        )
        self.norm = _final_norm(final_norm, self.layers[0], layer_kwargs.get("bias", True))
        self.d_model = d_model

    def new_cache(self) -> list[tuple[KVCache, KVCache]]:
        """Empty per-layer ``(self_cache, cross_cache)`` pairs for incremental decoding."""
        return [(KVCache(), KVCache()) for _ in self.layers]

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: list[tuple[KVCache, KVCache]] | None = None,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        check_rank("x", x, 3, "(B, T, d_model)")
        check_rank("memory", memory, 3, "(B, S, d_model)")
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache has {len(cache)} entries but the stack has {len(self.layers)} layers"
            )
        past = len(cache[0][0]) if cache is not None else 0
        batch, n_q, n_k = x.shape[0], x.shape[1], x.shape[1] + past
        self_mask = combine_masks(as_attention_mask(self_mask, batch, n_k, "self_mask"), attn_bias)
        if is_causal and self_mask is not None:  # one combined mask for every layer
            self_mask = combine_masks(self_mask, causal_mask(n_q, n_k, device=x.device))
            is_causal = False
        memory_mask = as_attention_mask(memory_mask, batch, memory.shape[1], "memory_mask")
        weights = []
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                memory,
                self_mask=self_mask,
                memory_mask=memory_mask,
                is_causal=is_causal,
                cache=None if cache is None else cache[i],
                return_weights=return_weights,
            )
            if return_weights:
                x, w = x
                weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if return_weights else x


class EncoderDecoderStack(nn.Module):
    """The Transformer without embeddings: an encoder stack feeding a decoder stack.

    ``EncoderDecoderStack(encoder, decoder)`` or :meth:`build`. Called as
    ``stack(src, tgt, src_mask=None, tgt_mask=None, is_causal=True)`` with ``src`` ``(B, S, d)``,
    ``tgt`` ``(B, T, d)``, ``src_mask`` / ``tgt_mask`` ``(B, S)`` / ``(B, T)`` bool, True = real
    token. Returns ``(B, T, d)``. :meth:`encode` and :meth:`decode` split the two halves for
    generation (encode once, decode step by step with a cache).
    """

    def __init__(self, encoder: TransformerEncoderStack, decoder: TransformerDecoderStack) -> None:
        super().__init__()
        if encoder.d_model != decoder.d_model:
            raise ValueError(
                f"decoder has d_model={decoder.d_model} but encoder has d_model={encoder.d_model}"
            )
        self.encoder, self.decoder = encoder, decoder

    @classmethod
    def build(
        cls,
        num_encoder_layers: int,
        num_decoder_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        final_norm: bool | None = None,
        **layer_kwargs: Any,
    ) -> EncoderDecoderStack:
        """Both stacks with the same layer settings (``layer_kwargs`` as for the layers)."""
        encoder = TransformerEncoderStack(
            num_encoder_layers, d_model, num_heads, d_ff, final_norm=final_norm, **layer_kwargs
        )
        decoder = TransformerDecoderStack(
            num_decoder_layers, d_model, num_heads, d_ff, final_norm=final_norm, **layer_kwargs
        )
        return cls(encoder, decoder)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """``src`` ``(B, S, d)`` → memory ``(B, S, d)``."""
        return self.encoder(src, src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> Tensor:
        """``tgt`` ``(B, T, d)`` attending to ``memory`` ``(B, S, d)`` → ``(B, T, d)``."""
        return self.decoder(
            tgt, memory, self_mask=tgt_mask, memory_mask=src_mask, is_causal=is_causal, cache=cache
        )

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        is_causal: bool = True,
    ) -> Tensor:
        check_rank("src", src, 3, "(B, S, d_model)")
        check_rank("tgt", tgt, 3, "(B, T, d_model)")
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"tgt has batch size {tgt.shape[0]} but src has batch size {src.shape[0]}"
            )
        memory = self.encode(src, src_mask)  # (B, S, d)
        return self.decode(tgt, memory, src_mask, tgt_mask, is_causal)  # (B, T, d)
