"""The lectures' attention, one concept a file.

* :mod:`~attnlab.attention.pooling` — kernel attention pooling (Nadaraya–Watson), López et al.
  (Attention Mechanisms)
* :mod:`~attnlab.attention.scoring` — dot, scaled dot, additive, bilinear, cosine scores; the
  score API (``prepare`` the keys once, ``score`` each step)
* :mod:`~attnlab.attention.masks` — causal / padding masks, the mask contract, the masked softmax
* :mod:`~attnlab.attention.core` — scaled dot-product attention: the formula
* :mod:`~attnlab.attention.kernels` — the fastest path to its value (PyTorch's kernel or the formula)
* :mod:`~attnlab.attention.groups` — grouped-query attention's products, shared heads never copied
* :mod:`~attnlab.attention.linear` — the projections' ``Linear``, oneDNN-prepacked while decoding
* :mod:`~attnlab.attention.additive` — Bahdanau's additive attention module
* :mod:`~attnlab.attention.location` — location-aware scores (Chorowski et al. 2015)
* :mod:`~attnlab.attention.multihead` — multi-head attention with a KV cache
"""

from attnlab.attention.additive import AdditiveAttention
from attnlab.attention.core import scaled_dot_product_attention, self_attention
from attnlab.attention.location import LocationAwareScore
from attnlab.attention.masks import (
    as_attention_mask,
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
from attnlab.attention.pooling import (
    ParametricAttentionPooling,
    average_pooling,
    boxcar_kernel,
    database_lookup,
    epanechnikov_kernel,
    fit_bandwidth,
    gaussian_kernel,
    leave_one_out_mask,
    nadaraya_watson,
)
from attnlab.attention.scoring import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    Score,
    cosine_score,
    dot_score,
    scaled_dot_score,
)

__all__ = [
    "AdditiveAttention",
    "AdditiveScore",
    "BilinearScore",
    "DotScore",
    "LocationAwareScore",
    "KVCache",
    "MultiHeadAttention",
    "ParametricAttentionPooling",
    "Score",
    "as_attention_mask",
    "average_pooling",
    "boxcar_kernel",
    "causal_mask",
    "combine_masks",
    "cosine_score",
    "database_lookup",
    "dot_score",
    "epanechnikov_kernel",
    "fit_bandwidth",
    "from_key_padding_mask",
    "from_torch_attn_mask",
    "gaussian_kernel",
    "leave_one_out_mask",
    "lengths_to_mask",
    "masked_softmax",
    "nadaraya_watson",
    "padding_mask",
    "scaled_dot_product_attention",
    "scaled_dot_score",
    "self_attention",
    "to_additive",
]
