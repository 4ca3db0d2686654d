"""Bahdanau additive attention (López et al. (Attention Mechanisms) eqs. 9-10): float64 NumPy
reference and mask properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.attention import (
    AdditiveAttention,
    causal_mask,
    lengths_to_mask,
    padding_mask,
    to_additive,
)

B, NQ, NK, DQ, DK, DV, H = 3, 4, 6, 5, 7, 2, 8


def rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).normal(size=shape))


def make(dropout=0.0):
    torch.manual_seed(0)
    return AdditiveAttention(DQ, DK, H, dropout=dropout).double()


def inputs():
    return rand(B, NQ, DQ, seed=1), rand(B, NK, DK, seed=2), rand(B, NK, DV, seed=3)


def np_reference(attn, q, k, v, allowed):
    """softmax over allowed keys of w_vᵀ tanh(W_q q + W_k k), then Σ α v; zero rows stay zero."""
    w_q = attn.score.w_q.weight.detach().numpy()
    w_k = attn.score.w_k.weight.detach().numpy()
    w_v = attn.score.w_v.weight.detach().numpy()[0]
    hidden = np.tanh((q @ w_q.T)[:, :, None, :] + (k @ w_k.T)[:, None, :, :])  # (B, n_q, n_k, h)
    scores = hidden @ w_v  # (B, n_q, n_k)
    allowed = np.broadcast_to(allowed, scores.shape)
    e = np.where(allowed, np.exp(scores - scores.max(-1, keepdims=True)), 0.0)
    total = e.sum(-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def test_matches_numpy_with_lengths_and_empty_row():
    attn = make()
    q, k, v = inputs()
    lengths = torch.tensor([6, 2, 0])  # batch 2 has no valid key at all
    out, w = attn(q, k, v, lengths=lengths, return_weights=True)
    allowed = (np.arange(NK)[None, :] < lengths.numpy()[:, None])[:, None, :]
    ref_out, ref_w = np_reference(attn, q.numpy(), k.numpy(), v.numpy(), allowed)
    assert out.shape == (B, NQ, DV) and w.shape == (B, NQ, NK)
    np.testing.assert_allclose(w.detach().numpy(), ref_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-12, atol=1e-14)


def test_blocked_keys_get_zero_weight_and_rows_sum_to_one():
    attn = make()
    q, k, v = inputs()
    mask = torch.rand(B, NQ, NK, generator=torch.Generator().manual_seed(0)) > 0.4
    mask[0, 0] = False  # one fully blocked row
    _, w = attn(q, k, v, mask=mask, return_weights=True)
    assert torch.all(w[~mask] == 0)
    sums = w.sum(-1)
    has_key = mask.any(-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert torch.all(sums[~has_key] == 0)


def test_fully_blocked_rows_are_zero_with_finite_gradients():
    attn = make()
    q, k, v = (t.requires_grad_() for t in inputs())
    mask = torch.zeros(B, NQ, NK, dtype=torch.bool)
    mask[1] = True  # only batch 1 may attend
    out, w = attn(q, k, v, mask=mask, return_weights=True)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.all(out[[0, 2]] == 0) and torch.all(w[[0, 2]] == 0)
    (out.pow(2).sum() + w.sum()).backward()
    for g in (q.grad, k.grad, v.grad, *(p.grad for p in attn.parameters())):
        assert g is not None and torch.isfinite(g).all()


def test_gradcheck():
    attn = make()
    q, k, v = (t[:1, :3].clone().requires_grad_() for t in inputs())  # small: gradcheck is O(numel)
    mask = causal_mask(3, 3)[None].clone()  # (1, n_q, n_k): a 2-D mask would be key padding
    mask[0, 0] = False  # a fully blocked row too
    assert torch.autograd.gradcheck(lambda q, k, v: attn(q, k, v, mask=mask), (q, k, v))


def test_mask_forms_agree():
    """lengths=, padding_mask(lengths_to_mask(...)), a (B, 1, n_k) bool and a float mask agree."""
    attn = make()
    q, k, v = inputs()
    lengths = torch.tensor([6, 3, 1])
    valid = lengths_to_mask(lengths, NK)  # (B, n_k)
    ref = attn(q, k, v, lengths=lengths)
    for mask in (padding_mask(valid), valid[:, None, :], to_additive(valid[:, None, :], q.dtype)):
        torch.testing.assert_close(attn(q, k, v, mask=mask), ref, rtol=0, atol=0)
    # mask and lengths combine (bool and float alike)
    causal = causal_mask(NQ, NK)[None]  # (1, n_q, n_k): a 2-D mask would be key padding
    both = attn(q, k, v, mask=causal & valid[:, None, :])
    torch.testing.assert_close(attn(q, k, v, mask=causal, lengths=lengths), both)
    additive = to_additive(causal, q.dtype)
    torch.testing.assert_close(attn(q, k, v, mask=additive, lengths=lengths), both)


def test_blocked_keys_never_change_the_output():
    attn = make()
    q, k, v = inputs()
    lengths = torch.tensor([2, 5, 4])
    out = attn(q, k, v, lengths=lengths)
    k2, v2 = k.clone(), v.clone()
    for b, n in enumerate(lengths.tolist()):
        k2[b, n:] = 1e3 * torch.randn_like(k2[b, n:])
        v2[b, n:] = float("1e6")
    torch.testing.assert_close(attn(q, k2, v2, lengths=lengths), out, rtol=0, atol=0)


def test_dropout_only_in_training():
    attn = make(dropout=0.5)
    q, k, v = inputs()
    ref = make(dropout=0.0)(q, k, v)
    torch.testing.assert_close(attn.eval()(q, k, v), ref)
    torch.manual_seed(1)
    assert not torch.allclose(attn.train()(q, k, v), ref)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda a, q, k, v: a(q[0], k, v), "queries must have 3 dimensions"),
        (lambda a, q, k, v: a(q, k, v[:, :-1]), "values has shape"),
        (lambda a, q, k, v: a(q[:2], k, v), "keys have batch size 3 but queries have batch size 2"),
        (lambda a, q, k, v: a(q[..., :-1], k, v), "q has width 4 but query_dim=5"),
        (lambda a, q, k, v: a(q, k[..., :-1], v), "k has width 6 but key_dim=7"),
        (lambda a, q, k, v: a(q, k, v, mask=torch.ones(B, NK + 1) > 0), "mask has shape"),
        (lambda a, q, k, v: a(q, k, v, mask=torch.ones(2, NQ, NK) > 0), "does not broadcast"),
        (lambda a, q, k, v: a(q, k, v, lengths=torch.tensor([1, 2])), "lengths has 2 entries"),
        (lambda a, q, k, v: a(q, k, v, lengths=torch.tensor([1, 2, 9])), "max_len=6"),
        (lambda a, q, k, v: a(q.long(), k, v), "queries must be a floating"),
        (lambda a, q, k, v: AdditiveAttention(DQ, DK, H, dropout=1.5), "dropout must be in"),
    ],
)
def test_bad_inputs_raise_value_error(call, match):
    attn = make()
    with pytest.raises(ValueError, match=match):
        call(attn, *inputs())
