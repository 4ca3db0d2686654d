"""EncoderLayer / DecoderLayer and the stacks: placement of norms and dropout against PyTorch's
own layers (weights copied by hand here, independently of attnlab.interop), KV-cache decoding
against the full causal forward, masks and attention biases against explicit recomputation."""

import math

import pytest
import torch
from torch import nn

from attnlab.attention.multihead import KVCache
from attnlab.modules import (
    BlockConfig,
    DecoderLayer,
    EncoderDecoderStack,
    EncoderLayer,
    LayerNorm,
    RMSNorm,
    TransformerDecoderStack,
    TransformerEncoderStack,
)


def block(d_model: int, num_heads: int, d_ff: int, **fields) -> BlockConfig:
    """The layers' config: width, heads, feed-forward width and any other BlockConfig field."""
    return BlockConfig(d_model=d_model, num_heads=num_heads, d_ff=d_ff, **fields)

D, H, FF = 16, 4, 24


def _copy_from_torch(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy an nn.Transformer{Encoder,Decoder}Layer's weights into ours by parameter name."""
    names = {
        "self_attn.in_proj_weight": "self_attn.in_proj.weight",
        "self_attn.in_proj_bias": "self_attn.in_proj.bias",
        "multihead_attn.in_proj_weight": "cross_attn.in_proj.weight",
        "multihead_attn.in_proj_bias": "cross_attn.in_proj.bias",
        "multihead_attn.out_proj.weight": "cross_attn.out_proj.weight",
        "multihead_attn.out_proj.bias": "cross_attn.out_proj.bias",
        "linear1.weight": "ffn.w1.weight",
        "linear1.bias": "ffn.w1.bias",
        "linear2.weight": "ffn.w2.weight",
        "linear2.bias": "ffn.w2.bias",
    }
    state = {names.get(k, k): v for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state, strict=True)


def _torch_pair(kind: str, norm_first: bool, dropout: float = 0.0, activation: str = "relu"):
    torch.manual_seed(0)
    cls = nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
    theirs = cls(
        D, H, FF, dropout=dropout, activation=activation, batch_first=True, norm_first=norm_first
    )
    ours_cls = EncoderLayer if kind == "encoder" else DecoderLayer
    ours = ours_cls(
        block(
            D,
            H,
            FF,
            dropout=dropout,
            attn_dropout=dropout,
            activation_dropout=dropout,
            activation=activation,
            norm_first=norm_first,
        )
    )
    _copy_from_torch(ours, theirs)
    return ours, theirs


def _padding(lengths, n):
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]  # (B, n) True = real


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_norm_placement_matches_torch(norm_first):
    ours, theirs = _torch_pair("encoder", norm_first)
    other, _ = _torch_pair("encoder", not norm_first)
    x = torch.randn(3, 6, D)
    real = _padding([6, 4, 1], 6)
    expected = theirs(x, src_key_padding_mask=~real)
    torch.testing.assert_close(ours(x, real), expected, rtol=1e-5, atol=1e-5)
    assert (other(x, real) - expected).abs().max() > 1e-2  # the other placement differs


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_norm_placement_matches_torch(norm_first):
    ours, theirs = _torch_pair("decoder", norm_first, activation="gelu")
    other, _ = _torch_pair("decoder", not norm_first, activation="gelu")
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    src_real = _padding([7, 3], 7)
    expected = theirs(
        x,
        memory,
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(5),
        tgt_is_causal=True,
        memory_key_padding_mask=~src_real,
    )
    got = ours(x, memory, memory_mask=src_real)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert (other(x, memory, memory_mask=src_real) - expected).abs().max() > 1e-2


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_dropout_placement_matches_torch_in_training(kind, norm_first):
    """Same seed → same dropout masks drawn in the same order as PyTorch's layers.

    Batch 1: PyTorch's attention output is a (n, B, d)-major view, so for B > 1 its dropout
    mask maps to elements in another order even when placement is identical.
    """
    ours, theirs = _torch_pair(kind, norm_first=norm_first, dropout=0.3)
    ours.train(), theirs.train()
    x, memory = torch.randn(1, 5, D), torch.randn(1, 6, D)
    args = (x,) if kind == "encoder" else (x, memory)
    torch.manual_seed(7)
    expected = (
        theirs(*args)
        if kind == "encoder"
        else theirs(
            x,
            memory,
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(5),
            tgt_is_causal=True,
        )
    )
    torch.manual_seed(7)
    torch.testing.assert_close(ours(*args), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_dropout_only_in_training(kind):
    torch.manual_seed(1)
    layer = (EncoderLayer if kind == "encoder" else DecoderLayer)(block(D, H, FF, dropout=0.5))
    x, memory = torch.randn(2, 5, D), torch.randn(2, 6, D)
    args = (x,) if kind == "encoder" else (x, memory)
    layer.train()
    assert (layer(*args) - layer(*args)).abs().max() > 1e-3
    layer.eval()
    out = layer(*args)
    torch.testing.assert_close(layer(*args), out, rtol=0, atol=0)
    no_dropout = (EncoderLayer if kind == "encoder" else DecoderLayer)(block(D, H, FF, dropout=0.0)).eval()
    no_dropout.load_state_dict(layer.state_dict())
    torch.testing.assert_close(no_dropout(*args), out, rtol=0, atol=0)


class ToyRotary(nn.Module):
    """RoPE written independently of attnlab.modules.positional: rotate pairs by (offset + m) θ_i."""

    def rotate(self, x, offset):
        n, d = x.shape[-2], x.shape[-1]
        pos = torch.arange(offset, offset + n, dtype=torch.float64)
        angle = pos[:, None] * 100.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)

    def forward(self, q, k, offset):
        return self.rotate(q, offset), None if k is None else self.rotate(k, offset)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("rotary", [False, True])
def test_decoder_layer_cache_step_by_step_equals_full(norm_first, rotary):
    torch.manual_seed(2)
    rope = ToyRotary() if rotary else None
    layer = DecoderLayer(block(D, H, FF, norm_first=norm_first), rotary=rope).eval()
    x, memory = torch.randn(2, 6, D), torch.randn(2, 5, D)
    src_real = _padding([5, 2], 5)
    full = layer(x, memory, memory_mask=src_real)
    cache = (KVCache(), KVCache())
    steps = [layer(x[:, :3], memory, memory_mask=src_real, cache=cache)]  # a prefix of 3 at once
    for t in range(3, 6):
        steps.append(layer(x[:, t : t + 1], memory, memory_mask=src_real, cache=cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert len(cache[0]) == 6 and len(cache[1]) == 5


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_encoder_layer_cache_equals_full(norm_first):
    """EncoderLayer with is_causal and a KVCache is a decoder-only (GPT) block."""
    torch.manual_seed(12)
    layer = EncoderLayer(block(D, H, FF, norm_first=norm_first), rotary=ToyRotary()).eval()
    x = torch.randn(2, 5, D)
    real = _padding([5, 5], 5)
    full = layer(x, real, is_causal=True)
    cache = KVCache()
    steps = [layer(x[:, :2], real[:, :2], is_causal=True, cache=cache)]
    steps += [
        layer(x[:, t : t + 1], real[:, : t + 1], is_causal=True, cache=cache) for t in (2, 3, 4)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert (layer(x, real) - full).abs().max() > 1e-3  # causality mattered


def test_decoder_stack_cache_with_alibi_bias_and_target_padding():
    torch.manual_seed(3)
    dec = TransformerDecoderStack.from_config(block(D, H, FF, norm_first=True), 2).eval()
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / H) for h in range(H)])

    def alibi(n_q, n_k):  # -m_h |i - j| with queries at the last n_q positions
        i = torch.arange(n_k - n_q, n_k)[:, None]
        return -slopes[:, None, None] * (torch.arange(n_k)[None, :] - i).abs()  # (H, n_q, n_k)

    x, memory = torch.randn(2, 5, D), torch.randn(2, 4, D)
    tgt_real, src_real = _padding([5, 5], 5), _padding([4, 3], 4)
    full = dec(x, memory, self_mask=tgt_real, memory_mask=src_real, attn_bias=alibi(5, 5))
    cache = dec.new_cache()
    steps = [
        dec(
            x[:, t : t + 1],
            memory,
            self_mask=tgt_real[:, : t + 1],
            memory_mask=src_real,
            cache=cache,
            attn_bias=alibi(1, t + 1),
        )
        for t in range(5)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert (dec(x, memory, memory_mask=src_real) - full).abs().max() > 1e-3  # the bias matters


def test_attn_bias_is_added_to_the_scores():
    """Float64 recomputation of softmax(QKᵀ/√d_h + bias) V through the layer's own weights."""
    torch.manual_seed(4)
    layer = EncoderLayer(block(D, H, FF, norm_first=True, dropout=0.0)).double().eval()
    x = torch.randn(2, 5, D, dtype=torch.float64)
    bias = torch.randn(1, H, 5, 5, dtype=torch.float64)
    attn = layer.self_attn
    h = layer.norm1(x)
    q, k, v = (t.view(2, 5, H, D // H).transpose(1, 2) for t in attn.in_proj(h).split(D, -1))
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D // H) + bias, dim=-1)  # (B, H, n, n)
    x1 = x + attn.out_proj((w @ v).transpose(1, 2).reshape(2, 5, D))
    expected = x1 + layer.ffn(layer.norm2(x1))
    torch.testing.assert_close(layer(x, attn_bias=bias), expected, rtol=0, atol=1e-10)
    out, weights = layer(x, attn_bias=bias, return_weights=True)
    torch.testing.assert_close(weights, w, rtol=0, atol=1e-12)


def test_blocking_bias_equals_boolean_mask():
    torch.manual_seed(5)
    layer = EncoderLayer(block(D, H, FF)).eval()
    x = torch.randn(2, 6, D)
    real = _padding([6, 3], 6)
    bias = torch.zeros(2, 1, 1, 6).masked_fill(~real[:, None, None, :], float("-inf"))
    torch.testing.assert_close(layer(x, attn_bias=bias), layer(x, real), rtol=1e-6, atol=1e-6)


def test_mask_forms_agree_and_bad_shapes_raise():
    torch.manual_seed(6)
    layer = EncoderLayer(block(D, H, FF)).eval()
    x = torch.randn(2, 6, D)
    real = _padding([6, 2], 6)
    expected = layer(x, real)
    square = real[:, None, :].expand(2, 6, 6)  # (B, n_q, n_k)
    torch.testing.assert_close(layer(x, square), expected, rtol=0, atol=0)
    torch.testing.assert_close(layer(x, real[:, None, None, :]), expected, rtol=0, atol=0)
    with pytest.raises(
        ValueError,
        match=r"mask has shape \(2, 5\) but a 2-D mask is a key-padding "
        r"mask \(B, n_k\) = \(2, 6\)",
    ):
        layer(x, real[:, :5])
    with pytest.raises(ValueError, match=r"mask must have 2 or 3 or 4 dimensions"):
        layer(x, real[0])


@pytest.mark.parametrize("norm_first", [False, True])
def test_return_weights_path_equals_fused_path(norm_first):
    torch.manual_seed(7)
    dec = DecoderLayer(block(D, H, FF, norm_first=norm_first)).eval()
    x, memory = torch.randn(2, 4, D), torch.randn(2, 5, D)
    src_real = _padding([5, 2], 5)
    out, (self_w, cross_w) = dec(x, memory, memory_mask=src_real, return_weights=True)
    torch.testing.assert_close(out, dec(x, memory, memory_mask=src_real), rtol=1e-5, atol=1e-5)
    assert self_w.shape == (2, H, 4, 4) and cross_w.shape == (2, H, 4, 5)
    assert torch.all(self_w.triu(diagonal=1) == 0)  # causal
    assert torch.all(cross_w[1, :, :, 2:] == 0)  # padded source keys
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, H, 4))


def test_encoder_decoder_stack_masks_hide_padding_and_future():
    torch.manual_seed(8)
    stack = EncoderDecoderStack.from_config(block(D, H, FF, norm_first=True), 2, 2).eval()
    src, tgt = torch.randn(2, 6, D), torch.randn(2, 5, D)
    src_real = _padding([6, 3], 6)
    out = stack(src, tgt, src_mask=src_real)
    src2 = src.clone()
    src2[1, 3:] = 100.0  # change only padded source positions
    tgt2 = tgt.clone()
    tgt2[:, 3:] = -50.0  # change only future target positions (for t < 3)
    torch.testing.assert_close(stack(src2, tgt, src_mask=src_real), out, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        stack(src, tgt2, src_mask=src_real)[:, :3], out[:, :3], rtol=0, atol=1e-6
    )
    everything_padded = torch.zeros(2, 6, dtype=torch.bool)
    assert torch.isfinite(stack(src, tgt, src_mask=everything_padded)).all()


def test_encode_decode_equals_forward_and_final_norms():
    torch.manual_seed(9)
    stack = EncoderDecoderStack.from_config(block(D, H, FF, norm="rmsnorm", norm_first=True), 1, 2).eval()
    assert isinstance(stack.encoder.norm, RMSNorm) and isinstance(stack.decoder.norm, RMSNorm)
    src, tgt = torch.randn(2, 6, D), torch.randn(2, 3, D)
    real_src, real_tgt = _padding([6, 4], 6), _padding([3, 2], 3)
    memory = stack.encode(src, real_src)
    torch.testing.assert_close(
        stack.decode(tgt, memory, real_src, real_tgt),
        stack(src, tgt, real_src, real_tgt),
        rtol=0,
        atol=0,
    )
    assert TransformerEncoderStack.from_config(block(D, H, FF), 2).norm is None  # post-LN: none by default
    pre_ln = TransformerEncoderStack.from_config(block(D, H, FF, norm_first=True), 2)
    assert isinstance(pre_ln.norm, LayerNorm)
    asked = TransformerEncoderStack.from_config(block(D, H, FF), 2, final_norm=True)
    assert isinstance(asked.norm, LayerNorm)
    assert len(TransformerDecoderStack.from_config(block(D, H, FF), 3).layers) == 3


def test_bad_inputs_raise_value_error():
    with pytest.raises(
        ValueError, match=r"num_heads must divide d_model, got d_model=16 and num_heads=5"
    ):
        EncoderLayer(block(16, 5, 32))
    with pytest.raises(ValueError, match=r"activation must be one of .*got 'sigmoid'"):
        DecoderLayer(block(16, 4, 32, activation="sigmoid"))
    with pytest.raises(ValueError, match=r"norm must be one of .*got 'batch'"):
        EncoderLayer(block(16, 4, 32, norm="batch"))
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        EncoderLayer(block(16, 4, 32, dropout=1.0))
    with pytest.raises(ValueError, match=r"num_layers must be > 0, got 0"):
        TransformerEncoderStack.from_config(block(16, 4, 32), 0)
    layer = DecoderLayer(block(16, 4, 32))
    with pytest.raises(ValueError, match=r"x has width 12 but d_model is 16"):
        layer(torch.randn(2, 3, 12), torch.randn(2, 4, 16))
    with pytest.raises(ValueError, match=r"memory has width 8 but d_model is 16"):
        layer(torch.randn(2, 3, 16), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"memory has batch size 3 but x has batch size 2"):
        layer(torch.randn(2, 3, 16), torch.randn(3, 4, 16))
    with pytest.raises(
        ValueError, match=r"x must have 3 dimensions \(B, n, d_model\), got shape \(3, 16\)"
    ):
        EncoderLayer(block(16, 4, 32))(torch.randn(3, 16))
    with pytest.raises(ValueError, match=r"cache must be a pair \(self_cache, cross_cache\)"):
        layer(torch.randn(2, 3, 16), torch.randn(2, 4, 16), cache=KVCache())
    with pytest.raises(ValueError, match=r"tgt has batch size 3 but src has batch size 2"):
        EncoderDecoderStack.from_config(block(16, 4, 32), 1, 1)(torch.randn(2, 4, 16), torch.randn(3, 4, 16))


# ---------------------------------------------------------------- one BlockConfig for every layer
def test_model_configs_extend_the_block_config_and_hand_it_to_their_layers():
    from dataclasses import fields

    from attnlab.models import GPT, EncoderConfig, GPTConfig, TransformerConfig

    names = {f.name for f in fields(BlockConfig)}
    for config in (TransformerConfig(10), GPTConfig(10), EncoderConfig(10)):
        assert isinstance(config, BlockConfig) and names <= {f.name for f in fields(config)}
        assert type(config.block) is BlockConfig
        assert {n: getattr(config.block, n) for n in names} == {n: getattr(config, n) for n in names}
    gpt = GPTConfig(10)  # GPT-2 style defaults, declared once in GPTConfig
    assert (gpt.norm_first, gpt.activation, gpt.dropout, gpt.d_model) == (True, "gelu", 0.0, 384)
    model = GPT(GPTConfig(10, d_model=16, num_heads=2, num_layers=2, d_ff=24, norm="rmsnorm"))
    for layer in model.decoder.layers:
        assert layer.config == model.config.block and layer.ffn.d_ff == 24
        assert isinstance(layer.norm1, RMSNorm)
    assert isinstance(model.decoder.norm, RMSNorm)  # pre-LN: the stack ends with a norm


def test_layers_take_a_block_config_only():
    with pytest.raises(TypeError, match="config must be a BlockConfig, got dict"):
        EncoderLayer({"d_model": 16, "num_heads": 4})


def test_a_stack_is_built_from_its_layers():
    layers = [EncoderLayer(block(D, H, FF)) for _ in range(2)]
    norm = LayerNorm(D)
    stack = TransformerEncoderStack(layers, norm)
    assert list(stack.layers) == layers and stack.norm is norm
    with pytest.raises(ValueError, match="layers must hold at least one layer"):
        TransformerEncoderStack([])
    with pytest.raises(TypeError, match=r"layers\[0\] must be a DecoderLayer, got EncoderLayer"):
        TransformerDecoderStack(layers)
    with pytest.raises(ValueError, match=r"layers\[1\] has d_model=8 but layers\[0\] has d_model=16"):
        TransformerEncoderStack([layers[0], EncoderLayer(block(8, 2, 16))])
    with pytest.raises(TypeError, match=r"norm must be an attnlab LayerNorm or RMSNorm, got LayerNorm"):
        TransformerEncoderStack(layers, torch.nn.LayerNorm(D))  # its parts are called with check=False
