"""BERT-style encoder: token + position + segment embeddings, a stack of encoder layers, pooling.

Steinert-Threlkeld (Transformers I) ("Basic Transformer Encoder Block", "Representing Order":
``x_i = E_{w_i} + P_i``) and Ba (CSC413 Lecture 8) ("Transformer Language Pre-training"); Devlin
et al. (2019) §3 for the token-type (segment) embeddings and the embedding LayerNorm::

    x = Dropout(LN(E_token[w] + E_type[t] + P))      (B, n, d)
    h = EncoderLayer_N(... EncoderLayer_1(x))         (B, n, d)   post-LN, GELU by default

A sentence embedding pools the token states over the real (non-padding) tokens:
``mean`` (average), ``cls`` (the first token) or ``max`` (per-feature maximum), optionally
L2-normalised — the sentence-transformers recipe. The model reads token ids; its tokenizer is
the pipeline's: :class:`attnlab.pipelines.EncoderPipeline` embeds strings.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch
from torch import Tensor, nn

from attnlab.models.base import PretrainedModel, register_model
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.norms import make_norm
from attnlab.modules.positional import PositionalConfig, PositionalScheme
from attnlab.modules.sequence_pooling import POOLINGS, as_bool_mask, pool
from attnlab.modules.stacks import TransformerEncoderStack
from attnlab.validation import check_choice, check_positive, check_rank, check_token_ids, shape_str


@dataclass
class EncoderConfig(BlockConfig, PositionalConfig):
    """BERT-style encoder: the shared :class:`BlockConfig` and :class:`PositionalConfig`
    fields (defaults: BERT-base, Devlin et al. 2019 — post-LN, GELU, ε = 1e-12, learned
    positions) and these.

    ``max_len`` bounds learned positions; ``type_vocab_size`` is the number of segments (0
    disables token-type embeddings); ``pooler`` adds BERT's ``tanh(W h_[CLS] + b)`` head. The
    last four fields describe how a sentence becomes an embedding
    (:meth:`attnlab.pipelines.EncoderPipeline.embed`): ``pooling`` (one of
    :data:`~attnlab.modules.sequence_pooling.POOLINGS`), ``normalize`` (L2), ``max_seq_length``
    (truncation, default ``max_len``) and ``lowercase`` (lower-case the text before tokenizing).
    """

    vocab_size: int
    num_layers: int = 12
    type_vocab_size: int = 2
    max_len: int = 512
    pad_id: int = 0
    pooler: bool = False
    pooling: str = "mean"
    normalize: bool = False
    max_seq_length: int | None = None
    lowercase: bool = False
    _: KW_ONLY
    d_model: int = 768
    num_heads: int = 12
    activation: str = "gelu"
    norm_eps: float = 1e-12
    positional: str = "learned"

    def __post_init__(self) -> None:
        self.check_block()
        self.check_positions(self.head_dim)
        for name in ("vocab_size", "num_layers", "max_len"):
            check_positive(name, getattr(self, name))
        check_positive("type_vocab_size", self.type_vocab_size, allow_zero=True)
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                f"pad_id must be a token id < vocab_size={self.vocab_size}, got {self.pad_id}"
            )
        if self.max_seq_length is not None:
            check_positive("max_seq_length", self.max_seq_length)
        check_choice("pooling", self.pooling, POOLINGS)

    @property
    def sequence_limit(self) -> int:
        """Longest tokenized input the pipeline feeds the model (its tokenizer truncates there)."""
        limit = self.max_seq_length or self.max_len
        return min(limit, self.max_len) if self.positional == "learned" else limit


@register_model
class Encoder(PretrainedModel):
    """BERT-style encoder over token ids (see module docstring).

    ``Encoder(EncoderConfig(vocab_size=...))``. ``forward(input_ids, attention_mask=None,
    token_type_ids=None, *, return_weights=False)``: ``input_ids`` ``(B, n)``,
    ``attention_mask`` ``(B, n)`` bool or 0/1 (``1`` = real token), ``token_type_ids``
    ``(B, n)`` segment ids (default 0); ``attention_mask`` may also be any other form of the
    mask contract (``(B, 1, 1, n)`` …). Returns the token states ``(B, n, d)``, or
    ``(hidden, [weights (B, H, n, n) per layer])``. Sentence vectors: :func:`pool`, or
    :meth:`attnlab.pipelines.EncoderPipeline.embed` from strings. BERT's pooler (when
    ``config.pooler``): ``encoder.pooler(hidden[:, 0])``.
    """

    model_type = "encoder"
    config_class = EncoderConfig

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.token_embedding = nn.Embedding(config.vocab_size, d)
        types = config.type_vocab_size
        self.type_embedding = nn.Embedding(types, d) if types else None
        self.positions = PositionalScheme.from_config(config, max_len=config.max_len, bidirectional=True)
        self.embed_norm = make_norm(config.norm, d, config.norm_eps, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = TransformerEncoderStack.from_config(
            config.block, config.num_layers, rotary=self.positions.rotary
        )
        self.pooler = nn.Sequential(nn.Linear(d, d), nn.Tanh()) if config.pooler else None
        self.apply(_init_weights)

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """``Dropout(LN(E_token + E_type + P))`` for ``input_ids`` ``(B, n)`` → ``(B, n, d)``."""
        check_rank("input_ids", input_ids, 2, "(B, n)")
        check_token_ids("input_ids", input_ids, self.config.vocab_size)
        x = self.token_embedding(input_ids)  # (B, n, d)
        if token_type_ids is not None:
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(
                    f"token_type_ids has shape {shape_str(token_type_ids.shape)} but "
                    f"input_ids have shape {shape_str(input_ids.shape)}"
                )
            if self.type_embedding is None:
                raise ValueError("token_type_ids were given but the config has type_vocab_size=0")
            check_token_ids("token_type_ids", token_type_ids, self.config.type_vocab_size)
        if self.type_embedding is not None:
            types = token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)
            x = x + self.type_embedding(types)  # (B, n, d)
        x = self.positions.add(x)  # (B, n, d)
        return self.dropout(self.embed_norm(x))  # (B, n, d)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None, *, return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        x = self.embed(input_ids, token_type_ids)  # (B, n, d)
        mask = attention_mask
        if isinstance(mask, Tensor) and mask.dim() == 2:  # BERT's (B, n) of 1 = real token, bool or int
            mask = as_bool_mask(mask, input_ids.shape)
        n = input_ids.shape[1]
        bias = self.positions.bias(n, n)  # (1, H, n, n) or None
        return self.encoder(x, mask, attn_bias=bias, return_weights=return_weights)

    def pool(
        self, hidden: Tensor, attention_mask: Tensor | None = None, mode: str | None = None
    ) -> Tensor:
        """:func:`pool` with ``config.pooling`` by default: ``(B, n, d)`` → ``(B, d)``."""
        return pool(hidden, attention_mask, mode or self.config.pooling)


def _init_weights(module: nn.Module) -> None:
    """BERT's initialisation: normal(0, 0.02) weights, zero biases."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
