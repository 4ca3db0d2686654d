"""Attention masks and the masked softmax.

One convention everywhere (docs/design.md): a **boolean** mask is ``True`` where attention is
*allowed*, and broadcasts to the weights' shape ``(B, H, n_q, n_k)``. A **float** mask is
additive — 0 where allowed, ``-inf`` where blocked — exactly the matrix ``M`` of Li
(Transformer Part I), "Attention Masks": ``softmax(QKᵀ / √d_k + M)`` with ``M_ij = 0`` or ``-∞``
(added after the scaling, as the decks write it; the scaling cannot change 0 or ``-∞``).

PyTorch uses the opposite polarity in ``nn.MultiheadAttention`` (``key_padding_mask`` and
boolean ``attn_mask`` are ``True`` = *blocked*); :func:`from_key_padding_mask` and
:func:`from_torch_attn_mask` convert.

**The mask contract** (:func:`as_attention_mask`) is what every attention entry point —
:func:`~attnlab.attention.scaled_dot_product_attention`,
:class:`~attnlab.attention.MultiHeadAttention`, the layers, the stacks, the models — reads:
a ``(B, n_k)`` key-padding mask (``True`` = real token; a 2-D mask is never ``(n_q, n_k)``),
a ``(B, n_q, n_k)`` mask, or one of the scores' own rank, ``(B|1, H|1, n_q|1, n_k)``. It is
brought to the scores' rank once, where a caller hands it in; the parts below receive only
that form. :func:`masked_softmax` is the formula's ``softmax(S + M)`` over scores of any
shape: its ``M`` broadcasts against ``S`` as the sum does.

A query row whose every key is blocked gets all-zero weights (and so a zero output) with
finite gradients, never NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnlab.validation import check_floating, check_rank, check_tensor, shape_str


def causal_mask(
    n_q: int, n_k: int | None = None, *, device: torch.device | str | None = None
) -> Tensor:
    """Boolean causal mask ``(n_q, n_k)``: query ``i`` may see key ``j`` iff ``j <= i + n_k - n_q``.

    Li (Transformer Part I) (decoder masking): ``M_ij = -∞`` for ``j > i``. With ``n_k > n_q`` the queries are
    the *last* ``n_q`` positions of the sequence (incremental decoding with a KV cache: keys
    ``0 .. n_k-1``, queries ``n_k-n_q .. n_k-1``), so the triangle is aligned bottom-right.
    """
    n_k = n_q if n_k is None else n_k
    if n_q < 0 or n_k < 0:
        raise ValueError(f"causal_mask sizes must be >= 0, got n_q={n_q}, n_k={n_k}")
    if n_k < n_q:
        raise ValueError(
            f"causal_mask needs n_k >= n_q (queries are the last n_q positions), "
            f"got n_q={n_q}, n_k={n_k}"
        )
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """``(B,)`` valid lengths → ``(B, max_len)`` boolean, True on the first ``lengths[b]`` slots.

    López et al. (Attention Mechanisms) ("masked softmax over valid lengths"). Use
    :func:`padding_mask` to get the ``(B, 1, 1, n)`` form that broadcasts over heads and
    queries.
    """
    check_rank("lengths", lengths, 1, "(B,)")
    if lengths.is_floating_point():
        raise ValueError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got a minimum of {int(lengths.min())}")
    longest = int(lengths.max()) if lengths.numel() else 0
    max_len = longest if max_len is None else max_len
    if longest > max_len:
        raise ValueError(f"lengths must be <= max_len={max_len}, got a maximum of {longest}")
    positions = torch.arange(max_len, device=lengths.device)  # (n,)
    return positions[None, :] < lengths[:, None]  # (B, n)


def padding_mask(x: Tensor, pad_id: int | None = None) -> Tensor:
    """Key-padding mask of shape ``(B, 1, 1, n)`` (``True`` = real token), broadcastable to weights.

    ``x`` is either token ids ``(B, n)`` together with ``pad_id``, or a boolean ``(B, n)``
    mask that is already ``True`` for real tokens.
    """
    check_rank("x", x, 2, "(B, n)")
    if x.dtype == torch.bool:
        real = x
    else:
        if pad_id is None:
            raise ValueError("padding_mask needs pad_id when x holds token ids (got pad_id=None)")
        real = x != pad_id
    return real[:, None, None, :]  # (B, 1, 1, n)


def from_key_padding_mask(key_padding_mask: Tensor) -> Tensor:
    """PyTorch's ``key_padding_mask`` ``(B, n)`` → attnlab's ``(B, 1, 1, n)`` mask.

    PyTorch: boolean ``True`` = padding (blocked), or float additive. attnlab: boolean
    ``True`` = allowed. Float masks are already additive and only reshaped.
    """
    check_rank("key_padding_mask", key_padding_mask, 2, "(B, n)")
    mask = ~key_padding_mask if key_padding_mask.dtype == torch.bool else key_padding_mask
    return mask[:, None, None, :]


def from_torch_attn_mask(attn_mask: Tensor) -> Tensor:
    """PyTorch ``nn.MultiheadAttention``'s ``attn_mask`` → attnlab's convention.

    A boolean ``attn_mask`` is ``True`` = blocked in PyTorch, so it is inverted; a float
    ``attn_mask`` is additive in both and returned as is; the shape is kept, so the result
    can go back to PyTorch. For attnlab, PyTorch's ``(n_q, n_k)`` is ``m[None, None]`` (a 2-D
    mask is key padding here) and its ``(B·H, n_q, n_k)`` is ``(B, H, n_q, n_k)``:
    :func:`attnlab.interop.from_torch_masks` does both.
    """
    check_tensor("attn_mask", attn_mask)
    return ~attn_mask if attn_mask.dtype == torch.bool else attn_mask


def to_additive(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Boolean mask (``True`` = allowed) → additive float mask (0 allowed, ``-inf`` blocked)."""
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Combine masks so a key is allowed only where every mask allows it.

    All boolean → logical AND; any float → everything is made additive and summed. ``None``
    entries are skipped; ``None`` is returned when nothing is left.
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    if all(m.dtype == torch.bool for m in present):
        out = present[0]
        for m in present[1:]:
            out = out & m
        return out
    dtype = next(m.dtype for m in present if m.dtype != torch.bool)
    out = to_additive(present[0], dtype)
    for m in present[1:]:
        out = out + to_additive(m, dtype)
    return out


def check_mask(mask: Tensor, weights_shape: tuple[int, ...], name: str = "mask") -> None:
    """Check that ``mask`` can mask attention weights of ``weights_shape`` (``(..., n_q, n_k)``)."""
    _check_dtype(mask, name)
    n_k = weights_shape[-1]
    if mask.dim() == 0:
        raise ValueError(f"{name} must have at least 1 dimension (..., n_k), got a scalar")
    if mask.shape[-1] not in (1, n_k):
        raise ValueError(f"{name} has shape {shape_str(mask.shape)} but keys have length {n_k}")
    try:
        full = torch.broadcast_shapes(mask.shape, weights_shape)
    except RuntimeError:
        full = None
    if full != torch.Size(weights_shape):
        raise ValueError(
            f"{name} has shape {shape_str(mask.shape)}, which does not broadcast to the "
            f"attention weights' shape {shape_str(weights_shape)} (B, H, n_q, n_k)"
        )
    if mask.is_floating_point():
        if torch.isnan(mask).any():
            raise ValueError(f"{name} is a float (additive) mask and must not contain NaN")
        if torch.isposinf(mask).any():
            raise ValueError(f"{name} is a float (additive) mask and must not contain +inf")


def _check_dtype(mask: Tensor, name: str) -> None:
    check_tensor(name, mask)
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(
            f"{name} must be boolean (True = allowed) or floating (additive), "
            f"got dtype {mask.dtype}"
        )


def allowed_keys(mask: Tensor) -> Tensor:
    """Boolean view of any mask: ``True`` where attention is allowed."""
    return mask if mask.dtype == torch.bool else mask != float("-inf")


def as_attention_mask(
    mask: Tensor | None,
    shape: Sequence[int],
    *,
    name: str = "mask",
    bias: Tensor | None = None,
    check: bool = True,
) -> Tensor | None:
    """The mask contract: what a caller passes → the one form the attention takes.

    ``shape`` is the scores' ``(B, H, n_q, n_k)`` (in general ``(B, ..., n_q, n_k)``). ``mask``
    is boolean (``True`` = allowed) or additive float, one of

    * ``(B, n_k)`` — key padding, ``True`` = real token; any other 2-D shape is refused;
    * ``(B, n_q, n_k)`` — per sentence and query (4-D scores);
    * the scores' rank, broadcastable to them — ``(B|1, H|1, n_q|1, n_k)``.

    Returns the mask at the scores' rank (``(B, 1, 1, n_k)``, ``(B, 1, n_q, n_k)``, or as
    given) plus ``bias`` (an additive float at the scores' rank: ALiBi, a relative position
    bias), or ``None`` when both are ``None``. ``check`` validates dtype, rank, shape and
    values, naming ``name``; ``check=False`` (the caller built the mask itself) only reshapes.
    """
    if mask is not None:
        rank = len(shape)
        if check:
            _check_form(mask, shape, name)
        if mask.dim() < rank:  # (B, n_k) → (B, 1, 1, n_k); (B, n_q, n_k) → (B, 1, n_q, n_k)
            mask = mask[(slice(None),) + (None,) * (rank - mask.dim())]
    mask = combine_masks(mask, bias)
    if check and mask is not None:
        check_mask(mask, tuple(shape), name)
    return mask


def _check_form(mask: Tensor, shape: Sequence[int], name: str) -> None:
    """A mask of 2 to ``len(shape)`` dimensions; a 2-D one is exactly ``(B, n_k)``."""
    _check_dtype(mask, name)
    rank = len(shape)
    layout = "(B, n_k), (B, n_q, n_k) or (B, H, n_q, n_k)" if rank == 4 else (
        f"(B, n_k) up to the scores' {shape_str(shape)}")
    check_rank(name, mask, range(2, rank + 1), layout)
    if mask.dim() == 2 and tuple(mask.shape) != (shape[0], shape[-1]):
        raise ValueError(
            f"{name} has shape {shape_str(mask.shape)} but a 2-D mask is a key-padding mask "
            f"(B, n_k) = ({shape[0]}, {shape[-1]})"
        )
    if mask.shape[-1] not in (1, shape[-1]):
        raise ValueError(f"{name} has shape {shape_str(mask.shape)} but keys have length {shape[-1]}")


def masked_softmax(
    scores: Tensor, mask: Tensor | None = None, dim: int = -1, *, check: bool = True
) -> Tensor:
    """Softmax over the allowed keys: López et al. (Attention Mechanisms), "masked softmax"; Li
    (Transformer Part I), ``softmax(S + M)``.

    Args:
        scores: ``(..., n_q, n_k)`` attention scores.
        mask: boolean (``True`` = allowed) or additive float mask broadcastable to ``scores``.
        dim: the key dimension (default last).

        check: validate ``scores`` and ``mask``; ``False`` for a caller that made both
            (:func:`~attnlab.attention.scaled_dot_product_attention`).

    Returns:
        weights of ``scores``' shape: each row sums to 1 over its allowed keys, is exactly 0 on
        blocked keys, and is all zeros (with finite gradients) when every key is blocked.
    """
    if check:
        check_tensor("scores", scores)
        check_floating("scores", scores)
    if mask is None:
        return torch.softmax(scores, dim=dim)
    if check:
        if scores.dim() == 0:
            raise ValueError("scores must have at least 1 dimension (..., n_k), got a scalar")
        check_mask(mask, tuple(scores.shape))
    if mask.dtype != torch.bool:
        mask = mask.to(scores.dtype)  # first: a value beyond the dtype's range is -inf, blocked
        scores = scores + mask  # the lecture's S + M
    allowed = allowed_keys(mask)
    # A large finite negative instead of -inf: exp(min - max) is exactly 0 on blocked keys,
    # and a fully blocked row gives a finite (uniform) softmax, zeroed below: no NaN anywhere.
    weights = torch.softmax(torch.where(allowed, scores, torch.finfo(scores.dtype).min), dim=dim)
    aligned = allowed[(None,) * (scores.dim() - allowed.dim())]  # same rank as scores, so dim fits
    has_key = aligned.any(dim=dim, keepdim=True)  # mask-sized: is any key allowed?
    # Skipping this full pass when no row is fully blocked needs a host sync: eager CPU only.
    if torch.compiler.is_compiling() or weights.device.type != "cpu" or not bool(has_key.all()):
        weights = weights.masked_fill(~has_key, 0.0)
    return weights
