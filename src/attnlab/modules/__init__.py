"""The Transformer's building blocks, between the lectures' attention and the models.

* :mod:`~attnlab.modules.norms` — layer norm (the formula and the fused kernel), RMSNorm
* :mod:`~attnlab.modules.feedforward` — the position-wise feed-forward network
* :mod:`~attnlab.modules.positional` — sinusoidal, learned, rotary, ALiBi, relative bias
* :mod:`~attnlab.modules.block_config` — :class:`BlockConfig`, the fields every layer is built from
* :mod:`~attnlab.modules.blocks` — the residual sub-layer helper, encoder and decoder layers
* :mod:`~attnlab.modules.stacks` — stacks of layers, built from their layers or from a config,
  and their per-layer caches (:class:`ModelCache`)
* :mod:`~attnlab.modules.sequence_pooling` — one vector per sequence (mean, max, cls, last)
"""

from attnlab.attention.masks import as_attention_mask  # the mask contract (its name here before)
from attnlab.modules.block_config import BlockConfig
from attnlab.modules.blocks import DecoderLayer, EncoderLayer, TransformerLayer
from attnlab.modules.feedforward import ACTIVATIONS, FeedForward
from attnlab.modules.norms import NORMS, LayerNorm, RMSNorm, layer_norm, make_norm, rms_norm
from attnlab.modules.positional import (
    POSITIONAL_KINDS,
    ALiBi,
    LearnedPositionalEmbedding,
    PositionalConfig,
    PositionalScheme,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)
from attnlab.modules.sequence_pooling import POOLINGS, pool
from attnlab.modules.stacks import (
    EncoderDecoderStack,
    LayerStack,
    ModelCache,
    TransformerDecoderStack,
    TransformerEncoderStack,
)

__all__ = [
    "ACTIVATIONS",
    "ALiBi",
    "BlockConfig",
    "DecoderLayer",
    "EncoderDecoderStack",
    "EncoderLayer",
    "FeedForward",
    "LayerNorm",
    "LayerStack",
    "LearnedPositionalEmbedding",
    "ModelCache",
    "NORMS",
    "POOLINGS",
    "POSITIONAL_KINDS",
    "PositionalConfig",
    "PositionalScheme",
    "RMSNorm",
    "RelativePositionBias",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "TransformerDecoderStack",
    "TransformerEncoderStack",
    "TransformerLayer",
    "as_attention_mask",
    "layer_norm",
    "make_norm",
    "pool",
    "rms_norm",
]
