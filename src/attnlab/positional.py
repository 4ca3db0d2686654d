"""``attnlab.positional``: the public path of the positional schemes, which live in
:mod:`attnlab.modules.positional` with the Transformer's other building blocks."""

from attnlab.modules.positional import (
    POSITIONAL_KINDS,
    ALiBi,
    LearnedPositionalEmbedding,
    PositionalConfig,
    PositionalScheme,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_slopes,
    relative_position_bucket,
)

__all__ = [
    "ALiBi",
    "LearnedPositionalEmbedding",
    "POSITIONAL_KINDS",
    "PositionalConfig",
    "PositionalScheme",
    "RelativePositionBias",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "alibi_slopes",
    "relative_position_bucket",
]
