"""Stacks of Transformer layers: encoder, decoder and the encoder-decoder (no embeddings).

Ba (CSC413 Lecture 8), "Transformer Machine Translation": "the transformer model uses N
stacked self-attention layers"; Vaswani et al. Figure 1 with ``N = 6``. Each stack may end
with a final norm — pre-LN stacks need it (their residual stream is never normalised
otherwise); ``nn.Transformer`` adds one to both of its stacks even in post-LN.

A stack is built from its layers, ``TransformerEncoderStack(layers, norm)`` (what
:mod:`attnlab.interop` does with converted PyTorch layers), or from one
:class:`~attnlab.modules.block_config.BlockConfig`, ``TransformerEncoderStack.from_config(
config, num_layers)`` (what the models do). The encoder stack, run with ``is_causal=True``
and a KV cache, is also GPT's decoder (a decoder without cross-attention).

Masks follow the mask contract (:func:`~attnlab.attention.masks.as_attention_mask`): ``(B, n)``
bool key-padding masks (``True`` = real token) or full attention masks. A stack is where a
model hands its masks in: it brings them to the 4-D form once (checking them unless
``check=False``), adds the position bias and, in the decoder, the causal triangle with the
target padding, and calls its layers with ``check=False``. :meth:`LayerStack.new_cache` is the
one cache factory: a :class:`ModelCache` of each layer's own empty cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from torch import Tensor, nn

from attnlab.attention.masks import as_attention_mask, causal_mask, combine_masks
from attnlab.attention.multihead import KVCache
from attnlab.memory import check_repeats, leading_sizes
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.blocks import DecoderLayer, EncoderLayer, TransformerLayer, check_input, check_memory
from attnlab.modules.norms import LayerNorm, RMSNorm, make_norm
from attnlab.validation import check_positive, check_rank, counted, indefinite


class ModelCache(list):
    """Per-layer KV caches of a stack (a model): a :class:`KVCache` (GPT) or a ``(self,
    cross)`` pair per layer, as :meth:`LayerStack.new_cache` makes them.

    ``offset`` is the number of positions already decoded; :meth:`reorder` keeps batch rows
    ``index`` in every cache (beam search).
    """

    @property
    def offset(self) -> int:
        first = self[0] if len(self) else KVCache()
        return len(first[0] if isinstance(first, tuple) else first)

    def reorder(self, index: Tensor, *, static: bool = True) -> None:
        """Keep rows ``index``; ``static=False`` leaves the static (cross-attention) caches as
        they are — for an ``index`` that keeps every row on rows of its own source."""
        for entry in self:
            for cache in entry if isinstance(entry, tuple) else (entry,):
                if static or not cache.static:
                    cache.reorder(index)


class LayerStack(nn.Module):
    """``layers`` (all of ``layer_class``, one width) applied in turn, then ``norm`` if any (an
    attnlab :class:`~attnlab.modules.norms.LayerNorm` or :class:`~attnlab.modules.norms.RMSNorm`)."""

    layer_class: ClassVar[type[TransformerLayer]] = TransformerLayer

    def __init__(self, layers: Sequence[TransformerLayer], norm: LayerNorm | RMSNorm | None = None) -> None:
        super().__init__()
        if len(layers) == 0:
            raise ValueError("layers must hold at least one layer, got none")
        for i, layer in enumerate(layers):
            if not isinstance(layer, self.layer_class):
                raise TypeError(
                    f"layers[{i}] must be {indefinite(self.layer_class.__name__)}, got {type(layer).__name__}"
                )
            if layer.d_model != layers[0].d_model:
                raise ValueError(
                    f"layers[{i}] has d_model={layer.d_model} but layers[0] has "
                    f"d_model={layers[0].d_model}"
                )
        if norm is not None and not isinstance(norm, LayerNorm | RMSNorm):
            raise TypeError(f"norm must be an attnlab LayerNorm or RMSNorm, got {type(norm).__name__}")
        self.layers = nn.ModuleList(layers)
        self.norm = norm
        self.d_model = layers[0].d_model

    @classmethod
    def from_config(
        cls,
        config: BlockConfig,
        num_layers: int,
        *,
        rotary: nn.Module | None = None,
        final_norm: bool | None = None,
    ) -> LayerStack:
        """``num_layers`` layers built from ``config`` (sharing ``rotary``, if given) and a final
        norm; ``final_norm=None`` adds one exactly when pre-LN (as ``nn.TransformerEncoder(norm=
        LayerNorm)`` does when asked)."""
        check_positive("num_layers", num_layers)
        first = cls.layer_class(config, rotary=rotary)
        check_repeats("num_layers", num_layers, first, leading_sizes(config))  # before a billion are built
        layers = [first, *(cls.layer_class(config, rotary=rotary) for _ in range(num_layers - 1))]
        if final_norm is None:
            final_norm = config.norm_first
        c = config
        return cls(layers, make_norm(c.norm, c.d_model, c.norm_eps, bias=c.bias) if final_norm else None)

    def new_cache(self) -> ModelCache:
        """Empty caches for incremental decoding: each layer's own (:meth:`EncoderLayer.new_cache`,
        :meth:`DecoderLayer.new_cache`), in a :class:`ModelCache`."""
        return ModelCache(layer.new_cache() for layer in self.layers)

    def _check_cache(self, cache: Sequence | None, batch: int) -> int:
        """``cache`` is ``None`` or one valid entry per layer; returns the positions it holds."""
        if cache is None:
            return 0
        if len(cache) != len(self.layers):
            raise ValueError(
                f"cache has {len(cache)} entries but the stack has {counted(len(self.layers), 'layer')}"
            )
        past = [layer.check_cache(entry, batch, f"cache[{i}]") for i, (layer, entry) in
                enumerate(zip(self.layers, cache, strict=True))]
        return past[0]

    def _mask(
        self, mask: Tensor | None, x: Tensor, n_k: int, bias: Tensor | None, check: bool, name: str
    ) -> Tensor | None:
        """``mask`` for queries ``x`` ``(B, n, d)`` over ``n_k`` keys, in the contract's 4-D form
        with ``bias`` added: once for every layer."""
        shape = (x.shape[0], self.layers[0].num_heads, x.shape[1], n_k)
        return as_attention_mask(mask, shape, name=name, bias=bias, check=check)

    def _run(
        self, x: Tensor, call: Callable[[int, nn.Module, Tensor], Any], return_weights: bool
    ) -> Tensor | tuple[Tensor, list]:
        """``x = call(i, layer, x)`` through every layer, then the final norm; with
        ``return_weights`` each call returns ``(x, weights)`` and the weights are collected."""
        weights = []
        for i, layer in enumerate(self.layers):
            x = call(i, layer, x)
            if return_weights:
                x, w = x
                weights.append(w)
        if self.norm is not None:
            x = self.norm(x, check=False)
        return (x, weights) if return_weights else x


class TransformerEncoderStack(LayerStack):
    """Stacked :class:`EncoderLayer` s and an optional final norm.

    ``enc(x, mask=None, *, attn_bias=None, is_causal=False, cache=None, return_weights=False,
    check=True)``: ``x`` ``(B, n, d)``, ``mask`` ``(B, n_k)`` (True = real token) or a full
    mask, ``cache`` one :class:`KVCache` per layer (causal decoding, GPT: :meth:`new_cache`).
    Returns ``(B, n, d)``, or ``(out, [weights per layer (B, H, n, n_k)])``. ``check=False``
    (a model's own tensors) skips the argument checks; the mask is still brought to its form.
    """

    layer_class = EncoderLayer

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        attn_bias: Tensor | None = None,
        is_causal: bool = False,
        cache: Sequence[KVCache] | None = None,
        return_weights: bool = False,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        if check:
            check_input("x", x, self.d_model)
            past = self._check_cache(cache, x.shape[0])
        else:
            past = 0 if cache is None else len(cache[0])
        mask = self._mask(mask, x, x.shape[1] + past, attn_bias, check, "mask")  # (B, 1|H, 1|n, n_k)

        def call(i: int, layer: nn.Module, h: Tensor):
            return layer(
                h, mask, is_causal=is_causal, cache=None if cache is None else cache[i],
                return_weights=return_weights, check=False,
            )

        return self._run(x, call, return_weights)


class TransformerDecoderStack(LayerStack):
    """Stacked :class:`DecoderLayer` s and an optional final norm.

    ``dec(x, memory, *, self_mask=None, memory_mask=None, is_causal=True, cache=None,
    attn_bias=None, return_weights=False, check=True)`` takes the arguments of
    :meth:`DecoderLayer.forward`, with ``cache`` a list of per-layer ``(self_cache,
    cross_cache)`` pairs from :meth:`new_cache`. Returns ``(B, T, d)``, or ``(out,
    [(self_weights, cross_weights) per layer])``.
    """

    layer_class = DecoderLayer

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: Sequence[tuple[KVCache, KVCache]] | None = None,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        if check:
            check_input("x", x, self.d_model)
            check_memory(memory, x.shape[0], self.d_model)
            past = self._check_cache(cache, x.shape[0])
        else:
            past = 0 if cache is None else len(cache[0][0])
        n_q, n_k = x.shape[1], x.shape[1] + past
        self_mask = self._mask(self_mask, x, n_k, attn_bias, check, "self_mask")
        if is_causal and self_mask is not None:  # one combined mask for every layer
            self_mask = combine_masks(self_mask, causal_mask(n_q, n_k, device=x.device))
            is_causal = False
        memory_mask = self._mask(memory_mask, x, memory.shape[1], None, check, "memory_mask")

        def call(i: int, layer: nn.Module, h: Tensor):
            return layer(
                h, memory, self_mask=self_mask, memory_mask=memory_mask, is_causal=is_causal,
                cache=None if cache is None else cache[i], return_weights=return_weights, check=False,
            )

        return self._run(x, call, return_weights)


class EncoderDecoderStack(nn.Module):
    """The Transformer without embeddings: an encoder stack feeding a decoder stack — what
    :class:`~attnlab.models.Transformer` runs over its embeddings and what
    :mod:`attnlab.interop` builds from ``nn.Transformer``.

    ``EncoderDecoderStack(encoder, decoder)`` or :meth:`from_config`. Called as
    ``stack(src, tgt, src_mask=None, tgt_mask=None, is_causal=True)`` with ``src`` ``(B, S, d)``,
    ``tgt`` ``(B, T, d)``, ``src_mask`` / ``tgt_mask`` ``(B, S)`` / ``(B, T)`` bool, True = real
    token. Returns ``(B, T, d)``. :meth:`encode` and :meth:`decode` split the two halves for
    generation (encode once, decode step by step with a cache from :meth:`new_cache`).
    """

    def __init__(self, encoder: TransformerEncoderStack, decoder: TransformerDecoderStack) -> None:
        super().__init__()
        if encoder.d_model != decoder.d_model:
            raise ValueError(
                f"decoder has d_model={decoder.d_model} but encoder has d_model={encoder.d_model}"
            )
        self.encoder, self.decoder = encoder, decoder

    @classmethod
    def from_config(
        cls,
        config: BlockConfig,
        num_encoder_layers: int,
        num_decoder_layers: int,
        *,
        final_norm: bool | None = None,
        rotary: tuple[nn.Module | None, nn.Module | None] = (None, None),
    ) -> EncoderDecoderStack:
        """Both stacks built from one ``config`` (see :meth:`LayerStack.from_config`);
        ``rotary`` the encoder's and the decoder's rotary embedding, if any."""
        encoder = TransformerEncoderStack.from_config(
            config, num_encoder_layers, final_norm=final_norm, rotary=rotary[0])
        decoder = TransformerDecoderStack.from_config(
            config, num_decoder_layers, final_norm=final_norm, rotary=rotary[1])
        return cls(encoder, decoder)

    def new_cache(self) -> ModelCache:
        """The decoder's empty ``(self, cross)`` caches for :meth:`decode`."""
        return self.decoder.new_cache()

    def encode(
        self, src: Tensor, src_mask: Tensor | None = None, *, attn_bias: Tensor | None = None,
        return_weights: bool = False, check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``src`` ``(B, S, d)`` → memory ``(B, S, d)``."""
        return self.encoder(src, src_mask, attn_bias=attn_bias, return_weights=return_weights, check=check)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: Sequence[tuple[KVCache, KVCache]] | None = None,
        *,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """``tgt`` ``(B, T, d)`` attending to ``memory`` ``(B, S, d)`` → ``(B, T, d)`` (the
        arguments of :class:`TransformerDecoderStack`)."""
        return self.decoder(
            tgt, memory, self_mask=tgt_mask, memory_mask=src_mask, is_causal=is_causal, cache=cache,
            attn_bias=attn_bias, return_weights=return_weights, check=check,
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
