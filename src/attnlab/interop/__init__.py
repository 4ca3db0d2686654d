"""Turn ``torch.nn`` attention and Transformer modules into attnlab modules with the same weights.

>>> import torch
>>> from torch import nn
>>> from attnlab.interop import from_torch, from_torch_masks
>>> torch_mha = nn.MultiheadAttention(64, 8, batch_first=True)
>>> mha = from_torch(torch_mha)                        # attnlab MultiHeadAttention, same weights
>>> x = torch.randn(2, 10, 64)
>>> pad = torch.zeros(2, 10, dtype=torch.bool)         # PyTorch: True = padding
>>> expected, _ = torch_mha(x, x, x, key_padding_mask=pad, need_weights=False)
>>> got = mha(x, mask=from_torch_masks(key_padding_mask=pad))
>>> torch.allclose(got, expected, atol=1e-6)
True

**Layout.** attnlab is batch-first everywhere. The converted module takes ``(B, n, d)``
whatever the PyTorch module's ``batch_first`` was; for a ``batch_first=False`` module,
transpose the ``(n, B, d)`` inputs with ``x.transpose(0, 1)`` and the output back.

**Calls.** ``torch_mha(q, q, q)`` is ``mha(q)``; ``torch_mha(q, kv, kv)`` is ``mha(q, kv)``;
``torch_mha(q, k, v)`` with distinct key and value tensors is ``mha(q, k, value=v)``.
``need_weights=True, average_attn_weights=False`` corresponds to ``return_weights=True``
(weights ``(B, H, n_q, n_k)``; average over dim 1 for PyTorch's default). PyTorch's
``is_causal=True`` is only a hint next to an explicit ``attn_mask``; attnlab's
``is_causal=True`` builds the causal mask itself.

**Mask polarity.** attnlab has one convention (docs/design.md): boolean ``True`` = *allowed*;
float masks additive (0 allowed, ``-inf`` blocked). PyTorch's ``nn.MultiheadAttention``
uses the opposite boolean polarity:

==============================  ==================  ============================================
PyTorch argument                meaning in PyTorch  attnlab equivalent
==============================  ==================  ============================================
``key_padding_mask`` bool       ``True`` = padding  ``from_key_padding_mask(m)``: ``~m`` as
``(B, n_k)``                                        ``(B, 1, 1, n_k)``
``key_padding_mask`` float      additive            same values as ``(B, 1, 1, n_k)``
``attn_mask`` bool              ``True`` = blocked  ``from_torch_attn_mask(m)``: ``~m``
``attn_mask`` float             additive            identical
``attn_mask`` ``(B·H, n_q,      per batch row and   reshape to ``(B, H, n_q, n_k)``
n_k)``                          head
==============================  ==================  ============================================

(The converters live in :mod:`attnlab.attention.masks`.) A 2-D mask is key padding ``(B,
n_k)`` in attnlab (docs/design.md, "Masks"), so PyTorch's 2-D ``attn_mask`` ``(n_q, n_k)``
goes in as ``(1, 1, n_q, n_k)``. :func:`from_torch_masks` does all of it at once — invert,
bring ``attn_mask`` to 4 dimensions (unfolding a 3-D one, given ``num_heads``) and combine
with the padding mask — and returns the ``mask=`` to pass. Note that
``torch.nn.functional.scaled_dot_product_attention`` already uses attnlab's polarity
(``True`` = allowed), so its masks pass unchanged.

One deliberate difference: where every key of a query is blocked, PyTorch returns NaN
and attnlab returns zeros (the output row is then ``out_proj``'s bias).
"""

from __future__ import annotations

from torch import nn

from attnlab.interop.mha import from_torch_masks, from_torch_mha

_TRANSFORMER_TYPES: tuple[type[nn.Module], ...] = (
    nn.Transformer,
    nn.TransformerEncoder,
    nn.TransformerDecoder,
    nn.TransformerEncoderLayer,
    nn.TransformerDecoderLayer,
)


def from_torch(module: nn.Module) -> nn.Module:
    """The attnlab equivalent of a ``torch.nn`` module, with its weights copied.

    * ``nn.MultiheadAttention`` → :class:`~attnlab.attention.MultiHeadAttention`
      (see :func:`~attnlab.interop.mha.from_torch_mha`);
    * ``nn.Transformer``, ``nn.TransformerEncoder``, ``nn.TransformerDecoder``,
      ``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer`` → their attnlab
      counterparts (see ``attnlab.interop.transformer.from_torch_transformer``).

    Raises:
        TypeError: any other module type.
    """
    if isinstance(module, nn.MultiheadAttention):
        return from_torch_mha(module)
    if isinstance(module, _TRANSFORMER_TYPES):
        from attnlab.interop.transformer import from_torch_transformer

        return from_torch_transformer(module)
    supported = ", ".join(f"nn.{t.__name__}" for t in (nn.MultiheadAttention, *_TRANSFORMER_TYPES))
    raise TypeError(
        f"from_torch cannot convert {type(module).__name__}; supported types: {supported}"
    )


def __getattr__(name: str):
    if name == "load_bert":  # Hugging Face BERT directories (imports the models lazily)
        from attnlab.interop.bert import load_bert

        return load_bert
    raise AttributeError(f"module 'attnlab.interop' has no attribute {name!r}")


__all__ = ["from_torch", "from_torch_masks", "from_torch_mha", "load_bert"]
