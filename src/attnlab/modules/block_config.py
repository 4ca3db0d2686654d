"""One configuration for the Transformer's layers: the fields every Transformer model shares.

A Transformer layer (Steinert-Threlkeld (Transformers I), "Full Transformer Encoder Block";
Vaswani et al. §3.1) is multi-head attention and a feed-forward network, each wrapped in a
residual connection, dropout and a norm. Its shape and behaviour are these few fields, and
:class:`BlockConfig` declares them once:

==================  ==========================================================================
``d_model``         width ``d`` of every token vector
``num_heads``       ``H``; must divide ``d_model`` (each head has ``d_h = d_model / H``)
``num_kv_heads``    ``H_kv`` key/value heads of self-attention, shared by groups of ``H / H_kv``
                    query heads (grouped-query attention; 1 = multi-query; ``None``: ``H``)
``d_ff``            hidden width of the feed-forward network (``None``: ``4 · d_model``)
``dropout``         residual dropout on each sub-layer's output (the paper's ``P_drop``)
``attn_dropout``    dropout on the attention weights (any > 0 disables PyTorch's fused CPU kernel)
``activation_dropout``  dropout inside the feed-forward network, after the activation
``activation``      "relu" (the paper), "gelu" or "swiglu"
``norm``            "layernorm" or "rmsnorm"; ``norm_eps`` its ε
``norm_first``      pre-LN (``True``) or post-LN, the paper (``False``)
``bias``            biases in every projection and the layer norms' β
==================  ==========================================================================

The model configs (:class:`~attnlab.models.TransformerConfig`, ``GPTConfig``,
``EncoderConfig``) extend it, so a recipe writes ``d_model = 256`` in its ``[model]`` table and
``config.d_model`` reads it; the layers and stacks of :mod:`attnlab.modules` take it whole
(``EncoderLayer(config.block)``). The defaults are the paper's base model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from attnlab.config import Config
from attnlab.modules.feedforward import ACTIVATIONS
from attnlab.modules.norms import NORMS
from attnlab.validation import check_choice, check_heads, check_kv_heads, check_positive, check_probability


@dataclass(kw_only=True)
class BlockConfig(Config):
    """The settings of a Transformer layer (see the module docstring for each field)."""

    d_model: int = 512
    num_heads: int = 8
    num_kv_heads: int | None = None
    d_ff: int | None = None
    dropout: float = 0.1
    attn_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "layernorm"
    norm_first: bool = False
    norm_eps: float = 1e-5
    bias: bool = True

    def __post_init__(self) -> None:
        self.check_block()

    def check_block(self) -> None:
        """Raise ``ValueError`` naming the first field that cannot build a layer."""
        check_heads(self.d_model, self.num_heads)
        check_kv_heads(self.num_heads, self.num_kv_heads)
        if self.d_ff is not None:
            check_positive("d_ff", self.d_ff)
        for name in ("dropout", "attn_dropout", "activation_dropout"):
            check_probability(name, getattr(self, name))
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("norm", self.norm, NORMS)
        check_positive("norm_eps", self.norm_eps, allow_zero=True)

    @property
    def ffn_dim(self) -> int:
        """The feed-forward hidden width: ``d_ff``, or ``4 · d_model`` when it is ``None``."""
        return self.d_ff or 4 * self.d_model

    @property
    def head_dim(self) -> int:
        """``d_h = d_model / num_heads``."""
        return self.d_model // self.num_heads

    @property
    def block(self) -> BlockConfig:
        """These fields alone, as a plain :class:`BlockConfig` (what a layer is built from)."""
        names = [f.name for f in dataclasses.fields(BlockConfig)]
        return BlockConfig(**{name: getattr(self, name) for name in names})
