"""from_torch on nn.Transformer and its parts reproduces PyTorch's outputs (≤ 1e-5)."""

import pytest
import torch
from torch import nn

from attnlab.interop import from_torch
from attnlab.interop.transformer import from_torch_transformer
from attnlab.modules import (
    DecoderLayer,
    EncoderDecoderStack,
    EncoderLayer,
    TransformerDecoderStack,
    TransformerEncoderStack,
)

D, H, FF, B, S, T = 32, 4, 48, 3, 7, 5
TOL = dict(rtol=1e-5, atol=1e-5)
pytestmark = [
    pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
    pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask"),
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors"),
]


def _inputs(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    src = torch.randn(B, S, D, generator=g, dtype=dtype)
    tgt = torch.randn(B, T, D, generator=g, dtype=dtype)
    src_pad = torch.arange(S)[None, :] >= torch.tensor([7, 4, 2])[:, None]  # PyTorch: True = pad
    tgt_pad = torch.arange(T)[None, :] >= torch.tensor([5, 5, 3])[:, None]
    return src, tgt, src_pad, tgt_pad


def _causal(n):
    return nn.Transformer.generate_square_subsequent_mask(n)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_equals_torch(norm_first, activation):
    torch.manual_seed(0)
    theirs = nn.Transformer(
        D, H, 2, 2, FF, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    ours = from_torch(theirs)
    assert isinstance(ours, EncoderDecoderStack)
    src, tgt, src_pad, _ = _inputs()
    expected = theirs(
        src,
        tgt,
        src_key_padding_mask=src_pad,
        tgt_mask=_causal(T),
        tgt_is_causal=True,
        memory_key_padding_mask=src_pad,
    )
    got = ours(src, tgt, src_mask=~src_pad, is_causal=True)
    torch.testing.assert_close(got, expected, **TOL)
    assert (ours(src, tgt) - expected).abs().max() > 1e-3  # the source padding mattered


def test_transformer_with_target_padding_and_gradients():
    torch.manual_seed(1)
    theirs = nn.Transformer(D, H, 2, 1, FF, dropout=0.0, activation="gelu", batch_first=True)
    ours = from_torch_transformer(theirs)
    src, tgt, src_pad, tgt_pad = _inputs(1)
    src_a, tgt_a = src.clone().requires_grad_(), tgt.clone().requires_grad_()
    expected = theirs(
        src_a,
        tgt_a,
        src_key_padding_mask=src_pad,
        tgt_mask=_causal(T),
        tgt_is_causal=True,
        tgt_key_padding_mask=tgt_pad,
        memory_key_padding_mask=src_pad,
    )
    src_b, tgt_b = src.clone().requires_grad_(), tgt.clone().requires_grad_()
    got = ours(src_b, tgt_b, src_mask=~src_pad, tgt_mask=~tgt_pad)
    torch.testing.assert_close(got, expected, **TOL)
    weights = torch.randn(expected.shape)
    (expected * weights).sum().backward()
    (got * weights).sum().backward()
    torch.testing.assert_close(src_b.grad, src_a.grad, **TOL)
    torch.testing.assert_close(tgt_b.grad, tgt_a.grad, **TOL)


def test_transformer_seq_first_eps_no_bias_float64():
    torch.manual_seed(2)
    theirs = nn.Transformer(
        D, H, 1, 2, FF, dropout=0.0, layer_norm_eps=1e-3, bias=False, norm_first=True
    ).double()
    ours = from_torch(theirs)
    assert ours.encoder.layers[0].norm1.eps == 1e-3 and ours.encoder.norm.bias is None
    assert next(ours.parameters()).dtype == torch.float64
    src, tgt, src_pad, _ = _inputs(2, torch.float64)
    expected = theirs(
        src.transpose(0, 1),
        tgt.transpose(0, 1),
        src_key_padding_mask=src_pad,
        tgt_mask=_causal(T).double(),
        memory_key_padding_mask=src_pad,
    )  # (T, B, d)
    got = ours(src, tgt, src_mask=~src_pad)
    torch.testing.assert_close(got, expected.transpose(0, 1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("final_norm", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_equals_torch(final_norm, norm_first):
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    theirs = nn.TransformerEncoder(
        layer, 3, norm=nn.LayerNorm(D) if final_norm else None, enable_nested_tensor=False
    )
    ours = from_torch(theirs)
    assert isinstance(ours, TransformerEncoderStack) and (ours.norm is not None) == final_norm
    src, _, src_pad, _ = _inputs(3)
    expected = theirs(src, src_key_padding_mask=src_pad)
    torch.testing.assert_close(ours(src, mask=~src_pad), expected, **TOL)


def test_encoder_stack_equals_torch_inference_fast_path():
    """PyTorch's eval/no-grad path (nested tensors, fused kernel) zeroes padded rows.

    Compare the real ones.
    """
    torch.manual_seed(4)
    layer = nn.TransformerEncoderLayer(D, H, FF, batch_first=True)
    theirs = nn.TransformerEncoder(layer, 2).eval()
    ours = from_torch(theirs)
    assert not ours.training
    src, _, src_pad, _ = _inputs(4)
    with torch.inference_mode():
        expected = theirs(src, src_key_padding_mask=src_pad)
        got = ours(src, mask=~src_pad)
    torch.testing.assert_close(got[~src_pad], expected[~src_pad], **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_equals_torch(norm_first):
    torch.manual_seed(5)
    layer = nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
    )
    theirs = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(D, eps=1e-6))
    ours = from_torch(theirs)
    assert isinstance(ours, TransformerDecoderStack) and ours.norm.eps == 1e-6
    src, tgt, src_pad, _ = _inputs(5)
    expected = theirs(
        tgt, src, tgt_mask=_causal(T), tgt_is_causal=True, memory_key_padding_mask=src_pad
    )
    torch.testing.assert_close(ours(tgt, src, memory_mask=~src_pad), expected, **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", nn.GELU()])
def test_single_layers_equal_torch(norm_first, activation):
    torch.manual_seed(6)
    kwargs = dict(dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first)
    enc_t = nn.TransformerEncoderLayer(D, H, FF, **kwargs)
    dec_t = nn.TransformerDecoderLayer(D, H, FF, **kwargs)
    enc, dec = from_torch(enc_t), from_torch(dec_t)
    assert isinstance(enc, EncoderLayer) and isinstance(dec, DecoderLayer)
    assert enc.norm_first == norm_first and enc.ffn.activation == (
        "relu" if activation == "relu" else "gelu"
    )
    src, tgt, src_pad, _ = _inputs(6)
    torch.testing.assert_close(enc(src, ~src_pad), enc_t(src, src_key_padding_mask=src_pad), **TOL)
    expected = dec_t(
        tgt, src, tgt_mask=_causal(T), tgt_is_causal=True, memory_key_padding_mask=src_pad
    )
    torch.testing.assert_close(dec(tgt, src, memory_mask=~src_pad), expected, **TOL)


def test_dropout_settings_and_mode_are_carried_over():
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.2, batch_first=True)
    ours = from_torch(theirs)
    assert ours.training
    assert ours.dropout.p == 0.2 and ours.ffn.dropout.p == 0.2 and ours.self_attn.dropout == 0.2


def test_unsupported_configurations_raise():
    with pytest.raises(ValueError, match=r"activation must be relu or exact gelu .*got <built-in"):
        from_torch(nn.TransformerEncoderLayer(D, H, FF, activation=torch.tanh))
    with pytest.raises(
        ValueError, match=r"activation must be relu or exact gelu .*approximate='tanh'"
    ):
        from_torch(nn.TransformerDecoderLayer(D, H, FF, activation=nn.GELU(approximate="tanh")))
    custom = nn.Transformer(
        D, H, custom_encoder=nn.Identity(), num_decoder_layers=1, dim_feedforward=FF
    )
    with pytest.raises(
        ValueError, match=r"nn.Transformer.encoder must be an nn.TransformerEncoder .*Identity"
    ):
        from_torch(custom)
    layer = nn.TransformerEncoderLayer(D, H, FF)
    layer.norm2 = nn.RMSNorm(D)
    with pytest.raises(
        ValueError, match=r"norm2 must be an nn.LayerNorm over the last dimension .*RMSNorm"
    ):
        from_torch(layer)
    with pytest.raises(TypeError, match=r"module must be nn.Transformer, .* got Linear"):
        from_torch_transformer(nn.Linear(2, 2))
