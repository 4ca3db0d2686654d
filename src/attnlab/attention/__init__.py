"""The lectures' attention, one concept a file.

* :mod:`~attnlab.attention.pooling` — kernel attention pooling (Nadaraya–Watson), seed 002
* :mod:`~attnlab.attention.scoring` — dot, scaled dot, additive, bilinear, cosine scores
* :mod:`~attnlab.attention.masks` — causal / padding masks and the masked softmax
* :mod:`~attnlab.attention.core` — scaled dot-product attention, explicit and fused
* :mod:`~attnlab.attention.additive` — Bahdanau's additive attention module
* :mod:`~attnlab.attention.multihead` — multi-head attention with a KV cache
"""

from attnlab.attention.core import scaled_dot_product_attention, self_attention
from attnlab.attention.masks import (
    causal_mask,
    combine_masks,
    from_key_padding_mask,
    from_torch_attn_mask,
    lengths_to_mask,
    masked_softmax,
    padding_mask,
    to_additive,
)
from attnlab.attention.multihead import KVCache, MultiHeadAttention

__all__ = [
    "KVCache",
    "MultiHeadAttention",
    "causal_mask",
    "combine_masks",
    "from_key_padding_mask",
    "from_torch_attn_mask",
    "lengths_to_mask",
    "masked_softmax",
    "padding_mask",
    "scaled_dot_product_attention",
    "self_attention",
    "to_additive",
]
