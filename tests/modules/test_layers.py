"""FeedForward, LayerNorm, RMSNorm against PyTorch and float64 recomputations of their formulas."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.modules import FeedForward, LayerNorm, RMSNorm, layer_norm, make_norm, rms_norm

SHAPES = [(7,), (3, 16), (2, 5, 33), (2, 3, 4, 8)]
EPS = [1e-5, 1e-2, 0.5]


def _randomize(module: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("eps", EPS)
def test_layer_norm_formula_equals_torch(shape, eps):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64) * 3 + 1
    gamma = torch.randn(shape[-1], dtype=torch.float64)
    beta = torch.randn(shape[-1], dtype=torch.float64)
    expected = F.layer_norm(x, (shape[-1],), gamma, beta, eps)
    torch.testing.assert_close(layer_norm(x, gamma, beta, eps), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        layer_norm(x, None, None, eps), F.layer_norm(x, (shape[-1],), eps=eps), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("eps", EPS)
def test_layer_norm_module_equals_torch(fused, bias, eps):
    torch.manual_seed(1)
    ln = LayerNorm(16, eps, bias=bias, fused=fused).double()
    _randomize(ln)
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    out = ln(x)
    expected = F.layer_norm(x, (16,), ln.weight, ln.bias, eps)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, ln.weight), grad)
    want = torch.autograd.grad(expected, (x, ln.weight), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-10)


def test_layer_norm_uses_biased_variance_and_eps_inside_root():
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.float64)
    eps = 0.25
    var = ((x - 3.0) ** 2).sum() / 4  # biased: divide by d = 4
    expected = (x - 3.0) / math.sqrt(var + eps)
    torch.testing.assert_close(LayerNorm(4, eps, fused=False).double()(x), expected)
    torch.testing.assert_close(LayerNorm(4, eps).double()(x), expected)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fused", [True, False])
def test_rms_norm_equals_formula(shape, fused):
    torch.manual_seed(2)
    norm = RMSNorm(shape[-1], 1e-3, fused=fused).double()
    _randomize(norm)
    x = torch.randn(shape, dtype=torch.float64)
    expected = x / torch.sqrt((x * x).sum(-1, keepdim=True) / shape[-1] + 1e-3) * norm.weight
    torch.testing.assert_close(norm(x), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(rms_norm(x, norm.weight, 1e-3), expected, rtol=0, atol=1e-12)


def test_make_norm_chooses_and_rejects():
    assert isinstance(make_norm("layernorm", 8, 1e-6), LayerNorm)
    assert make_norm("layernorm", 8, 1e-6).eps == 1e-6
    assert isinstance(make_norm("rmsnorm", 8), RMSNorm)
    assert make_norm("layernorm", 8, bias=False).bias is None
    with pytest.raises(ValueError, match=r"norm must be one of .*got 'batchnorm'"):
        make_norm("batchnorm", 8)


def _ffn_reference(ffn: FeedForward, x: torch.Tensor) -> torch.Tensor:
    """The FFN formulas in float64, from the weights, without the module's code."""
    w1, b1 = ffn.w1.weight.double(), ffn.w1.bias.double()
    w2, b2 = ffn.w2.weight.double(), ffn.w2.bias.double()
    h = x.double() @ w1.T + b1
    if ffn.activation == "relu":
        h = torch.where(h > 0, h, torch.zeros_like(h))
    elif ffn.activation == "gelu":
        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    else:
        gate, up = h[..., : ffn.d_ff], h[..., ffn.d_ff :]
        h = gate / (1 + torch.exp(-gate)) * up
    return h @ w2.T + b2


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_matches_float64_formula(activation):
    torch.manual_seed(3)
    ffn = FeedForward(12, 20, activation=activation).eval()
    x = torch.randn(2, 5, 12)
    expected = _ffn_reference(ffn, x)
    torch.testing.assert_close(ffn(x).double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ffn.double()(x.double()), expected, rtol=0, atol=1e-12)
    assert ffn.w1.out_features == (40 if activation == "swiglu" else 20)


def test_feed_forward_dropout_only_in_training():
    torch.manual_seed(4)
    ffn = FeedForward(8, 64, dropout=0.5)
    x = torch.randn(4, 3, 8)
    ffn.train()
    assert not torch.allclose(ffn(x), ffn(x))
    ffn.eval()
    torch.testing.assert_close(ffn(x), ffn(x), rtol=0, atol=0)
    torch.testing.assert_close(ffn(x), _ffn_reference(ffn, x).float(), rtol=1e-5, atol=1e-5)


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match=r"activation must be one of .*got 'tanh'"):
        FeedForward(8, 16, activation="tanh")
    with pytest.raises(ValueError, match=r"d_ff must be > 0, got 0"):
        FeedForward(8, 0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.5"):
        FeedForward(8, 16, dropout=1.5)
    with pytest.raises(ValueError, match=r"x has width 9 but the layer expects width 8"):
        FeedForward(8, 16)(torch.randn(2, 9))
    with pytest.raises(ValueError, match=r"x has width 5 but the layer expects width 6"):
        LayerNorm(6)(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"x has width 5 but the layer expects width 6"):
        RMSNorm(6)(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"eps must be >= 0, got -1"):
        LayerNorm(6, -1.0)
