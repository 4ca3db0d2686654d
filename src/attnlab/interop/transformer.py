"""``torch.nn`` Transformer modules → attnlab layers and stacks with the same weights.

=================================  =============================================
PyTorch                            attnlab
=================================  =============================================
``nn.TransformerEncoderLayer``     :class:`~attnlab.modules.EncoderLayer`
``nn.TransformerDecoderLayer``     :class:`~attnlab.modules.DecoderLayer`
``nn.TransformerEncoder``          :class:`~attnlab.modules.TransformerEncoderStack`
``nn.TransformerDecoder``          :class:`~attnlab.modules.TransformerDecoderStack`
``nn.Transformer``                 :class:`~attnlab.modules.EncoderDecoderStack`
``self_attn`` / ``multihead_attn``  ``self_attn`` / ``cross_attn`` (same packed layout)
``linear1`` / ``linear2``          ``ffn.w1`` / ``ffn.w2``
``norm1..3`` (+ stack ``norm``)    ``norm1..3`` (+ stack ``norm``), same ``eps``
``dropout1..3``, ``dropout``,      :class:`~attnlab.modules.BlockConfig` ``dropout``
``self_attn.dropout``              (residual), ``activation_dropout``, ``attn_dropout``
=================================  =============================================

Supported: post-LN and pre-LN (``norm_first``), ReLU and exact GELU activations (given as
"relu"/"gelu", ``F.relu``/``F.gelu`` or ``nn.ReLU()``/``nn.GELU()``), any ``layer_norm_eps``,
``bias=False``, final norms. Any other activation callable, a non-LayerNorm norm, or a custom
encoder/decoder inside ``nn.Transformer`` raises ``ValueError``.

The result is **batch-first** whatever ``batch_first`` was, lives on the module's device and
dtype and inherits its train/eval mode. Masks map as (PyTorch → attnlab):
``src_key_padding_mask`` (True = pad) → ``src_mask = ~m`` (True = real token);
``tgt_mask = generate_square_subsequent_mask(T)`` → ``is_causal=True``;
``tgt_key_padding_mask`` → ``tgt_mask = ~m``; ``memory_key_padding_mask`` → ``src_mask``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.interop.mha import from_torch_mha
from attnlab.modules import (
    BlockConfig,
    DecoderLayer,
    EncoderDecoderStack,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    TransformerDecoderStack,
    TransformerEncoderStack,
)

_TorchLayer = nn.TransformerEncoderLayer | nn.TransformerDecoderLayer


def from_torch_transformer(module: nn.Module) -> nn.Module:
    """The attnlab equivalent of a PyTorch Transformer module, with copied weights.

    ``nn.Transformer`` → :class:`EncoderDecoderStack` (``stack(src, tgt, src_mask, tgt_mask,
    is_causal=True)``); ``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` → the stacks;
    ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` → the layers.

    Raises:
        TypeError: ``module`` is none of these types.
        ValueError: a configuration attnlab cannot reproduce (see module docstring).
    """
    if isinstance(module, nn.Transformer):
        ours: nn.Module = _convert_transformer(module)
    elif isinstance(module, nn.TransformerEncoder):
        ours = _convert_stack(module, TransformerEncoderStack)
    elif isinstance(module, nn.TransformerDecoder):
        ours = _convert_stack(module, TransformerDecoderStack)
    elif isinstance(module, nn.TransformerEncoderLayer | nn.TransformerDecoderLayer):
        ours = _convert_layer(module)
    else:
        raise TypeError(
            "module must be nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder, "
            f"nn.TransformerEncoderLayer or nn.TransformerDecoderLayer, got {type(module).__name__}"
        )
    ref = next(module.parameters())
    return ours.to(device=ref.device, dtype=ref.dtype).train(module.training)


def _convert_transformer(module: nn.Transformer) -> EncoderDecoderStack:
    for name, part, kind in (
        ("encoder", module.encoder, nn.TransformerEncoder),
        ("decoder", module.decoder, nn.TransformerDecoder),
    ):
        if not isinstance(part, kind):
            raise ValueError(
                f"nn.Transformer.{name} must be an nn.{kind.__name__} to be converted, "
                f"got a custom {type(part).__name__}"
            )
    encoder = _convert_stack(module.encoder, TransformerEncoderStack)
    decoder = _convert_stack(module.decoder, TransformerDecoderStack)
    return EncoderDecoderStack(encoder, decoder)


def _convert_stack(
    module: nn.TransformerEncoder | nn.TransformerDecoder,
    cls: type[TransformerEncoderStack] | type[TransformerDecoderStack],
) -> TransformerEncoderStack | TransformerDecoderStack:
    layers = [_convert_layer(layer) for layer in module.layers]
    norm = None if module.norm is None else _convert_norm("norm", module.norm)
    return cls(layers, norm)


def _convert_layer(module: _TorchLayer) -> EncoderLayer | DecoderLayer:
    decoder = isinstance(module, nn.TransformerDecoderLayer)
    ours = (DecoderLayer if decoder else EncoderLayer)(block_config(module))
    ours.self_attn = from_torch_mha(module.self_attn)
    if decoder:
        ours.cross_attn = from_torch_mha(module.multihead_attn)
    _copy_ffn(module, ours.ffn)
    for i in range(1, 4 if decoder else 3):
        setattr(ours, f"norm{i}", _convert_norm(f"norm{i}", getattr(module, f"norm{i}")))
    return ours


def block_config(module: _TorchLayer) -> BlockConfig:
    """The :class:`BlockConfig` of the attnlab layer equivalent to ``module``."""
    attn = module.self_attn
    return BlockConfig(
        d_model=attn.embed_dim,
        num_heads=attn.num_heads,
        d_ff=module.linear1.out_features,
        dropout=module.dropout1.p,
        attn_dropout=attn.dropout,
        activation_dropout=module.dropout.p,
        activation=_activation_name(module.activation),
        norm_first=module.norm_first,
        norm_eps=module.norm1.eps,
        bias=module.linear1.bias is not None,
    )


def _activation_name(activation: object) -> str:
    """attnlab's name for a PyTorch layer's ``activation`` (a function or a module)."""
    if activation in (F.relu, torch.relu) or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (
        isinstance(activation, nn.GELU) and activation.approximate == "none"
    ):
        return "gelu"
    raise ValueError(
        'activation must be relu or exact gelu ("relu", "gelu", F.relu, F.gelu, nn.ReLU(), '
        f"nn.GELU()) to be converted, got {activation!r}"
    )


def _copy_ffn(module: _TorchLayer, ffn: FeedForward) -> None:
    with torch.no_grad():
        for ours, theirs in ((ffn.w1, module.linear1), (ffn.w2, module.linear2)):
            ours.weight.copy_(theirs.weight)
            if (ours.bias is None) != (theirs.bias is None):
                raise ValueError(
                    f"{type(module).__name__} mixes linear layers with and without bias; "
                    "expected bias on all or none"
                )
            if ours.bias is not None:
                ours.bias.copy_(theirs.bias)


def _convert_norm(name: str, norm: nn.Module) -> LayerNorm:
    """``nn.LayerNorm`` over the last dimension → attnlab :class:`LayerNorm` (same γ, β, ε)."""
    if not isinstance(norm, nn.LayerNorm) or len(norm.normalized_shape) != 1:
        shape = getattr(norm, "normalized_shape", None)
        raise ValueError(
            f"{name} must be an nn.LayerNorm over the last dimension to be converted, "
            f"got {type(norm).__name__}"
            + (f" with normalized_shape={tuple(shape)}" if shape else "")
        )
    d = norm.normalized_shape[0]
    ours = LayerNorm(d, norm.eps, bias=norm.bias is not None or not norm.elementwise_affine)
    with torch.no_grad():
        if norm.weight is not None:
            ours.weight.copy_(norm.weight)
        if norm.bias is not None:
            ours.bias.copy_(norm.bias)
    if not norm.elementwise_affine:  # PyTorch's γ = 1, β = 0 are constants, not parameters
        ours.weight.requires_grad_(False)
        ours.bias.requires_grad_(False)
    return ours
