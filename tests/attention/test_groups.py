"""Grouped-query attention's products (attention/groups.py) against the written-out form that
repeats every shared key/value head for its group (``repeat_interleave``), in float64: scores,
weighted values, the explicit and the fused attention paths, masks, the causal triangle and
gradients; and the argument check of ``scaled_dot_product_attention`` for shared heads."""

import pytest
import torch

from attnlab.attention import groups, kernels
from attnlab.attention.core import explicit_attention, scaled_dot_product_attention


def _qkv(b=2, h=6, h_kv=2, n_q=4, n_k=7, d=8, dtype=torch.float64):
    torch.manual_seed(0)
    return (torch.randn(b, h, n_q, d, dtype=dtype), torch.randn(b, h_kv, n_k, d, dtype=dtype),
            torch.randn(b, h_kv, n_k, d, dtype=dtype))


def _repeated(t, h):
    return t.repeat_interleave(h // t.shape[-3], dim=-3)  # (..., H, n, d): each shared head g times


@pytest.mark.parametrize("h_kv", [1, 2, 3, 6])
def test_scores_and_mix_equal_the_repeated_heads(h_kv):
    q, k, v = _qkv(h_kv=h_kv)
    s = groups.scores(q, k)
    assert s.shape == (2, 6, 4, 7)
    torch.testing.assert_close(s, q @ _repeated(k, 6).transpose(-2, -1), atol=1e-12, rtol=0)
    w = s.softmax(-1)
    torch.testing.assert_close(groups.mix(w, v), w @ _repeated(v, 6), atol=1e-12, rtol=0)
    assert groups.grouped(q, k) is (h_kv != 6)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_both_attention_paths_equal_the_repeated_heads(is_causal, masked):
    q, k, v = _qkv(n_q=4, n_k=7)
    mask = torch.rand(2, 1, 4, 7, generator=torch.Generator().manual_seed(1)) > 0.3 if masked else None
    expected, weights = explicit_attention(q, _repeated(k, 6), _repeated(v, 6), mask, is_causal=is_causal,
                                           dropout=0.0, scale=8**-0.5)
    out, w = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, return_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(w, weights, atol=1e-12, rtol=0)
    fused = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    torch.testing.assert_close(fused, expected, atol=1e-10, rtol=0)


def test_gradients_reach_the_shared_heads_as_the_repeated_form_sums_them():
    q, k, v = (t.requires_grad_() for t in _qkv())
    scaled_dot_product_attention(q, k, v, is_causal=True).square().sum().backward()
    grads = [t.grad for t in (q, k, v)]
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    explicit_attention(q2, _repeated(k2, 6), _repeated(v2, 6), None, is_causal=True, dropout=0.0,
                       scale=8**-0.5)[0].square().sum().backward()
    for got, want in zip(grads, (q2.grad, k2.grad, v2.grad), strict=True):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_decoding_step_in_half_and_single_precision(dtype):
    q, k, v = (t.to(dtype) for t in _qkv(b=3, h=9, h_kv=3, n_q=1, n_k=40, d=16))
    with torch.inference_mode():
        out = kernels.dispatch(explicit_attention, q, k, v, None, is_causal=False, dropout=0.0, scale=0.25)
    expected = explicit_attention(q.double(), _repeated(k.double(), 9), _repeated(v.double(), 9), None,
                                  is_causal=False, dropout=0.0, scale=0.25)[0]
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


@pytest.mark.parametrize("h_kv", [4, 5])
def test_key_heads_that_do_not_divide_the_query_heads_are_refused(h_kv):
    q, k, v = _qkv(h=6, h_kv=h_kv)
    with pytest.raises(ValueError, match="H_kv heads dividing"):
        scaled_dot_product_attention(q, k, v)
