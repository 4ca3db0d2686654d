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

Masks: ``(B, n)`` bool key-padding masks (``True`` = real token) or full attention masks,
as in :mod:`attnlab.modules.blocks`. The stacks turn them into ``(B, 1, 1, n)`` once and
combine the causal triangle with the target padding once, not in every layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from torch import Tensor, nn

from attnlab.attention.masks import causal_mask, combine_masks
from attnlab.attention.multihead import KVCache
from attnlab.memory import check_repeats, leading_sizes
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.blocks import DecoderLayer, EncoderLayer, TransformerLayer, as_attention_mask
from attnlab.modules.norms import make_norm
from attnlab.validation import check_positive, check_rank, counted, indefinite


class LayerStack(nn.Module):
    """``layers`` (all of ``layer_class``, one width) applied in turn, then ``norm`` if any."""

    layer_class: ClassVar[type[TransformerLayer]] = TransformerLayer

    def __init__(self, layers: Sequence[TransformerLayer], norm: nn.Module | None = None) -> None:
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
            x = self.norm(x)
        return (x, weights) if return_weights else x


class TransformerEncoderStack(LayerStack):
    """Stacked :class:`EncoderLayer` s and an optional final norm.

    ``enc(x, mask=None, *, attn_bias=None, is_causal=False, cache=None, return_weights=False)``:
    ``x`` ``(B, n, d)``, ``mask`` ``(B, n_k)`` (True = real token) or a full mask, ``cache`` a
    list of one :class:`KVCache` per layer (causal decoding, GPT). Returns ``(B, n, d)``, or
    ``(out, [weights per layer (B, H, n, n_k)])``.
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
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        check_rank("x", x, 3, "(B, n, d_model)")
        past = _cached_positions(cache, len(self.layers), lambda entry: entry)
        mask = as_attention_mask(mask, x.shape[0], x.shape[1] + past)  # (B, 1, 1, n_k) or full
        mask = combine_masks(mask, attn_bias)  # once, not in every layer

        def call(i: int, layer: nn.Module, h: Tensor):
            return layer(
                h, mask, is_causal=is_causal, cache=None if cache is None else cache[i],
                return_weights=return_weights,
            )

        return self._run(x, call, return_weights)


class TransformerDecoderStack(LayerStack):
    """Stacked :class:`DecoderLayer` s and an optional final norm.

    ``dec(x, memory, *, self_mask=None, memory_mask=None, is_causal=True, cache=None,
    attn_bias=None, return_weights=False)`` takes the arguments of
    :meth:`DecoderLayer.forward`, with ``cache`` a list of per-layer ``(self_cache,
    cross_cache)`` pairs from :meth:`new_cache`. Returns ``(B, T, d)``, or ``(out,
    [(self_weights, cross_weights) per layer])``.
    """

    layer_class = DecoderLayer

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
        cache: Sequence[tuple[KVCache, KVCache]] | None = None,
        attn_bias: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        check_rank("x", x, 3, "(B, T, d_model)")
        check_rank("memory", memory, 3, "(B, S, d_model)")
        past = _cached_positions(cache, len(self.layers), lambda entry: entry[0])
        batch, n_q, n_k = x.shape[0], x.shape[1], x.shape[1] + past
        self_mask = combine_masks(as_attention_mask(self_mask, batch, n_k, "self_mask"), attn_bias)
        if is_causal and self_mask is not None:  # one combined mask for every layer
            self_mask = combine_masks(self_mask, causal_mask(n_q, n_k, device=x.device))
            is_causal = False
        memory_mask = as_attention_mask(memory_mask, batch, memory.shape[1], "memory_mask")

        def call(i: int, layer: nn.Module, h: Tensor):
            return layer(
                h, memory, self_mask=self_mask, memory_mask=memory_mask, is_causal=is_causal,
                cache=None if cache is None else cache[i], return_weights=return_weights,
            )

        return self._run(x, call, return_weights)


def _cached_positions(cache: Sequence | None, num_layers: int, self_cache: Callable) -> int:
    """Positions already in a per-layer ``cache`` (0 without one); its length must match."""
    if cache is None:
        return 0
    if len(cache) != num_layers:
        raise ValueError(f"cache has {len(cache)} entries but the stack has {counted(num_layers, 'layer')}")
    return len(self_cache(cache[0]))


class EncoderDecoderStack(nn.Module):
    """The Transformer without embeddings: an encoder stack feeding a decoder stack.

    ``EncoderDecoderStack(encoder, decoder)`` or :meth:`from_config`. Called as
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
    def from_config(
        cls,
        config: BlockConfig,
        num_encoder_layers: int,
        num_decoder_layers: int,
        *,
        final_norm: bool | None = None,
    ) -> EncoderDecoderStack:
        """Both stacks built from one ``config`` (see :meth:`LayerStack.from_config`)."""
        encoder = TransformerEncoderStack.from_config(config, num_encoder_layers, final_norm=final_norm)
        decoder = TransformerDecoderStack.from_config(config, num_decoder_layers, final_norm=final_norm)
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
