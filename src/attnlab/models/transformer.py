"""The encoder-decoder Transformer over token ids (Vaswani et al. 2017; Ba (CSC413 Lecture 8),
"Transformer Machine Translation"; Steinert-Threlkeld (Transformers I), "Basic Transformer
Encoder Block").

    src ids (B, S) → E_src · √d + P → encoder ×N → memory (B, S, d)
    tgt ids (B, T) → E_tgt · √d + P → decoder ×N (causal self-attn, cross-attn to memory)
                   → output projection → logits (B, T, V_tgt)

Embeddings are scaled by √d (paper §3.4) and may be shared between source, target and the
output projection. Source padding (``pad_id``) is masked as keys in the encoder and in the
cross-attention. The target needs only the causal mask: with right padding no real token
ever sees a later pad, and the outputs at pad positions are ignored by the loss.

The layers are one :class:`~attnlab.modules.stacks.EncoderDecoderStack` (``model.stack``, the
class :mod:`attnlab.interop` builds from ``nn.Transformer``); ``model.encoder`` and
``model.decoder`` are its two halves. For generation, :meth:`Transformer.encode` runs once and
:meth:`Transformer.decode` runs step by step with a cache from :meth:`Transformer.new_cache`
(self-attention keys/values grow; cross-attention keys/values are projected from the memory
once, at the first step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.models.base import ModelCache, PretrainedModel, register_model
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.positional import PositionalConfig, PositionalScheme
from attnlab.modules.stacks import EncoderDecoderStack, TransformerDecoderStack, TransformerEncoderStack
from attnlab.validation import check_ids, check_positive, check_rank, check_vocabularies


@dataclass
class TransformerConfig(BlockConfig, PositionalConfig):
    """Encoder-decoder Transformer: the shared :class:`BlockConfig` and
    :class:`PositionalConfig` fields (defaults: the paper's base model, sinusoidal positions)
    and these.

    ``tgt_vocab_size=None`` means the source vocabulary size. ``share_embeddings`` ties source
    and target embeddings (one joint vocabulary, sizes must match); ``tie_output`` ties the
    target embedding and the output projection. ``max_len`` bounds learned positions.
    """

    src_vocab_size: int
    tgt_vocab_size: int | None = None
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    max_len: int = 512
    pad_id: int = 0
    share_embeddings: bool = False
    tie_output: bool = True

    def __post_init__(self) -> None:
        self.check_block()
        self.check_positions(self.head_dim)
        check_vocabularies(self)
        for name in ("num_encoder_layers", "num_decoder_layers", "max_len"):
            check_positive(name, getattr(self, name))


def _unless_all_real(mask: Tensor | None) -> Tensor | None:
    """Drop a padding mask with no padding: unmasked attention takes PyTorch's fastest kernel.
    (Not under torch.compile: reading the mask's values would break the graph.)"""
    if mask is None or torch.compiler.is_compiling():
        return mask
    return None if bool(mask.all()) else mask


@register_model(task="translation", default=True)
class Transformer(PretrainedModel):
    """Encoder-decoder Transformer built from a :class:`TransformerConfig`.

    ``model(src, tgt_in)``: ``src`` ``(B, S)`` and ``tgt_in`` ``(B, T)`` token ids → logits
    ``(B, T, tgt_vocab_size)`` (teacher forcing: ``tgt_in`` is the target shifted right).
    """

    model_type = "transformer"
    config_class = TransformerConfig
    renamed_weights = {"encoder.": "stack.encoder.", "decoder.": "stack.decoder."}  # before one stack

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = (
            self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model)
        )
        self.src_pos = PositionalScheme.from_config(c, max_len=c.max_len, bidirectional=True)
        self.tgt_pos = PositionalScheme.from_config(c, max_len=c.max_len, bidirectional=False)
        self.dropout = nn.Dropout(c.dropout)  # on embeddings + positions (paper §5.4)
        self.stack = EncoderDecoderStack.from_config(
            c.block, c.num_encoder_layers, c.num_decoder_layers,
            rotary=(self.src_pos.rotary, self.tgt_pos.rotary),
        )
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self._init_weights()
        if c.tie_output:
            self.output.weight = self.tgt_embed.weight  # (V_tgt, d), paper §3.4

    @property
    def encoder(self) -> TransformerEncoderStack:
        """The encoder half of :attr:`stack`."""
        return self.stack.encoder

    @property
    def decoder(self) -> TransformerDecoderStack:
        """The decoder half of :attr:`stack`."""
        return self.stack.decoder

    def _init_weights(self) -> None:
        """Xavier-uniform for the stacks' matrices (as ``nn.Transformer``); N(0, 1/d) embeddings."""
        for p in self.stack.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, std=self.config.d_model**-0.5)
        nn.init.xavier_uniform_(self.output.weight)

    def _embed(
        self, ids: Tensor, embed: nn.Embedding, pos: PositionalScheme, offset: int
    ) -> Tensor:
        x = embed(ids) * math.sqrt(self.config.d_model)  # (B, n, d)
        x = pos.add(x, offset)  # (B, n, d)
        return self.dropout(x) if self.training else x

    def encode(self, src: Tensor, *, check: bool = True) -> tuple[Tensor, Tensor]:
        """``src`` ``(B, S)`` ids → ``(memory (B, S, d), src_mask (B, S))``; True = real token.
        ``check=False``: ``src`` was checked by the caller (:meth:`forward`)."""
        c = self.config
        if check:
            check_ids("src", src, c.src_vocab_size)
        self.src_pos.check_length("src", src.shape[1])
        src_mask = src != c.pad_id  # (B, S)
        x = self._embed(src, self.src_embed, self.src_pos, 0)  # (B, S, d)
        bias = self.src_pos.bias(src.shape[1], src.shape[1])  # (1, H, S, S) or None
        memory = self.stack.encode(x, _unless_all_real(src_mask), attn_bias=bias, check=False)  # (B, S, d)
        return memory, src_mask

    def new_cache(self) -> ModelCache:
        """Empty per-layer ``(self, cross)`` :class:`KVCache` pairs for :meth:`decode`."""
        return self.stack.new_cache()

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        *,
        cache: ModelCache | None = None,
        return_weights: bool = False,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits for ``tgt`` ``(B, T)`` given ``memory`` ``(B, S, d)``.

        With a ``cache``, ``tgt`` holds only the new tokens (positions ``cache.offset ..``)
        and the cache is updated. ``src_mask`` ``(B, S)`` (True = real token) comes from
        :meth:`encode` (any form of the mask contract is read). Returns logits ``(B, T,
        V_tgt)``, or ``(logits, cross_weights)`` with one ``(B, H, T, S)`` cross-attention weight
        tensor per layer when ``return_weights``. ``check=False`` (a decoding loop after its
        first step: its own tokens, memory and cache) skips the argument checks; the learned
        positions' length check stays.
        """
        if check:  # here what names tgt; memory's width, the masks and the cache: the stack's
            check_ids("tgt", tgt, self.config.tgt_vocab_size)
            check_rank("memory", memory, 3, "(B, S, d_model)")
            if memory.shape[0] != tgt.shape[0]:
                raise ValueError(
                    f"memory has batch size {memory.shape[0]} but tgt has batch size {tgt.shape[0]}"
                )
        offset = 0 if cache is None else cache.offset
        n_q = tgt.shape[1]
        self.tgt_pos.check_length("tgt", offset + n_q)
        x = self._embed(tgt, self.tgt_embed, self.tgt_pos, offset)  # (B, T, d)
        bias = self.tgt_pos.bias(n_q, offset + n_q)  # (1, H, T, n_k) or None
        out = self.stack.decode(
            x, memory, _unless_all_real(src_mask), cache=cache, attn_bias=bias,
            return_weights=return_weights, check=check,
        )
        if not return_weights:
            return self.output(out)  # (B, T, V_tgt)
        out, weights = out
        return self.output(out), [cross for _, cross in weights]

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """``src`` ``(B, S)``, ``tgt_in`` ``(B, T)`` ids → logits ``(B, T, V_tgt)``."""
        check_ids("src", src, self.config.src_vocab_size)
        check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"tgt_in has batch size {tgt_in.shape[0]} but src has batch size {src.shape[0]}"
            )
        memory, src_mask = self.encode(src, check=False)  # (B, S, d), (B, S)
        return self.decode(tgt_in, memory, src_mask, check=False)  # (B, T, V_tgt)
