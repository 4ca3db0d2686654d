"""Scoring functions (López et al. (Attention Mechanisms) "Attention Scoring Functions",
Hasegawa-Johnson (ECE 417 Lecture 21) "Cosine Distance").

References are float64 NumPy einsum recomputations using the modules' own parameters, plus
properties the formulas imply (variance argument, Cauchy–Schwarz, M = I gives the dot score).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.attention import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    LocationAwareScore,
    cosine_score,
    dot_score,
    scaled_dot_score,
)


def rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).normal(size=shape))


def np_dot(q, k):
    q, k = np.broadcast_arrays(q[..., :, None, :], k[..., None, :, :])
    return np.einsum("...ijd,...ijd->...ij", q, k)


SHAPES = [
    ((5, 4), (7, 4)),
    ((2, 3, 5, 8), (2, 3, 6, 8)),
    ((2, 3, 5, 8), (3, 6, 8)),  # keys broadcast over the leading batch dimension
    ((1, 4, 2), (3, 9, 2)),
]


@pytest.mark.parametrize("q_shape,k_shape", SHAPES)
def test_dot_and_scaled_dot_match_einsum(q_shape, k_shape):
    q, k = rand(*q_shape, seed=1), rand(*k_shape, seed=2)
    ref = np_dot(q.numpy(), k.numpy())
    got = dot_score(q, k)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)
    d = q_shape[-1]
    scaled = scaled_dot_score(q, k).numpy()
    np.testing.assert_allclose(scaled, ref / math.sqrt(d), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("q_shape,k_shape", SHAPES)
def test_cosine_matches_einsum(q_shape, k_shape):
    q, k = rand(*q_shape, seed=3), rand(*k_shape, seed=4)
    qn, kn = q.numpy(), k.numpy()
    q_hat = qn / np.linalg.norm(qn, axis=-1, keepdims=True)
    k_hat = kn / np.linalg.norm(kn, axis=-1, keepdims=True)
    ref = np_dot(q_hat, k_hat)
    np.testing.assert_allclose(cosine_score(q, k).numpy(), ref, rtol=1e-12, atol=1e-12)


def test_cosine_properties():
    q, k = rand(6, 5, seed=5), rand(8, 5, seed=6)
    s = cosine_score(q, k)
    assert (s.abs() <= 1 + 1e-12).all()  # Cauchy–Schwarz
    torch.testing.assert_close(torch.diagonal(cosine_score(q, q)), torch.ones(6, dtype=q.dtype))
    torch.testing.assert_close(cosine_score(3.0 * q, 0.5 * k), s)  # magnitude is ignored
    zero = torch.zeros(1, 5, dtype=q.dtype, requires_grad=True)
    z = cosine_score(zero, k)
    assert torch.equal(z, torch.zeros(1, 8, dtype=q.dtype))
    z.sum().backward()
    assert torch.isfinite(zero.grad).all()


def test_scaled_dot_has_unit_variance():
    """The docstring's argument: q·k of d unit-variance entries has variance d; /√d makes it 1."""
    d, n = 256, 20000
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(n, 1, d, generator=gen, dtype=torch.float64)
    k = torch.randn(n, 1, d, generator=gen, dtype=torch.float64)
    raw, scaled = dot_score(q, k).flatten(), scaled_dot_score(q, k).flatten()
    assert raw.var().item() == pytest.approx(d, rel=0.05)
    assert scaled.var().item() == pytest.approx(1.0, rel=0.05)


def test_additive_score_matches_numpy():
    torch.manual_seed(0)
    score = AdditiveScore(query_dim=3, key_dim=5, hidden_dim=7).double()
    q, k = rand(2, 4, 3, seed=7), rand(2, 6, 5, seed=8)
    w_q, w_k = score.w_q.weight.detach().numpy(), score.w_k.weight.detach().numpy()
    w_v = score.w_v.weight.detach().numpy()[0]
    hidden = np.tanh(
        np.einsum("hq,biq->bih", w_q, q.numpy())[:, :, None, :]
        + np.einsum("hk,bjk->bjh", w_k, k.numpy())[:, None, :, :]
    )
    ref = np.einsum("h,bijh->bij", w_v, hidden)
    got = score(q, k)
    assert got.shape == (2, 4, 6)
    np.testing.assert_allclose(got.detach().numpy(), ref, rtol=1e-12, atol=1e-12)


def test_bilinear_score_matches_numpy_and_identity_is_dot():
    torch.manual_seed(0)
    score = BilinearScore(query_dim=3, key_dim=5).double()
    q, k = rand(2, 4, 3, seed=9), rand(2, 6, 5, seed=10)
    ref = np.einsum("biq,qk,bjk->bij", q.numpy(), score.weight.detach().numpy(), k.numpy())
    np.testing.assert_allclose(score(q, k).detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    square = BilinearScore(5, 5).double()
    with torch.no_grad():
        square.weight.copy_(torch.eye(5))
    k2 = rand(2, 4, 5, seed=11)
    torch.testing.assert_close(square(k2, k), dot_score(k2, k))


def score_modules():
    torch.manual_seed(0)
    return [DotScore(), BilinearScore(5, 5), AdditiveScore(5, 5, 4), LocationAwareScore(5, 5, 4, 2, 3)]


@pytest.mark.parametrize("module", score_modules(), ids=["dot", "general", "additive", "location"])
def test_the_score_api_prepares_the_keys_once_and_scores_any_query_against_them(module):
    """``e(q, k) = score(q, prepare(k), previous)`` for every score module, and scoring the
    queries one at a time against keys prepared once (a decoder's steps) equals scoring them
    together; the previous alignment is read only by the location-aware score."""
    module = module.double()
    q, k = rand(2, 4, 5, seed=16), rand(2, 6, 5, seed=17)
    previous = torch.softmax(rand(2, 4, 6, seed=18), dim=-1)
    prepared = module.prepare(k)  # (2, 6, ·)
    together = module.score(q, prepared, previous)  # (2, 4, 6)
    torch.testing.assert_close(together, module(q, k, previous), rtol=0, atol=0)
    steps = [module.score(q[:, i : i + 1], prepared, previous[:, i : i + 1]) for i in range(4)]
    torch.testing.assert_close(torch.cat(steps, dim=1), together, rtol=1e-15, atol=1e-15)
    moved = module.score(q, prepared, torch.softmax(rand(2, 4, 6, seed=19), dim=-1))
    assert torch.equal(moved, together) == (not module.reads_previous)


def test_dot_and_general_scores_are_the_dot_product_against_prepared_keys():
    q, k = rand(2, 4, 5, seed=20), rand(2, 6, 5, seed=21)
    torch.testing.assert_close(DotScore()(q, k), dot_score(q, k), rtol=0, atol=0)
    general = BilinearScore(5, 5).double()
    with torch.no_grad():
        general.weight.copy_(torch.eye(5))
    torch.testing.assert_close(general(q, k), dot_score(q, k))
    with pytest.raises(ValueError, match="k has width 4 but q has width 5"):
        DotScore()(q, k[..., :4])


def test_the_additive_score_is_luongs_concat_score():
    """Luong et al. (2015), eq. 8: ``v_aᵀ tanh(W_a [h_t; h̄_s])`` with ``W_a = [W_q  W_k]``."""
    torch.manual_seed(0)
    score = AdditiveScore(3, 5, 4).double()
    q, k = rand(2, 3, seed=22), rand(6, 5, seed=23)
    w_a = torch.cat([score.w_q.weight, score.w_k.weight], dim=1)  # (4, 3 + 5)
    pairs = torch.cat([q[:, None].expand(2, 6, 3), k[None].expand(2, 6, 5)], dim=-1)  # [h_t; h̄_s]
    expected = torch.tanh(pairs @ w_a.T) @ score.w_v.weight[0]  # (2, 6)
    torch.testing.assert_close(score(q, k), expected, rtol=1e-12, atol=1e-12)


def test_bilinear_init_keeps_unit_variance():
    torch.manual_seed(0)
    score = BilinearScore(64, 32).double()
    q, k = rand(4000, 1, 64, seed=12), rand(4000, 1, 32, seed=13)
    var = score(q, k).detach().var().item()
    assert 0.7 < var < 1.3


@pytest.mark.parametrize("module", [AdditiveScore(3, 5, 4), BilinearScore(3, 5)])
def test_module_gradients_finite(module):
    q = torch.randn(2, 4, 3, requires_grad=True)
    k = torch.randn(2, 6, 5, requires_grad=True)
    torch.softmax(module(q, k), dim=-1).pow(2).sum().backward()
    grads = [q.grad, k.grad, *(p.grad for p in module.parameters())]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_gradcheck_scores():
    q = rand(2, 3, 4, seed=14).requires_grad_()
    k = rand(2, 5, 4, seed=15).requires_grad_()
    for fn in (dot_score, scaled_dot_score, cosine_score):
        assert torch.autograd.gradcheck(fn, (q, k))
    score = AdditiveScore(4, 4, 3).double()
    assert torch.autograd.gradcheck(score, (q, k))


def test_the_additive_scores_hidden_grad_is_autograds():
    """``hidden_grad`` (the backward a model writes itself, the LSTMN's window) against autograd
    in float64: the gradient of the hidden sum (so of ``W_q q``, ``extra``, ``W_k k``) and of ``w_v``."""
    torch.manual_seed(0)
    score = AdditiveScore(3, 5, 4).double()
    q, prepared, extra = rand(2, 3, 3, seed=30), rand(2, 6, 4, seed=31), rand(2, 3, 1, 4, seed=32)
    hidden = score.hidden(q, prepared, extra).requires_grad_()  # (2, 3, 6, 4)
    grad_scores = rand(2, 3, 6, seed=33)
    scores = score.w_v(torch.tanh(hidden)).squeeze(-1)
    expected = torch.autograd.grad(scores, [hidden, score.w_v.weight], grad_scores)
    got = score.hidden_grad(grad_scores, score.features(q, prepared, extra))
    torch.testing.assert_close(scores, score.score(q, prepared, extra=extra), rtol=1e-12, atol=1e-12)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def additive(q, k):
    return AdditiveScore(3, 5, 4).double()(q, k)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: dot_score(rand(2, 3), rand(4, 5)), "k has width 5 but q has width 3"),
        (lambda: scaled_dot_score(rand(3), rand(4, 3)), "q must have at least 2 dimensions"),
        (lambda: cosine_score(rand(2, 3), rand(3)), "k must have at least 2 dimensions"),
        (lambda: dot_score(rand(2, 4, 3), rand(3, 5, 3)), "broadcastable batch dimensions"),
        (lambda: dot_score(torch.ones(2, 3, dtype=torch.long), rand(2, 3)), "q must be a floating"),
        (lambda: additive(rand(1, 2, 4), rand(1, 3, 5)), "q has width 4 but query_dim=3"),
        (lambda: additive(rand(1, 2, 3), rand(1, 3, 3)), "k has width 3 but key_dim=5"),
        (lambda: BilinearScore(3, 5).double()(rand(1, 2, 3), rand(1, 3, 4)), "key_dim=5"),
        (lambda: AdditiveScore(3, 5, 0), "hidden_dim must be > 0"),
        (lambda: BilinearScore(-1, 5), "query_dim must be > 0"),
    ],
)
def test_bad_inputs_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
