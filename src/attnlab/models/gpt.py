"""GPT: a decoder-only Transformer language model (Radford et al. 2018, 2019; seed 004
"Transformer Language Pre-training").

    idx (B, n) → token embedding + positions → [causal self-attention + MLP] × L
               → final norm → logits (B, n, V)   (output layer tied to the token embedding)

Each block is an :class:`~attnlab.blocks.EncoderLayer` run with ``is_causal=True`` (a
decoder block without cross-attention), pre-LN by default as in GPT-2. Initialisation
follows GPT-2: N(0, 0.02), with the residual output projections scaled by 1/√(2L).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from attnlab.attention.multihead import KVCache
from attnlab.blocks import EncoderLayer
from attnlab.config import GPTConfig
from attnlab.layers import make_norm
from attnlab.models.base import ModelCache, PretrainedModel
from attnlab.models.transformer import check_ids, check_length, layer_kwargs, positional_scheme


class GPT(PretrainedModel):
    """Decoder-only language model built from a :class:`~attnlab.config.GPTConfig`.

    ``model(idx)``: ``idx`` ``(B, n)`` token ids → next-token logits ``(B, n, vocab_size)``.
    With ``cache=model.new_cache()``, ``idx`` holds only the new tokens and positions continue
    from ``cache.offset``. ``block_size`` is the training context; learned positions cannot go
    past it (other schemes can, and generation crops the context to it anyway).
    """

    model_type = "gpt"
    config_class = GPTConfig

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = c = config
        self.block_size = c.block_size
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = positional_scheme(c, bidirectional=False)
        self.dropout = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(
                c.d_model, c.num_heads, c.ffn_dim, rotary=self.pos.rotary, **layer_kwargs(c)
            )
            for _ in range(c.num_layers)
        )
        self.norm = make_norm(c.norm, c.d_model, c.norm_eps, bias=c.bias) if c.norm_first else None
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections by 1/√(2L)
            if name.endswith(("out_proj.weight", "ffn.w2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.num_layers))
        if c.tie_weights:
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
        return ModelCache(KVCache() for _ in self.layers)

    def forward(
        self, idx: Tensor, *, cache: ModelCache | None = None, return_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``idx`` ``(B, n)`` → logits ``(B, n, V)``.

        With ``return_weights``: ``(logits, weights)``, one ``(B, H, n, n_k)`` per layer.
        """
        out = self.hidden_states(idx, cache=cache, return_weights=return_weights)
        if return_weights:
            x, weights = out
            return self.head(x), weights  # (B, n, V)
        return self.head(out)  # (B, n, V)

    def hidden_states(
        self, idx: Tensor, *, cache: ModelCache | None = None, return_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """The final-norm hidden states ``(B, n, d)`` the LM head reads (GPT-1's h_L, used
        for fine-tuning heads), or ``(h, [weights (B, H, n, n_k)] per layer)``."""
        c = self.config
        check_ids("idx", idx, c.vocab_size)
        offset, n = (0 if cache is None else cache.offset), idx.shape[1]
        check_length("idx", offset + n, c, "block_size")
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache has {len(cache)} entries but the model has {len(self.layers)} layers"
            )
        x = self.dropout(self.pos.add(self.tok_embed(idx), offset))  # (B, n, d)
        bias = self.pos.bias(n, offset + n)  # (1, H, n, n_k) or None
        weights = []
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                attn_bias=bias,
                is_causal=True,
                cache=None if cache is None else cache[i],
                return_weights=return_weights,
            )  # (B, n, d)
            if return_weights:
                x, w = x
                weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if return_weights else x
