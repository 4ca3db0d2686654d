"""Grouped-query and multi-query attention (Ainslie et al. 2023; Shazeer 2019): ``H_kv`` key /
value heads shared by groups of ``H / H_kv`` query heads, against a float64 recomputation, an
ordinary multi-head layer with each shared head copied into its group, and the KV cache."""

import pytest
import torch

from attnlab.attention import MultiHeadAttention
from attnlab.models import GPT, GPTConfig
from attnlab.modules.positional import POSITIONAL_KINDS

D, H = 32, 8


def _layer(kv_heads, **kw):
    torch.manual_seed(0)
    return MultiHeadAttention(D, H, num_kv_heads=kv_heads, **kw).double()


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_each_query_head_attends_with_its_groups_shared_key_and_value(kv_heads):
    """float64, from the weights: head h uses key/value head h // (H / H_kv)."""
    mha = _layer(kv_heads)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    d_h, kv = D // H, kv_heads * (D // H)
    w, b = mha.in_proj.weight, mha.in_proj.bias
    q, k, v = (x @ w[:D].T + b[:D]), (x @ w[D:D + kv].T + b[D:D + kv]), (x @ w[D + kv:].T + b[D + kv:])
    heads = []
    for h in range(H):
        g = h // (H // kv_heads)
        qh = q[..., h * d_h:(h + 1) * d_h]
        kh, vh = k[..., g * d_h:(g + 1) * d_h], v[..., g * d_h:(g + 1) * d_h]
        heads.append(torch.softmax(qh @ kh.transpose(-1, -2) / d_h**0.5, dim=-1) @ vh)
    expected = mha.out_proj(torch.cat(heads, dim=-1))
    assert torch.allclose(mha(x), expected, atol=1e-12)
    assert mha.in_proj.weight.shape == (D + 2 * kv, D)


def test_it_equals_multi_head_attention_with_each_shared_head_copied_into_its_group():
    gqa, full = _layer(2), _layer(None)
    d_h, groups = D // H, H // 2
    with torch.no_grad():
        w, b = gqa.in_proj.weight, gqa.in_proj.bias
        k_rows = torch.cat([w[D + (h // groups) * d_h:D + (h // groups + 1) * d_h] for h in range(H)])
        v_rows = torch.cat([w[D + 2 * d_h + (h // groups) * d_h:D + 2 * d_h + (h // groups + 1) * d_h]
                            for h in range(H)])
        k_bias = torch.cat([b[D + (h // groups) * d_h:D + (h // groups + 1) * d_h] for h in range(H)])
        v_bias = torch.cat([b[D + 2 * d_h + (h // groups) * d_h:D + 2 * d_h + (h // groups + 1) * d_h]
                            for h in range(H)])
        full.in_proj.weight.copy_(torch.cat([w[:D], k_rows, v_rows]))
        full.in_proj.bias.copy_(torch.cat([b[:D], k_bias, v_bias]))
        full.out_proj.load_state_dict(gqa.out_proj.state_dict())
    x = torch.randn(3, 6, D, dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 2 + [False] * 4])
    assert torch.allclose(gqa(x, mask=mask), full(x, mask=mask), atol=1e-12)
    out, weights = gqa(x, is_causal=True, return_weights=True)
    assert weights.shape == (3, H, 6, 6) and torch.allclose(out, full(x, is_causal=True), atol=1e-12)


def test_cross_attention_shares_heads_too():
    mha = _layer(2, kdim=12, vdim=12)
    x, memory = torch.randn(2, 3, D, dtype=torch.float64), torch.randn(2, 7, 12, dtype=torch.float64)
    assert mha.k_proj.weight.shape == (2 * D // H, 12)
    assert mha(x, memory).shape == (2, 3, D)


@pytest.mark.parametrize("positional", POSITIONAL_KINDS)
def test_a_gpt_with_shared_heads_caches_only_them_and_decodes_as_its_full_forward(positional):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=50, block_size=32, d_model=D, num_heads=H, num_kv_heads=2,
                       num_layers=2, positional=positional, dropout=0.0)
    model = GPT(config).eval()
    idx = torch.randint(50, (2, 12))
    full = model(idx)  # (B, n, V)
    cache = model.new_cache()
    steps = [model(idx[:, :5], cache=cache)] + [model(idx[:, t:t + 1], cache=cache) for t in range(5, 12)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    assert all(layer.k.shape == (2, 2, 12, D // H) for layer in cache)  # (B, H_kv, n, d_h): 2 heads, not 8


@pytest.mark.parametrize("kv_heads", [3, 0, 16])
def test_shared_heads_that_do_not_divide_the_heads_are_refused(kv_heads):
    with pytest.raises(ValueError, match="num_kv_heads"):
        MultiHeadAttention(D, H, num_kv_heads=kv_heads)
    with pytest.raises(ValueError, match="num_kv_heads"):
        GPTConfig(vocab_size=10, d_model=D, num_heads=H, num_kv_heads=kv_heads)
