"""GPT: a decoder-only Transformer language model (Radford et al. 2018, 2019; Ba (CSC413
Lecture 8), "Transformer Language Pre-training").

    idx (B, n) → token embedding + positions → decoder: [causal self-attention + MLP] × L
               → final norm → logits (B, n, V)   (output layer tied to the token embedding)

The decoder is a :class:`~attnlab.modules.stacks.TransformerEncoderStack` run with
``is_causal=True`` (decoder layers without cross-attention), pre-LN by default as in GPT-2.
Initialisation follows GPT-2: N(0, 0.02), with the residual output projections scaled by
1/√(2L).
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

from torch import Tensor, nn

from attnlab.attention.linear import Linear
from attnlab.models.base import ModelCache, PretrainedModel, register_model
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.positional import PositionalConfig, PositionalScheme
from attnlab.modules.stacks import TransformerEncoderStack
from attnlab.validation import check_ids, check_positive


@dataclass
class GPTConfig(BlockConfig, PositionalConfig):
    """Decoder-only language model: the shared :class:`BlockConfig` and
    :class:`PositionalConfig` fields and these.

    Defaults follow GPT-2 style: pre-LN, GELU, no dropout, learned positions, the output layer
    tied to the token embedding (``tie_output``). ``block_size`` is the longest context (and
    bounds learned positions).
    """

    vocab_size: int
    block_size: int = 256
    num_layers: int = 6
    tie_output: bool = True
    _: KW_ONLY
    d_model: int = 384
    num_heads: int = 6
    dropout: float = 0.0
    activation: str = "gelu"
    norm_first: bool = True
    positional: str = "learned"

    renamed_fields = {"tie_weights": "tie_output"}  # attnlab 0.1 checkpoints

    def __post_init__(self) -> None:
        self.check_block()
        self.check_positions(self.head_dim)
        for name in ("vocab_size", "block_size", "num_layers"):
            check_positive(name, getattr(self, name))

    @property
    def max_len(self) -> int:
        return self.block_size


@register_model(task="language_model", default=True)
class GPT(PretrainedModel):
    """Decoder-only language model built from a :class:`GPTConfig`.

    ``model(idx)``: ``idx`` ``(B, n)`` token ids → next-token logits ``(B, n, vocab_size)``.
    With ``cache=model.new_cache()``, ``idx`` holds only the new tokens and positions continue
    from ``cache.offset``. ``block_size`` is the training context; learned positions cannot go
    past it (other schemes can, and generation crops the context to it anyway).
    """

    model_type = "gpt"
    config_class = GPTConfig
    renamed_weights = {"layers.": "decoder.layers.", "norm.": "decoder.norm."}  # attnlab 0.1

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = c = config
        self.block_size = c.block_size
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = PositionalScheme.from_config(c, max_len=c.block_size, bidirectional=False)
        self.dropout = nn.Dropout(c.dropout)
        self.decoder = TransformerEncoderStack.from_config(c.block, c.num_layers, rotary=self.pos.rotary)
        self.head = Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections by 1/√(2L)
            if name.endswith(("out_proj.weight", "ffn.w2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.num_layers))
        if c.tie_output:
            self.head.weight = self.tok_embed.weight  # (V, d)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def new_cache(self) -> ModelCache:
        """Empty per-layer :class:`KVCache` s for incremental decoding."""
        return self.decoder.new_cache()

    def forward(
        self, idx: Tensor, *, cache: ModelCache | None = None, return_weights: bool = False,
        check: bool = True, last_only: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``idx`` ``(B, n)`` → logits ``(B, n, V)``.

        With ``return_weights``: ``(logits, weights)``, one ``(B, H, n, n_k)`` per layer.
        ``check=False`` (a decoding loop after its first step: its own tokens and cache) skips
        the argument checks; the learned positions' length check stays. ``last_only``: the
        logits of the last position alone, ``(B, 1, V)`` — all a decoding step reads, so a
        prompt of ``n`` tokens skips ``n - 1`` rows of the output layer.
        """
        out = self.hidden_states(idx, cache=cache, return_weights=return_weights, check=check)
        x, weights = out if return_weights else (out, None)
        logits = self.head(x[:, -1:] if last_only else x)  # (B, n or 1, V)
        return (logits, weights) if return_weights else logits

    def hidden_states(
        self, idx: Tensor, *, cache: ModelCache | None = None, return_weights: bool = False,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """The final-norm hidden states ``(B, n, d)`` the LM head reads (GPT-1's h_L, used
        for fine-tuning heads), or ``(h, [weights (B, H, n, n_k)] per layer)``."""
        if check:
            check_ids("idx", idx, self.config.vocab_size)
        offset, n = (0 if cache is None else cache.offset), idx.shape[1]
        self.pos.check_length("idx", offset + n, "block_size")
        x = self.pos.add(self.tok_embed(idx), offset)  # (B, n, d)
        x = self.dropout(x) if self.training else x
        bias = self.pos.bias(n, offset + n)  # (1, H, n, n_k) or None
        return self.decoder(
            x, attn_bias=bias, is_causal=True, cache=cache, return_weights=return_weights, check=check
        )
