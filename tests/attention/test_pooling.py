"""Attention pooling (López et al. (Attention Mechanisms)): kernels, Nadaraya–Watson, average
pooling, database lookup.

References are independent float64 NumPy recomputations of the deck's formulas, or properties
that must hold (convexity, the softmax identity, exact lookup).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.attention import (
    ParametricAttentionPooling,
    average_pooling,
    boxcar_kernel,
    database_lookup,
    epanechnikov_kernel,
    fit_bandwidth,
    gaussian_kernel,
    leave_one_out_mask,
    nadaraya_watson,
    scaled_dot_product_attention,
)

NP_KERNELS = {
    "gaussian": lambda u: np.exp(-0.5 * u**2),
    "boxcar": lambda u: (np.abs(u) <= 1).astype(np.float64),
    "epanechnikov": lambda u: np.maximum(0.0, 1.0 - np.abs(u)),
}


def np_nadaraya_watson(q, k, v, kernel, h, allowed=None):
    """López et al. (Attention Mechanisms), eqs. 2-3, in NumPy: weights K(|q-k|/h) normalised over
    the allowed keys (0 where none)."""
    q = q[:, None] if q.ndim == 1 else q
    k = k[:, None] if k.ndim == 1 else k
    u = np.linalg.norm(q[:, None, :] - k[None, :, :], axis=-1) / h
    raw = NP_KERNELS[kernel](u)
    if allowed is not None:
        raw = np.where(allowed, raw, 0.0)
    total = raw.sum(-1, keepdims=True)
    w = np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)
    return w @ v, w


def rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).normal(size=shape))


KERNEL_FNS = {
    "gaussian": gaussian_kernel,
    "boxcar": boxcar_kernel,
    "epanechnikov": epanechnikov_kernel,
}


@pytest.mark.parametrize("name", list(KERNEL_FNS))
def test_kernels_match_formulas(name):
    fn = KERNEL_FNS[name]
    u = np.concatenate([np.linspace(-3, 3, 601), [-1.0, 1.0, 0.0, 1 + 1e-12, -1 - 1e-12]])
    got = fn(torch.from_numpy(u)).numpy()
    np.testing.assert_allclose(got, NP_KERNELS[name](u), rtol=1e-15, atol=0)


def test_kernel_shapes_of_seed():
    u = torch.tensor([0.0, 0.5, 1.0, 1.5], dtype=torch.float64)
    assert boxcar_kernel(u).tolist() == [1.0, 1.0, 1.0, 0.0]
    assert epanechnikov_kernel(u).tolist() == [1.0, 0.5, 0.0, 0.0]
    assert gaussian_kernel(u)[0] == 1.0


@pytest.mark.parametrize("kernel", ["gaussian", "boxcar", "epanechnikov"])
@pytest.mark.parametrize("h", [0.3, 1.0, 2.5])
def test_nadaraya_watson_scalar_matches_numpy(kernel, h):
    x = 5 * torch.rand(40, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.sin(x)
    q = torch.linspace(-1, 6, 33, dtype=torch.float64)  # some queries outside the data
    out, w = nadaraya_watson(q, x, y, kernel, h, return_weights=True)
    ref_out, ref_w = np_nadaraya_watson(q.numpy(), x.numpy(), y.numpy(), kernel, h)
    assert out.shape == (33,) and w.shape == (33, 40)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "boxcar", "epanechnikov"])
def test_nadaraya_watson_vectors_matches_numpy(kernel):
    q, k, v = rand(7, 3, seed=1), rand(11, 3, seed=2), rand(11, 4, seed=3)
    out, w = nadaraya_watson(q, k, v, kernel=kernel, bandwidth=2.0, return_weights=True)
    ref_out, ref_w = np_nadaraya_watson(q.numpy(), k.numpy(), v.numpy(), kernel, 2.0)
    assert out.shape == (7, 4)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "boxcar", "epanechnikov"])
def test_weights_are_convex(kernel):
    q, k = rand(20, 2, seed=4), rand(30, 2, seed=5)
    _, w = nadaraya_watson(q, k, rand(30, seed=6), kernel, bandwidth=3.0, return_weights=True)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(20, dtype=torch.float64), rtol=0, atol=1e-12)


def test_gaussian_equals_softmax_attention():
    """Gaussian NW = softmax(−‖q−k‖²/(2h²)) attention (López et al. (Attention Mechanisms) eq. 4)."""
    q, k, v, h = rand(9, 3, seed=7), rand(13, 3, seed=8), rand(13, 2, seed=9), 0.7
    out, w = nadaraya_watson(q, k, v, "gaussian", h, return_weights=True)
    qn, kn = q.numpy(), k.numpy()
    scores = -((qn[:, None, :] - kn[None, :, :]) ** 2).sum(-1) / (2 * h**2)
    ref_w = np.exp(scores - scores.max(-1, keepdims=True))
    ref_w /= ref_w.sum(-1, keepdims=True)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out.numpy(), ref_w @ v.numpy(), rtol=1e-12, atol=1e-15)


def test_gaussian_equals_dot_product_attention_with_key_bias():
    """López et al. (Attention Mechanisms), eq. 5: −½‖q−k‖² = qᵀk − ½‖k‖² − ½‖q‖²; the ‖q‖² term
    cancels in the softmax.

    So Gaussian NW is scaled dot-product attention on q' = [q, 1], k' = [k, −½‖k‖²] with scale 1/h².
    """
    q, k, v, h = rand(6, 3, seed=10), rand(10, 3, seed=11), rand(10, 5, seed=12), 1.3
    ones = torch.ones(q.shape[0], 1, dtype=q.dtype)
    q_aug = torch.cat([q, ones], dim=-1)  # (n_q, d + 1)
    k_aug = torch.cat([k, -0.5 * (k * k).sum(-1, keepdim=True)], dim=-1)  # (n_k, d + 1)
    ref = scaled_dot_product_attention(q_aug[None], k_aug[None], v[None], scale=1 / h**2)[0]
    torch.testing.assert_close(nadaraya_watson(q, k, v, "gaussian", h), ref, rtol=1e-10, atol=1e-12)


def test_gaussian_tiny_bandwidth_does_not_underflow():
    keys = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    values = torch.tensor([10.0, 20.0, 30.0, 40.0], dtype=torch.float64)
    q = torch.tensor([0.9, 2.2, 50.0], dtype=torch.float64)  # far away from every key too
    out = nadaraya_watson(q, keys, values, "gaussian", bandwidth=1e-3)
    assert out.tolist() == [20.0, 30.0, 40.0]


@pytest.mark.parametrize("kernel", ["boxcar", "epanechnikov"])
def test_query_without_support_gives_zeros_not_nan(kernel):
    keys = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    values = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.float64)
    values.requires_grad_()
    q = torch.tensor([1.1, 10.0], dtype=torch.float64, requires_grad=True)
    out, w = nadaraya_watson(q, keys, values, kernel, bandwidth=0.5, return_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert w[1].tolist() == [0.0, 0.0, 0.0] and out[1].tolist() == [0.0, 0.0]
    assert float(w[0].sum().detach()) == pytest.approx(1.0)
    out.sum().backward()
    assert torch.isfinite(values.grad).all()
    assert q.grad is None or torch.isfinite(q.grad).all()  # boxcar is piecewise constant in q


def test_gradcheck_and_learnable_bandwidth():
    q = rand(4, 2, seed=13).requires_grad_()
    k = rand(6, 2, seed=14).requires_grad_()
    v = rand(6, 3, seed=15).requires_grad_()
    h = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    for kernel in ("gaussian", "epanechnikov"):
        assert torch.autograd.gradcheck(
            lambda q, k, v, h, kernel=kernel: nadaraya_watson(q, k, v, kernel, h), (q, k, v, h)
        )
    nadaraya_watson(q, k, v, "gaussian", h).pow(2).sum().backward()
    assert torch.isfinite(h.grad) and h.grad != 0


def test_callable_kernel():
    def cauchy(u):
        return 1.0 / (1.0 + u * u)

    q, k, v = rand(5, seed=16), rand(8, seed=17), rand(8, seed=18)
    _, w = nadaraya_watson(q, k, v, kernel=cauchy, bandwidth=0.5, return_weights=True)
    raw = 1.0 / (1.0 + (np.abs(q.numpy()[:, None] - k.numpy()[None, :]) / 0.5) ** 2)
    np.testing.assert_allclose(w.numpy(), raw / raw.sum(-1, keepdims=True), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 8),
    st.sampled_from(["gaussian", "boxcar", "epanechnikov"]),
    st.floats(0.05, 10.0),
    st.integers(0, 2**16),
)
def test_output_is_convex_combination(n_q, n_k, kernel, h, seed):
    q, k, v = rand(n_q, seed=seed), rand(n_k, seed=seed + 1), rand(n_k, seed=seed + 2)
    out, w = nadaraya_watson(q, k, v, kernel, h, return_weights=True)
    sums = w.sum(-1)
    assert ((sums - 1).abs() < 1e-12).logical_or(sums == 0).all()
    has = sums > 0
    assert (out[has] >= v.min() - 1e-12).all() and (out[has] <= v.max() + 1e-12).all()
    assert (out[~has] == 0).all()


def test_average_pooling():
    q, v = rand(6, 2, seed=19), rand(9, 3, seed=20)
    out, w = average_pooling(q, v, return_weights=True)
    assert w.shape == (6, 9) and torch.all(w == 1 / 9)
    np.testing.assert_allclose(out.numpy(), np.tile(v.numpy().mean(0), (6, 1)), rtol=1e-14)
    assert average_pooling(torch.zeros(4), v[:, 0]).shape == (4,)
    # The h → ∞ limit of every kernel's attention is average pooling.
    for kernel in ("gaussian", "boxcar", "epanechnikov"):
        far = nadaraya_watson(q, rand(9, 2, seed=21), v, kernel, bandwidth=1e8)
        torch.testing.assert_close(far, out, rtol=1e-7, atol=1e-7)


def test_database_lookup_is_exact():
    keys, values = rand(12, 3, seed=22), rand(12, 4, seed=23)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    out, w = database_lookup(keys[perm], keys, values, exact=True, return_weights=True)
    assert torch.equal(out, values[perm])
    assert torch.equal(w, torch.eye(12, dtype=torch.float64)[perm])
    # scalar database
    k1, v1 = torch.arange(5.0), torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0])
    assert database_lookup(torch.tensor([4.0, 0.0]), k1, v1).tolist() == [5.0, 3.0]


def test_database_lookup_nearest_and_limit_of_gaussian():
    keys, values = rand(10, 2, seed=24), rand(10, 3, seed=25)
    q = rand(5, 2, seed=26)
    nearest = np.linalg.norm(q.numpy()[:, None] - keys.numpy()[None], axis=-1).argmin(-1)
    out = database_lookup(q, keys, values)
    assert torch.equal(out, values[torch.from_numpy(nearest)])
    torch.testing.assert_close(nadaraya_watson(q, keys, values, "gaussian", 1e-4), out)
    with pytest.raises(ValueError, match=r"queries\[0\] equals no key"):
        database_lookup(q, keys, values, exact=True)


nw = nadaraya_watson


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda q, k, v: nw(q, k[:, :2], v), "keys have width 2 but queries have width 3"),
        (lambda q, k, v: nw(q[None], k, v), "queries must have 1 or 2 dimensions"),
        (lambda q, k, v: nw(q, k[:, 0], v), "both be scalars"),
        (lambda q, k, v: nw(q, k, v[:4]), "values has length 4 but keys have length 6"),
        (lambda q, k, v: nw(q, k, v[None]), "values must have 1 or 2 dimensions"),
        (lambda q, k, v: nw(q, k, v, bandwidth=0.0), "bandwidth must be > 0, got 0.0"),
        (lambda q, k, v: nw(q, k, v, bandwidth=-1), "bandwidth must be > 0"),
        (lambda q, k, v: nw(q, k, v, kernel="cosine"), "kernel must be one of"),
        (lambda q, k, v: nw(q, k, v, kernel=3), "kernel must be"),
        (lambda q, k, v: nw(q, k, v, kernel=lambda u: -u), "non-negative"),
        (lambda q, k, v: nw(q, k, v, kernel=lambda u: u[0]), "kernel must return"),
        (lambda q, k, v: nw(q.long(), k, v), "queries must be a floating-point"),
        (lambda q, k, v: nw(q, k, v.float()), "share a dtype"),
        (lambda q, k, v: average_pooling(q, v[:0]), "values must hold at least one"),
        (lambda q, k, v: database_lookup(q, k[:, :1], v), "keys have width 1"),
        (lambda q, k, v: nw(q, k, v, mask=torch.ones(5, 6)), "mask must be boolean"),
        (lambda q, k, v: nw(q, k, v, mask=torch.ones(5, 4, dtype=torch.bool)), r"mask has shape \(5, 4\)"),
        (lambda q, k, v: ParametricAttentionPooling("boxcar"), "kernel must be 'gaussian' or 'epanechnikov'"),
        (lambda q, k, v: ParametricAttentionPooling(bandwidth=0.0), "bandwidth must be > 0"),
        (lambda q, k, v: fit_bandwidth(k[:1, 0], v[:1, 0]), "at least 2 pairs"),
        (lambda q, k, v: fit_bandwidth(k[:, 0], v[:, 0], steps=0), "steps must be > 0"),
        (lambda q, k, v: leave_one_out_mask(0), "n must be > 0"),
    ],
)
def test_bad_inputs_raise_value_error(call, match):
    q, k, v = rand(5, 3, seed=27), rand(6, 3, seed=28), rand(6, 2, seed=29)
    with pytest.raises(ValueError, match=match):
        call(q, k, v)


# ------------------------------------------------------------ masks and a learned bandwidth
@pytest.mark.parametrize("kernel", ["gaussian", "boxcar", "epanechnikov"])
def test_mask_blocks_keys_like_numpy(kernel):
    q, k, v = rand(6, 2, seed=30), rand(9, 2, seed=31), rand(9, 3, seed=32)
    allowed = np.random.default_rng(33).random((6, 9)) < 0.6
    allowed[0] = False  # a query with every key blocked
    out, w = nadaraya_watson(q, k, v, kernel, 2.0, return_weights=True, mask=torch.from_numpy(allowed))
    ref_out, ref_w = np_nadaraya_watson(q.numpy(), k.numpy(), v.numpy(), kernel, 2.0, allowed)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-12, atol=1e-14)
    assert (w[torch.from_numpy(~allowed)] == 0).all() and (out[0] == 0).all()


def test_leave_one_out_mask_and_loss():
    mask = leave_one_out_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    assert not mask.diagonal().any() and mask.sum() == 12
    x, y = rand(12, seed=34), rand(12, seed=35)
    model = ParametricAttentionPooling("gaussian", 0.7, dtype=torch.float64)
    allowed = ~np.eye(12, dtype=bool)
    pred, _ = np_nadaraya_watson(x.numpy(), x.numpy(), y.numpy(), "gaussian", 0.7, allowed)
    loss = model.leave_one_out_loss(x, y)
    assert float(loss.detach()) == pytest.approx(np.mean((pred - y.numpy()) ** 2), rel=1e-12)
    loss.backward()
    assert torch.isfinite(model.log_bandwidth.grad) and model.log_bandwidth.grad != 0


def np_leave_one_out_mse(x, y, h, kernel="gaussian"):
    pred, _ = np_nadaraya_watson(x, x, y, kernel, h, ~np.eye(len(x), dtype=bool))
    return np.mean((pred - y) ** 2)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_fit_bandwidth_finds_the_leave_one_out_optimum(kernel):
    """Gradient descent on log h lands where a NumPy grid search of the leave-one-out error does."""
    gen = np.random.default_rng(36)
    x = np.sort(gen.uniform(0, 5, 40))
    y = np.sin(2 * x) + 0.3 * gen.normal(size=40)
    grid = np.geomspace(0.05, 3.0, 2000)
    errors = np.array([np_leave_one_out_mse(x, y, h, kernel) for h in grid])
    best = grid[errors.argmin()]
    model, losses = fit_bandwidth(torch.from_numpy(x), torch.from_numpy(y), kernel=kernel,
                                  bandwidth=1.0, steps=300, lr=0.05)
    h = float(model.bandwidth.detach())
    assert h == pytest.approx(best, rel=0.02), (h, best)
    assert losses[-1] == pytest.approx(errors.min(), rel=1e-3) and losses[-1] < losses[0]
    assert model.log_bandwidth.dtype == torch.float64


def test_parametric_pooling_is_nadaraya_watson_at_its_bandwidth():
    q, k, v = rand(5, seed=37), rand(8, seed=38), rand(8, 2, seed=39)
    model = ParametricAttentionPooling("epanechnikov", 1.5, dtype=torch.float64)
    assert float(model.bandwidth.detach()) == pytest.approx(1.5, rel=1e-15)
    torch.testing.assert_close(model(q, k, v), nadaraya_watson(q, k, v, "epanechnikov", 1.5))
