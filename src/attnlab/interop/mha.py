"""``torch.nn.MultiheadAttention`` → attnlab :class:`~attnlab.attention.MultiHeadAttention`.

The two modules compute the same function (Li (Transformer Part I) "Multi-head Attention",
Vaswani et al. eq. 5) with the same parameter layout, so conversion is a weight copy:

=============================================  ==============================================
PyTorch                                        attnlab
=============================================  ==============================================
``in_proj_weight`` ``(3d, d)`` [W_q; W_k; W_v]  ``in_proj.weight`` (kdim = vdim = d_model)
``q/k/v_proj_weight`` (kdim or vdim ≠ d)       ``q_proj / k_proj / v_proj.weight``
``in_proj_bias`` ``(3d,)``                     ``in_proj.bias`` or the three ``*_proj.bias``
``out_proj``                                   ``out_proj``
``dropout`` (on the weights, training only)    ``dropout``
=============================================  ==============================================

``add_bias_kv`` and ``add_zero_attn`` (extra learned / zero key-value slots, not in the
lectures) have no attnlab counterpart and are rejected. Masks are converted by
:func:`from_torch_masks`; see :mod:`attnlab.interop` for the polarity table.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.attention.masks import combine_masks, from_key_padding_mask, from_torch_attn_mask
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.validation import check_rank, shape_str


def from_torch_mha(module: nn.MultiheadAttention) -> MultiHeadAttention:
    """An attnlab :class:`MultiHeadAttention` computing exactly what ``module`` computes.

    The copy lives on ``module``'s device and dtype and inherits its train/eval mode. It is
    batch-first whatever ``module.batch_first`` says: inputs are ``(B, n, d)``.

    Raises:
        TypeError: ``module`` is not an ``nn.MultiheadAttention``.
        ValueError: ``module`` uses ``add_bias_kv`` or ``add_zero_attn``.
    """
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(
            f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}"
        )
    if module.bias_k is not None or module.bias_v is not None:
        raise ValueError(
            "module has add_bias_kv=True (learned extra key/value slots), which attnlab's "
            "MultiHeadAttention does not support; expected add_bias_kv=False"
        )
    if module.add_zero_attn:
        raise ValueError(
            "module has add_zero_attn=True (an extra all-zero key/value slot), which attnlab's "
            "MultiHeadAttention does not support; expected add_zero_attn=False"
        )
    ref = module.out_proj.weight
    ours = MultiHeadAttention(
        module.embed_dim,
        module.num_heads,
        kdim=module.kdim,
        vdim=module.vdim,
        bias=module.in_proj_bias is not None,
        dropout=module.dropout,
    ).to(device=ref.device, dtype=ref.dtype)
    with torch.no_grad():
        _copy_in_proj(module, ours)
        ours.out_proj.weight.copy_(module.out_proj.weight)
        if ours.out_proj.bias is not None:
            ours.out_proj.bias.copy_(module.out_proj.bias)
    return ours.train(module.training)


def _copy_in_proj(module: nn.MultiheadAttention, ours: MultiHeadAttention) -> None:
    bias = module.in_proj_bias  # (3d,) or None
    if ours.packed:
        ours.in_proj.weight.copy_(module.in_proj_weight)  # (3d, d)
        if bias is not None:
            ours.in_proj.bias.copy_(bias)
        return
    d = module.embed_dim
    pairs = (
        (ours.q_proj, module.q_proj_weight),
        (ours.k_proj, module.k_proj_weight),
        (ours.v_proj, module.v_proj_weight),
    )
    for i, (proj, weight) in enumerate(pairs):
        proj.weight.copy_(weight)  # (d, d), (d, kdim), (d, vdim)
        if bias is not None:
            proj.bias.copy_(bias[i * d : (i + 1) * d])


def from_torch_masks(
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    *,
    num_heads: int | None = None,
) -> Tensor | None:
    """PyTorch's ``attn_mask`` / ``key_padding_mask`` pair → one attnlab ``mask``.

    Args:
        attn_mask: PyTorch's ``(n_q, n_k)`` or ``(B·H, n_q, n_k)`` mask; boolean ``True`` =
            blocked, or additive float.
        key_padding_mask: PyTorch's ``(B, n_k)`` mask; boolean ``True`` = padding, or additive
            float.
        num_heads: ``H``, needed only to unfold a 3-D ``attn_mask`` into ``(B, H, n_q, n_k)``.

    Returns:
        A mask in attnlab's convention (boolean ``True`` = allowed, or additive float) in the
        4-D form of the mask contract, broadcastable to ``(B, H, n_q, n_k)`` (``(1, 1, n_q,
        n_k)`` for PyTorch's 2-D ``attn_mask``: a 2-D mask is key padding in attnlab), or
        ``None`` when both inputs are ``None``. Pass it as ``mask=`` to the module returned by
        :func:`from_torch_mha`.
    """
    if attn_mask is not None:
        check_rank("attn_mask", attn_mask, (2, 3), "(n_q, n_k) or (B·H, n_q, n_k)")
        attn_mask = from_torch_attn_mask(attn_mask)
        if attn_mask.dim() == 3:
            attn_mask = _unfold_heads(attn_mask, num_heads)  # (B, H, n_q, n_k)
    if key_padding_mask is not None:
        key_padding_mask = from_key_padding_mask(key_padding_mask)  # (B, 1, 1, n_k)
        if attn_mask is not None:
            _check_same_keys(attn_mask, key_padding_mask)
    if attn_mask is not None and attn_mask.dim() == 2:
        attn_mask = attn_mask[None, None]  # (1, 1, n_q, n_k): never read as key padding
    return combine_masks(attn_mask, key_padding_mask)


def _unfold_heads(attn_mask: Tensor, num_heads: int | None) -> Tensor:
    """``(B·H, n_q, n_k)`` → ``(B, H, n_q, n_k)`` (PyTorch stacks heads batch-major)."""
    if num_heads is None:
        raise ValueError(
            f"attn_mask has shape {shape_str(attn_mask.shape)} (B·H, n_q, n_k), so num_heads "
            "must be given to unfold it into (B, H, n_q, n_k); got num_heads=None"
        )
    if num_heads <= 0 or attn_mask.shape[0] % num_heads != 0:
        raise ValueError(
            f"attn_mask has shape {shape_str(attn_mask.shape)} but its first dimension must be "
            f"B·num_heads, a multiple of num_heads={num_heads}"
        )
    bh, n_q, n_k = attn_mask.shape
    return attn_mask.reshape(bh // num_heads, num_heads, n_q, n_k)


def _check_same_keys(attn_mask: Tensor, padding: Tensor) -> None:
    """``attn_mask`` ``(n_q, n_k)`` / ``(B, H, n_q, n_k)`` against padding ``(B, 1, 1, n_k)``."""
    if attn_mask.shape[-1] != padding.shape[-1]:
        raise ValueError(
            f"key_padding_mask has {padding.shape[-1]} keys but attn_mask has shape "
            f"{shape_str(attn_mask.shape)} with {attn_mask.shape[-1]} keys"
        )
    if attn_mask.dim() == 4 and attn_mask.shape[0] != padding.shape[0]:
        raise ValueError(
            f"key_padding_mask has batch size {padding.shape[0]} but attn_mask unfolds to "
            f"{shape_str(attn_mask.shape)} with batch size {attn_mask.shape[0]}"
        )
