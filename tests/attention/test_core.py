"""self_attention and scaled_dot_product_attention (issue 2, items 4-5; Li (Transformer Part I)).

References: float64 numpy recomputations of softmax(XXᵀ)X and softmax(QKᵀ/√d + M)V,
torch.nn.functional.scaled_dot_product_attention, and properties that must hold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlab.attention import causal_mask, kernels, scaled_dot_product_attention, self_attention, to_additive


@pytest.fixture(autouse=True)
def _seed_everything():
    """Unseeded draws (torch.randn without a generator) are reproducible too."""
    torch.manual_seed(0)


sdpa = scaled_dot_product_attention


def np_softmax_rows(s: np.ndarray) -> np.ndarray:
    """float64 softmax over the last axis; rows with no finite entry give zeros."""
    out = np.zeros(s.shape)
    for idx in np.ndindex(*s.shape[:-1]):
        row = s[idx]
        if np.isfinite(row).any():
            e = np.exp(row - row[np.isfinite(row)].max())
            out[idx] = e / e.sum()
    return out


def np_attention(q, k, v, additive=None, scale=None):
    """float64 softmax(Q Kᵀ · scale + M) V."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if additive is not None:
        s = s + additive
    w = np_softmax_rows(s)
    return w @ v, w


def rand_qkv(b=2, h=3, n_q=4, n_k=6, d=5, d_v=7, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n_q, d, generator=g, dtype=dtype)
    k = torch.randn(b, h, n_k, d, generator=g, dtype=dtype)
    v = torch.randn(b, h, n_k, d_v, generator=g, dtype=dtype)
    return q, k, v


def make_mask(kind: str, b: int, h: int, n_q: int, n_k: int, seed: int = 0):
    """Masks of every accepted shape and dtype; some block whole query rows."""
    g = torch.Generator().manual_seed(seed)
    if kind == "none":
        return None
    if kind == "padding":  # (B, 1, 1, n_k)
        m = torch.ones(b, 1, 1, n_k, dtype=torch.bool)
        m[-1, ..., n_k // 2 :] = False
        return m
    if kind == "full_bool":  # (B, H, n_q, n_k) with a fully blocked row
        m = torch.rand(b, h, n_q, n_k, generator=g) > 0.4
        m[0, 0, 0] = False
        return m
    if kind == "2d":  # (B, n_k): key padding, the last sentence's first key blocked too
        m = torch.rand(b, n_k, generator=g) > 0.3
        m[:, -1], m[-1, 0] = True, False
        return m
    if kind == "3d":  # (B, n_q, n_k), a fully blocked row
        m = torch.rand(b, n_q, n_k, generator=g) > 0.3
        m[0, 0] = False
        return m
    if kind == "key_broadcast":  # (B, H, n_q, 1): whole rows on or off
        return torch.rand(b, h, n_q, 1, generator=g) > 0.3
    if kind == "float":  # additive with −inf and a finite bias, a fully blocked row
        allowed = torch.rand(b, 1, n_q, n_k, generator=g) > 0.3
        allowed[-1, 0, -1] = False
        return to_additive(allowed) + 0.5 * torch.randn(b, 1, n_q, n_k, generator=g)
    raise AssertionError(kind)


MASKS = ["none", "padding", "full_bool", "2d", "3d", "key_broadcast", "float"]


def additive_of(mask, is_causal, n_q, n_k):
    """The lecture's M (float64 numpy) for a mask plus the bottom-right causal triangle; a 2-D
    mask is key padding (B, n_k), a 3-D one (B, n_q, n_k) (docs/design.md, "Masks")."""
    m = np.zeros((n_q, n_k))
    if mask is not None:
        mask = {2: lambda t: t[:, None, None, :], 3: lambda t: t[:, None]}.get(mask.dim(), lambda t: t)(mask)
        m = to_additive(mask, torch.float64).numpy() + m
    if is_causal:
        i, j = np.indices((n_q, n_k))
        m = m + np.where(j <= i + n_k - n_q, 0.0, -np.inf)
    return m


# ---------------------------------------------------------------- self_attention


@pytest.mark.parametrize("shape", [(5, 3), (2, 6, 4), (2, 3, 4, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_self_attention_is_softmax_xxt_x(shape, dtype):
    x = torch.randn(*shape, dtype=dtype)
    xn = x.double().numpy()
    expected = np_softmax_rows(xn @ np.swapaxes(xn, -1, -2)) @ xn
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(self_attention(x).double().numpy(), expected, rtol=tol, atol=tol)


def test_self_attention_outputs_are_convex_combinations_of_inputs():
    """Li (Transformer Part I): each output token lies in the convex hull of the inputs (per coordinate)."""
    x = torch.randn(7, 3, dtype=torch.float64)
    y = self_attention(x)
    assert (y <= x.max(0).values + 1e-12).all() and (y >= x.min(0).values - 1e-12).all()


# ---------------------------------------------------------------- both paths vs float64


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("n_q, n_k", [(5, 5), (3, 6), (1, 4)])
@pytest.mark.parametrize("mask_kind", MASKS)
def test_both_paths_match_float64_reference(mask_kind, n_q, n_k, is_causal):
    b, h = 2, 3
    q, k, v = rand_qkv(b, h, n_q, n_k)
    mask = make_mask(mask_kind, b, h, n_q, n_k)
    expected, expected_w = np_attention(q, k, v, additive_of(mask, is_causal, n_q, n_k))
    out_e, w = sdpa(q, k, v, mask, is_causal=is_causal, return_weights=True)
    out_f = sdpa(q, k, v, mask, is_causal=is_causal)
    assert out_e.shape == out_f.shape == (b, h, n_q, 7) and w.shape == (b, h, n_q, n_k)
    np.testing.assert_allclose(out_e.double().numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out_f.double().numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.double().numpy(), expected_w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out_e, out_f, rtol=1e-5, atol=1e-6)  # the two paths agree
    # weights: exactly 0 on blocked keys, rows sum to 1 over allowed keys (0 if none)
    allowed = torch.from_numpy(np.isfinite(additive_of(mask, is_causal, n_q, n_k))).expand_as(w)
    assert (w[~allowed] == 0).all()
    sums, has_key = w.sum(-1), allowed.any(-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert (sums[~has_key] == 0).all() and (out_f[~has_key] == 0).all()


# ---------------------------------------------------------------- the mask contract


def test_a_2d_mask_is_key_padding_equal_to_its_4d_form():
    """docs/design.md, "Masks": with B = n_q = 4 and sentence 0 holding two real tokens, the 2-D
    mask reads as key padding (B, n_k), exactly as its explicit form (B, 1, 1, n_k) does."""
    q, k, v = rand_qkv(4, 2, 4, 4, 8, 8, dtype=torch.float64)
    real = torch.ones(4, 4, dtype=torch.bool)
    real[0, 2:] = False
    expected, _ = np_attention(q, k, v, additive_of(real[:, None, None, :], False, 4, 4))
    for rw in (False, True):
        out = sdpa(q, k, v, real, return_weights=rw)
        explicit = sdpa(q, k, v, real[:, None, None], return_weights=rw)
        torch.testing.assert_close(out, explicit, rtol=0, atol=0)
        np.testing.assert_allclose((out[0] if rw else out).numpy(), expected, rtol=1e-12)


def test_masks_the_contract_cannot_read_are_refused_naming_the_shapes():
    q, k, v = rand_qkv(2, 2, 3, 5, 4, 4)
    with pytest.raises(ValueError, match=r"mask has shape \(3, 5\) but a 2-D mask is a key-padding "
                       r"mask \(B, n_k\) = \(2, 5\)"):
        sdpa(q, k, v, causal_mask(3, 5))  # the lecture's (n_q, n_k) M goes in as M[None, None]
    with pytest.raises(ValueError, match=r"mask must have 2 or 3 or 4 dimensions"):
        sdpa(q, k, v, torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask has shape \(2, 1, 4\) but keys have length 5"):
        sdpa(q, k, v, torch.ones(2, 1, 4, dtype=torch.bool))


@pytest.mark.parametrize(
    "shape_q, shape_k",
    [((6, 4), (9, 4)), ((2, 5, 4), (2, 3, 4)), ((2, 2, 2, 3, 4), (2, 2, 2, 3, 4))],
)
def test_any_number_of_batch_dims_and_custom_scale(shape_q, shape_k):
    q, k = torch.randn(*shape_q, dtype=torch.float64), torch.randn(*shape_k, dtype=torch.float64)
    v = torch.randn(*shape_k[:-1], 3, dtype=torch.float64)
    for scale in (None, 0.3):
        expected, _ = np_attention(q, k, v, scale=scale)
        np.testing.assert_allclose(sdpa(q, k, v, scale=scale).numpy(), expected, rtol=1e-12)
        np.testing.assert_allclose(
            sdpa(q, k, v, scale=scale, return_weights=True)[0].numpy(), expected, rtol=1e-12
        )


def test_fused_path_agrees_with_pytorch_sdpa():
    q, k, v = rand_qkv(2, 4, 8, 8, 16, 16)
    mask = torch.rand(2, 1, 8, 8) > 0.3
    mask[..., 0] = True
    torch.testing.assert_close(sdpa(q, k, v), F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(
        sdpa(q, k, v, is_causal=True), F.scaled_dot_product_attention(q, k, v, is_causal=True)
    )
    torch.testing.assert_close(
        sdpa(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    )


@pytest.mark.parametrize("return_weights", [False, True], ids=["fused", "explicit"])
def test_rectangular_causal_equals_last_rows_of_square_causal(return_weights):
    """Bottom-right alignment: n_q new queries at the end see what they would in the full pass."""
    q, k, v = rand_qkv(2, 2, 7, 7, 4, 4, dtype=torch.float64)
    full = sdpa(q, k, v, is_causal=True)
    for n_q in (1, 3, 7):
        out = sdpa(q[..., -n_q:, :], k, v, is_causal=True, return_weights=return_weights)
        out = out[0] if return_weights else out
        torch.testing.assert_close(out, full[..., -n_q:, :], rtol=1e-12, atol=1e-12)


def test_causal_and_mask_combine_in_fused_path():
    """is_causal together with a mask (fused path builds the triangle itself)."""
    q, k, v = rand_qkv(2, 2, 5, 5, 4, 4, dtype=torch.float64)
    pad = torch.tensor([[True, True, True, False, False]]).expand(2, 5)  # (B, n_k)
    expected, _ = np_attention(q, k, v, additive_of(pad, True, 5, 5))
    np.testing.assert_allclose(sdpa(q, k, v, pad, is_causal=True).numpy(), expected, rtol=1e-12)


def test_dropout_is_applied_to_the_weights_in_both_paths():
    q, k, v = rand_qkv(1, 1, 64, 64, 8, 8)
    plain = sdpa(q, k, v)
    for rw in (False, True):
        torch.manual_seed(0)
        out = sdpa(q, k, v, dropout=0.5, return_weights=rw)
        out = out[0] if rw else out
        assert not torch.allclose(out, plain)
    _, w = sdpa(q, k, v, dropout=0.5, return_weights=True)  # returned weights are pre-dropout
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 1, 64))


# ---------------------------------------------------------------- gradcheck (float64)


@pytest.mark.parametrize("return_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize(
    "mask_kind, is_causal",
    [("none", False), ("none", True), ("full_bool", False), ("float", False), ("padding", True)],
)
def test_sdpa_gradcheck(mask_kind, is_causal, return_weights):
    q, k, v = (t.requires_grad_() for t in rand_qkv(2, 2, 3, 4, 3, 2, dtype=torch.float64, seed=5))
    mask = make_mask(mask_kind, 2, 2, 3, 4, seed=5)
    if mask is not None and mask.is_floating_point():
        mask = mask.double()

    def f(q, k, v):
        out = sdpa(q, k, v, mask, is_causal=is_causal, return_weights=return_weights)
        return out if not return_weights else out[0]

    assert torch.autograd.gradcheck(f, (q, k, v))


# ---------------------------------------------------------------- properties (hypothesis)

shapes = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 6))


@settings(max_examples=25, deadline=None)
@given(
    shape=shapes, p_block=st.floats(0.0, 1.0), as_float=st.booleans(), seed=st.integers(0, 2**16)
)
def test_property_paths_agree_and_blocked_keys_never_matter(shape, p_block, as_float, seed):
    b, h, n_q, n_k = shape
    q, k, v = rand_qkv(b, h, n_q, n_k, 4, 3, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    allowed = torch.rand(b, 1, n_q, n_k, generator=g) >= p_block
    mask = to_additive(allowed) if as_float else allowed
    out_e = sdpa(q, k, v, mask, return_weights=True)[0]
    out_f = sdpa(q, k, v, mask)
    torch.testing.assert_close(out_e, out_f, rtol=1e-5, atol=1e-5)
    # change the keys and values of key j: rows where j is blocked must not move at all
    j = int(torch.randint(n_k, (1,), generator=g))
    k2, v2 = k.clone(), v.clone()
    k2[..., j, :] = 100 * torch.randn(b, h, 4, generator=g)
    v2[..., j, :] = 100 * torch.randn(b, h, 3, generator=g)
    rows = ~allowed[:, :, :, j].expand(b, h, n_q)  # (B, H, n_q): queries that cannot see j
    for rw in (False, True):
        new = sdpa(q, k2, v2, mask, return_weights=rw)
        new = new[0] if rw else new
        torch.testing.assert_close(new[rows], (out_e if rw else out_f)[rows], rtol=1e-6, atol=1e-6)


@pytest.fixture(params=["kernel", "fix"])
def blocked_rows_route(request, monkeypatch):
    """Both routes for fully blocked rows: PyTorch's kernel alone, where the probe found it gives
    zeros (torch 2.13 on the CPU), and attnlab's open-then-zero fix, used everywhere else."""
    if request.param == "fix":
        monkeypatch.setattr(kernels, "kernel_zeroes_blocked_rows", lambda device, dtype: False)
    return request.param


def test_blocked_rows_probe(monkeypatch):
    expected = {dtype: kernels._probe_blocked_rows(dtype) for dtype in (torch.float32, torch.bfloat16)}
    monkeypatch.setattr(kernels, "_ZEROES_BLOCKED_ROWS", {})  # probed afresh, where decoding and
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):  # training call it
        for dtype, answer in expected.items():
            assert kernels.kernel_zeroes_blocked_rows(torch.device("cpu"), dtype) == answer
    assert set(kernels._ZEROES_BLOCKED_ROWS) == {("cpu", dtype) for dtype in expected}  # once each
    assert not kernels.kernel_zeroes_blocked_rows(torch.device("meta"), torch.float32)  # never probed


def test_blocked_rows_probe_is_unseen_by_a_flop_counter(monkeypatch):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = rand_qkv(1, 2, 3, 5, 4, 4)
    mask = torch.tensor([[True, False, True, True, False]])  # (B, n_k)
    monkeypatch.setattr(kernels, "_ZEROES_BLOCKED_ROWS", {})
    totals = []
    for _ in range(2):  # the first call probes, the second reads the answer
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            sdpa(q, k, v, mask)
        totals.append(counter.get_total_flops())
    assert kernels._ZEROES_BLOCKED_ROWS and totals[0] == totals[1] > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes, seed=st.integers(0, 2**16), as_float=st.booleans(), causal=st.booleans())
def test_property_fully_blocked_rows_give_zeros_and_finite_gradients(
    blocked_rows_route, shape, seed, as_float, causal
):
    b, h, n_q, n_k = shape
    causal = causal and n_q <= n_k  # the causal triangle needs n_k >= n_q
    q, k, v = (t.requires_grad_() for t in rand_qkv(b, h, n_q, n_k, 4, 3, seed=seed))
    g = torch.Generator().manual_seed(seed)
    allowed = torch.rand(b, h, n_q, n_k, generator=g) > 0.5
    blocked_row = int(torch.randint(n_q, (1,), generator=g))
    allowed[..., blocked_row, :] = False
    mask = to_additive(allowed) if as_float else allowed
    for rw in (False, True):
        out = sdpa(q, k, v, mask, is_causal=causal, return_weights=rw)
        out = out[0] if rw else out
        assert torch.isfinite(out).all()
        assert (out[..., blocked_row, :] == 0).all()
        grads = torch.autograd.grad((out * torch.randn(out.shape, generator=g)).sum(), (q, k, v))
        assert all(torch.isfinite(gr).all() for gr in grads)
        assert (grads[0][..., blocked_row, :] == 0).all()


def test_causal_mask_helper_and_is_causal_agree():
    q, k, v = rand_qkv(1, 2, 3, 5, 4, 4)
    for rw in (False, True):
        a = sdpa(q, k, v, causal_mask(3, 5)[None, None], return_weights=rw)  # the lecture's M
        b = sdpa(q, k, v, is_causal=True, return_weights=rw)
        torch.testing.assert_close(a[0] if rw else a, b[0] if rw else b)


# ------------------------------------------------ half precision on CPU: the explicit route


@pytest.fixture
def threads():
    """Set torch's threads for one test (the route of a decoding step depends on them)."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n_q, n_k, grad, explicit", [
    (3, 18, True, True), (3, 256, True, True), (3, 300, True, False), (1, 300, True, False),
    (3, 128, False, True), (3, 129, False, False),
])
def test_half_precision_cpu_route_follows_measured_crossover(dtype, n_q, n_k, grad, explicit):
    q, k, v = (t.requires_grad_(grad) for t in rand_qkv(1, 1, n_q, n_k, 8, 8, dtype=dtype))
    assert kernels.explicit_is_faster(q, k) is explicit
    assert not kernels.explicit_is_faster(q.float(), k.float())  # float32 keeps PyTorch's kernel


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("num_threads, n_k, d_h, explicit", [
    (2, 4096, 8, True), (2, 2048, 8, True), (2, 2047, 8, False), (2, 2047, 64, False),
    (1, 512, 64, True), (1, 511, 64, False), (1, 4096, 8, True), (1, 4095, 8, False),
])
def test_a_decoding_steps_route_follows_measured_crossover(threads, dtype, num_threads, n_k, d_h, explicit):
    """One query: from 2,048 scores (rows × heads × keys), or on one thread from scores × d_h =
    32,768; counted over all rows and heads."""
    threads(num_threads)
    q, k = torch.zeros(1, 1, 1, d_h, dtype=dtype), torch.zeros(1, 1, n_k, d_h, dtype=dtype)
    assert kernels.explicit_is_faster(q, k) is explicit
    assert not kernels.explicit_is_faster(q.float(), k.float())  # float32 keeps PyTorch's kernel
    if n_k % 32 == 0:  # the same scores spread over 8 rows × 4 heads: the same route
        q8, k8 = q.expand(8, 4, 1, d_h), k[..., : n_k // 32, :].expand(8, 4, -1, d_h)
        assert kernels.explicit_is_faster(q8, k8) is explicit


@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("n_q, n_k", [(18, 18), (5, 40)])
def test_bf16_training_route_matches_float64_reference_and_gradients(mask_kind, is_causal, n_q, n_k):
    b, h = 2, 3
    q64, k64, v64 = (t.double().requires_grad_() for t in rand_qkv(b, h, n_q, n_k, 16, 16))
    mask = make_mask(mask_kind, b, h, n_q, n_k)
    q, k, v = (t.detach().bfloat16().requires_grad_() for t in (q64, k64, v64))
    out = sdpa(q, k, v, mask, is_causal=is_causal)  # the explicit route (bf16, grads, short)
    additive = additive_of(mask, is_causal, n_q, n_k)
    expected, _ = np_attention(q64.detach(), k64.detach(), v64.detach(), additive)
    np.testing.assert_allclose(out.double().detach().numpy(), expected, rtol=0.05, atol=0.05)
    # gradients against the float64 explicit path
    ref = sdpa(q64, k64, v64, mask.double() if mask is not None and mask.is_floating_point() else mask,
               is_causal=is_causal, return_weights=True)[0]
    g = torch.randn(ref.shape, dtype=torch.float64)
    (ref * g).sum().backward()
    (out * g.bfloat16()).sum().backward()
    for half, full in ((q, q64), (k, k64), (v, v64)):
        assert torch.isfinite(half.grad).all()
        np.testing.assert_allclose(half.grad.double().numpy(), full.grad.numpy(), rtol=0.1, atol=0.1)
