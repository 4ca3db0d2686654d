"""The encoder-decoder Transformer over token ids (Vaswani et al. 2017; seed 004
"Transformer Machine Translation", seed 001 "Basic Transformer Encoder Block").

    src ids (B, S) → E_src · √d + P → encoder ×N → memory (B, S, d)
    tgt ids (B, T) → E_tgt · √d + P → decoder ×N (causal self-attn, cross-attn to memory)
                   → output projection → logits (B, T, V_tgt)

Embeddings are scaled by √d (paper §3.4) and may be shared between source, target and the
output projection. Source padding (``pad_id``) is masked as keys in the encoder and in the
cross-attention. The target needs only the causal mask: with right padding no real token
ever sees a later pad, and the outputs at pad positions are ignored by the loss.

For generation, :meth:`Transformer.encode` runs once and :meth:`Transformer.decode` runs step
by step with a cache from :meth:`Transformer.new_cache` (self-attention keys/values grow;
cross-attention keys/values are projected from the memory once, at the first step).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab.attention.multihead import KVCache
from attnlab.config import TransformerConfig
from attnlab.models.base import ModelCache, PretrainedModel
from attnlab.positional import PositionalScheme
from attnlab.stacks import TransformerDecoderStack, TransformerEncoderStack
from attnlab.validation import check_rank, check_token_ids


def positional_scheme(config, *, bidirectional: bool) -> PositionalScheme:
    """The config's positional scheme (``config.positional``) for one side of a model."""
    return PositionalScheme(
        config.positional,
        d_model=config.d_model,
        num_heads=config.num_heads,
        max_len=config.max_len,
        bidirectional=bidirectional,
        rope_base=config.rope_base,
        num_buckets=config.num_buckets,
        max_distance=config.max_distance,
    )


def layer_kwargs(config) -> dict:
    """Keyword arguments for :class:`~attnlab.blocks.EncoderLayer` / ``DecoderLayer``."""
    return dict(
        dropout=config.dropout,
        attention_dropout=config.attn_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        norm=config.norm,
        eps=config.norm_eps,
        bias=config.bias,
    )


def check_ids(name: str, ids: Tensor, vocab_size: int) -> None:
    """Token ids ``(B, n)`` in ``[0, vocab_size)``; errors name ``name``."""
    check_rank(name, ids, 2, "(B, n) token ids")
    check_token_ids(name, ids, vocab_size)


def check_length(name: str, length: int, config, limit_name: str = "max_len") -> None:
    """Learned positions cannot extrapolate: ``length`` must fit ``config.max_len``."""
    if config.positional == "learned" and length > config.max_len:
        raise ValueError(
            f"{name} reaches length {length} but learned positions allow at most "
            f"{limit_name}={config.max_len}"
        )


def _unless_all_real(mask: Tensor | None) -> Tensor | None:
    """Drop a padding mask with no padding: unmasked attention takes PyTorch's fastest kernel.
    (Not under torch.compile: reading the mask's values would break the graph.)"""
    if mask is None or torch.compiler.is_compiling():
        return mask
    return None if bool(mask.all()) else mask


class Transformer(PretrainedModel):
    """Encoder-decoder Transformer built from a :class:`~attnlab.config.TransformerConfig`.

    ``model(src, tgt_in)``: ``src`` ``(B, S)`` and ``tgt_in`` ``(B, T)`` token ids → logits
    ``(B, T, tgt_vocab_size)`` (teacher forcing: ``tgt_in`` is the target shifted right).
    """

    model_type = "transformer"
    config_class = TransformerConfig

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = (
            self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model)
        )
        self.src_pos = positional_scheme(c, bidirectional=True)
        self.tgt_pos = positional_scheme(c, bidirectional=False)
        self.dropout = nn.Dropout(c.dropout)  # on embeddings + positions (paper §5.4)
        self.encoder = TransformerEncoderStack(
            c.num_encoder_layers,
            c.d_model,
            c.num_heads,
            c.ffn_dim,
            rotary=self.src_pos.rotary,
            **layer_kwargs(c),
        )
        self.decoder = TransformerDecoderStack(
            c.num_decoder_layers,
            c.d_model,
            c.num_heads,
            c.ffn_dim,
            rotary=self.tgt_pos.rotary,
            **layer_kwargs(c),
        )
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self._init_weights()
        if c.tie_output:
            self.output.weight = self.tgt_embed.weight  # (V_tgt, d), paper §3.4

    def _init_weights(self) -> None:
        """Xavier-uniform for the stacks' matrices (as ``nn.Transformer``); N(0, 1/d) embeddings."""
        for stack in (self.encoder, self.decoder):
            for p in stack.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, std=self.config.d_model**-0.5)
        nn.init.xavier_uniform_(self.output.weight)

    def _embed(
        self, ids: Tensor, embed: nn.Embedding, pos: PositionalScheme, offset: int
    ) -> Tensor:
        x = embed(ids) * math.sqrt(self.config.d_model)  # (B, n, d)
        return self.dropout(pos.add(x, offset))  # (B, n, d)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """``src`` ``(B, S)`` ids → ``(memory (B, S, d), src_mask (B, S))``; True = real token."""
        c = self.config
        check_ids("src", src, c.src_vocab_size)
        check_length("src", src.shape[1], c)
        src_mask = src != c.pad_id  # (B, S)
        x = self._embed(src, self.src_embed, self.src_pos, 0)  # (B, S, d)
        bias = self.src_pos.bias(src.shape[1], src.shape[1])  # (1, H, S, S) or None
        memory = self.encoder(x, _unless_all_real(src_mask), attn_bias=bias)  # (B, S, d)
        return memory, src_mask

    def new_cache(self) -> ModelCache:
        """Empty per-layer ``(self, cross)`` :class:`KVCache` pairs for :meth:`decode`."""
        return ModelCache((KVCache(), KVCache()) for _ in self.decoder.layers)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        *,
        cache: ModelCache | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits for ``tgt`` ``(B, T)`` given ``memory`` ``(B, S, d)``.

        With a ``cache``, ``tgt`` holds only the new tokens (positions ``cache.offset ..``)
        and the cache is updated. ``src_mask`` ``(B, S)`` (True = real token) comes from
        :meth:`encode`. Returns logits ``(B, T, V_tgt)``, or ``(logits, cross_weights)`` with
        one ``(B, H, T, S)`` cross-attention weight tensor per layer when ``return_weights``.
        """
        c = self.config
        check_ids("tgt", tgt, c.tgt_vocab_size)
        check_rank("memory", memory, 3, "(B, S, d_model)")
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"memory has batch size {memory.shape[0]} but tgt has batch size {tgt.shape[0]}"
            )
        offset = 0 if cache is None else cache.offset
        n_q = tgt.shape[1]
        check_length("tgt", offset + n_q, c)
        x = self._embed(tgt, self.tgt_embed, self.tgt_pos, offset)  # (B, T, d)
        bias = self.tgt_pos.bias(n_q, offset + n_q)  # (1, H, T, n_k) or None
        out = self.decoder(
            x,
            memory,
            memory_mask=_unless_all_real(src_mask),
            is_causal=True,
            cache=cache,
            attn_bias=bias,
            return_weights=return_weights,
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
        memory, src_mask = self.encode(src)  # (B, S, d), (B, S)
        return self.decode(tgt_in, memory, src_mask)  # (B, T, V_tgt)
