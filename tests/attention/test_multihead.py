"""MultiHeadAttention and its KV cache (issue 2, item 6; Li (Transformer Part I) "Multi-head Attention").

References: a float64 head-by-head recomputation of [H_1, …, H_H] W_o from the module's
parameters, full (uncached) recomputation for the cache, and properties that must hold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlab.attention import KVCache, MultiHeadAttention, to_additive


@pytest.fixture(autouse=True)
def _seed_everything():
    """Unseeded draws (torch.randn without a generator) are reproducible too."""
    torch.manual_seed(0)


TOL = 1e-5


def make_mha(d=16, h=4, *, seed=0, **kw) -> MultiHeadAttention:
    """A module with every parameter random (biases included) in eval mode."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d, h, **kw)
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_(0.0, 0.5)
    return mha.eval()


def projections(mha: MultiHeadAttention):
    """float64 numpy (W, b) for q, k, v and out, whatever the parameter layout."""

    def wb(lin_w, lin_b):
        w = lin_w.detach().double().numpy()
        return w, (np.zeros(w.shape[0]) if lin_b is None else lin_b.detach().double().numpy())

    d = mha.d_model
    if mha.packed:
        w, b = wb(mha.in_proj.weight, mha.in_proj.bias)
        qkv = [(w[i * d : (i + 1) * d], b[i * d : (i + 1) * d]) for i in range(3)]
    else:
        qkv = [wb(p.weight, p.bias) for p in (mha.q_proj, mha.k_proj, mha.v_proj)]
    return (*qkv, wb(mha.out_proj.weight, mha.out_proj.bias))


def reference_mha(mha, x, memory=None, value=None, additive=None):
    """Li (Transformer Part I): H_h = softmax(Q_h K_hᵀ/√d_h + M) V_h; Y = [H_1, …, H_H] W_o.
    float64, per head."""
    x = x.double().numpy()
    memory = x if memory is None else memory.double().numpy()
    value = memory if value is None else value.double().numpy()
    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = projections(mha)
    q, k, v = x @ wq.T + bq, memory @ wk.T + bk, value @ wv.T + bv  # (B, n, d)
    n_q, n_k, dh = q.shape[1], k.shape[1], mha.head_dim
    m = (
        np.zeros((1, mha.num_heads, n_q, n_k))
        if additive is None
        else np.broadcast_to(additive, (q.shape[0], mha.num_heads, n_q, n_k))
    )
    heads, weights = [], []
    for h in range(mha.num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        s = q[..., sl] @ k[..., sl].transpose(0, 2, 1) / math.sqrt(dh) + m[:, h]  # (B, n_q, n_k)
        finite = np.isfinite(s).any(-1, keepdims=True)
        e = np.exp(
            s - np.where(finite, np.max(np.where(np.isfinite(s), s, -1e300), -1, keepdims=True), 0)
        )
        w = np.where(finite, e / np.where(finite, e.sum(-1, keepdims=True), 1), 0.0)
        heads.append(w @ v[..., sl])
        weights.append(w)
    return np.concatenate(heads, -1) @ wo.T + bo, np.stack(weights, 1)


def causal_additive(n_q, n_k):
    i, j = np.indices((n_q, n_k))
    return np.where(j <= i + n_k - n_q, 0.0, -np.inf)


def pad_mask(lengths, n):
    """(B, 1, 1, n) True = real, built without attnlab."""
    return (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


def assert_close(got, expected, tol=TOL):
    expected = torch.as_tensor(np.asarray(expected), dtype=torch.float64)
    got = got.detach().double()
    assert got.shape == expected.shape
    err = float((got - expected).norm() / expected.norm().clamp_min(1e-30))
    assert err <= tol, err


# ---------------------------------------------------------------- against the formula


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "float"])
@pytest.mark.parametrize("mode", ["self", "cross", "cross_kdim", "cross_value"])
def test_matches_per_head_float64_reference(mode, masking, bias):
    b, n_q, d, h = 3, 5, 12, 3
    n_k = n_q if mode == "self" else 7
    kdim, vdim = {"cross_kdim": (6, 6), "cross_value": (6, 4)}.get(mode, (None, None))
    mha = make_mha(d, h, kdim=kdim, vdim=vdim, bias=bias)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(b, n_q, d, generator=g)
    memory = None if mode == "self" else torch.randn(b, n_k, kdim or d, generator=g)
    value = torch.randn(b, n_k, vdim, generator=g) if mode == "cross_value" else None
    mask, is_causal, additive = None, False, None
    if masking == "padding":
        mask = pad_mask([n_k, 2, 1], n_k)
    elif masking == "causal":
        is_causal, additive = True, causal_additive(n_q, n_k)
    elif masking == "float":
        mask = to_additive(pad_mask([n_k, 3, 2], n_k)) + torch.randn(b, h, n_q, n_k, generator=g)
    if mask is not None:
        additive = to_additive(mask, torch.float64).numpy()
    expected, expected_w = reference_mha(mha, x, memory, value, additive)
    kw = {"value": value, "mask": mask, "is_causal": is_causal}
    out_f = mha(x, memory, **kw)
    out_e, w = mha(x, memory, **kw, return_weights=True)
    assert w.shape == (b, h, n_q, n_k)
    assert_close(out_f, expected)
    assert_close(out_e, expected)
    assert_close(w, expected_w)


def test_weights_per_head_are_distributions_and_zero_on_blocked_keys():
    mha = make_mha(8, 2)
    x = torch.randn(2, 6, 8)
    mask = pad_mask([6, 4], 6)
    _, w = mha(x, mask=mask, is_causal=True, return_weights=True)
    allowed = mask & torch.ones(6, 6, dtype=torch.bool).tril()
    assert (w[~allowed.expand_as(w)] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 6))


# ---------------------------------------------------------------- properties (hypothesis)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 8),
    heads=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
    explicit=st.booleans(),
)
def test_property_causality(n, heads, seed, explicit):
    """With is_causal, changing token j never changes the outputs at positions i < j."""
    mha = make_mha(8, heads, seed=seed % 7)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, n, 8, generator=g)
    j = int(torch.randint(1, n, (1,), generator=g))
    x2 = x.clone()
    x2[:, j:] = torch.randn(2, n - j, 8, generator=g) * 10

    def run(t):
        out = mha(t, is_causal=True, return_weights=explicit)
        return out[0] if explicit else out

    torch.testing.assert_close(run(x2)[:, :j], run(x)[:, :j], rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    n_k=st.integers(2, 8), seed=st.integers(0, 2**16), explicit=st.booleans(), cross=st.booleans()
)
def test_property_blocked_keys_never_change_the_output(n_k, seed, explicit, cross):
    mha = make_mha(8, 2, seed=seed % 5)
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, n_k + 1, (3,), generator=g)
    mask = (torch.arange(n_k)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, n_k)
    x = torch.randn(3, n_k, 8, generator=g)
    memory = torch.randn(3, n_k, 8, generator=g) if cross else None
    changed = (x if memory is None else memory).clone()
    blocked = ~mask[:, 0, 0]  # (B, n_k)
    changed[blocked] = torch.randn(int(blocked.sum()), 8, generator=g) * 10

    def run(xx, mem):
        out = mha(xx, mem, mask=mask, return_weights=explicit)
        return out[0] if explicit else out

    before = run(x, memory)
    after = run(x, changed) if cross else run(changed, None)
    keep = torch.ones_like(blocked) if cross else ~blocked  # self: a changed query row may move
    torch.testing.assert_close(after[keep], before[keep], rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_property_permuting_tokens_permutes_outputs(n, seed):
    """Without positions, self-attention is permutation equivariant (Steinert-Threlkeld
    (Transformers I): why positional encodings exist)."""
    mha = make_mha(8, 2, seed=seed % 5)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, n, 8, generator=g)
    perm = torch.randperm(n, generator=g)
    out, w = mha(x, return_weights=True)
    out_p, w_p = mha(x[:, perm], return_weights=True)
    torch.testing.assert_close(out_p, out[:, perm], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mha(x[:, perm]), out[:, perm], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w_p, w[:, :, perm][:, :, :, perm], rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    n_q=st.integers(1, 6),
    n_k=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    explicit=st.booleans(),
    as_float=st.booleans(),
)
def test_property_fully_blocked_rows_give_zero_attention_and_finite_gradients(
    n_q, n_k, seed, explicit, as_float
):
    mha = make_mha(8, 2, seed=seed % 5)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, n_q, 8, generator=g, requires_grad=True)
    memory = torch.randn(2, n_k, 8, generator=g, requires_grad=True)
    allowed = torch.rand(2, 2, n_q, n_k, generator=g) > 0.5
    row = int(torch.randint(n_q, (1,), generator=g))
    allowed[:, :, row] = False
    mask = to_additive(allowed) if as_float else allowed
    out = mha(x, memory, mask=mask, return_weights=explicit)
    out = out[0] if explicit else out
    # every head's attention is zero there, so the output is out_proj's bias
    torch.testing.assert_close(out[:, row], mha.out_proj.bias.expand(2, 8))
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(memory.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


# ---------------------------------------------------------------- KV cache


class ToyRotary(nn.Module):
    """RoPE (Su et al. 2021) written independently here, to test the cache's position offset."""

    def forward(self, q, k, offset):
        return self.rotate(q, offset), self.rotate(k, offset)

    @staticmethod
    def rotate(t, offset):
        n, dh = t.shape[-2], t.shape[-1]
        pos = torch.arange(offset, offset + n, dtype=t.dtype)[:, None]
        theta = pos * 10000.0 ** (-torch.arange(0, dh, 2, dtype=t.dtype) / dh)  # (n, d_h/2)
        cos, sin = theta.cos(), theta.sin()
        t1, t2 = t[..., 0::2], t[..., 1::2]
        return torch.stack([t1 * cos - t2 * sin, t1 * sin + t2 * cos], -1).flatten(-2)


def decode(mha, x, chunks, *, mask=None, explicit=False):
    """Feed ``x`` through a self-attention cache in chunks; concatenate the outputs."""
    cache, outs, weights, start = KVCache(), [], [], 0
    for size in chunks:
        step_mask = None if mask is None else mask[..., : start + size]
        out = mha(
            x[:, start : start + size],
            mask=step_mask,
            is_causal=True,
            cache=cache,
            return_weights=explicit,
        )
        if explicit:
            out, w = out
            weights.append(w)
        outs.append(out)
        start += size
        assert len(cache) == start
    return torch.cat(outs, 1), weights


@pytest.mark.parametrize("rotary", [False, True], ids=["plain", "rotary"])
@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 2, 1], [7], [2, 5]], ids=str)
@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
def test_cached_decoding_equals_full_causal_recomputation(chunks, explicit, rotary):
    mha = make_mha(16, 4, rotary=ToyRotary() if rotary else None)
    x = torch.randn(2, 7, 16)
    mask = pad_mask([7, 7], 7)  # no padding, but exercises slicing the mask per step
    full, full_w = mha(x, mask=mask, is_causal=True, return_weights=True)
    got, weights = decode(mha, x, chunks, mask=mask, explicit=explicit)
    assert (got - full).abs().max() <= TOL * full.abs().max()
    start = 0
    for w in weights:  # each step's weights are rows of the full causal weights
        n_q = w.shape[-2]
        torch.testing.assert_close(
            w, full_w[:, :, start : start + n_q, : start + n_q], rtol=1e-5, atol=1e-6
        )
        start += n_q


def test_cached_decoding_with_left_padding_mask():
    mha = make_mha(8, 2)
    x = torch.randn(2, 6, 8)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., :2] = False  # the second sequence is left-padded by two tokens
    full = mha(x, mask=mask, is_causal=True)
    got, _ = decode(mha, x, [2, 1, 1, 2], mask=mask)
    torch.testing.assert_close(got[1, 2:], full[1, 2:], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[0], full[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kdim", [None, 6])
def test_static_cross_attention_cache_equals_recomputation(kdim):
    mha = make_mha(8, 2, kdim=kdim, vdim=kdim)
    x = torch.randn(2, 5, 8)
    memory = torch.randn(2, 9, kdim or 8)
    mask = pad_mask([9, 4], 9)
    full = mha(x, memory, mask=mask)
    cache = KVCache()
    outs = [mha(x[:, t : t + 1], memory, mask=mask, cache=cache) for t in range(5)]
    assert cache.static and len(cache) == 9
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=1e-5, atol=1e-6)
    # the static cache is what is used: keys/values are not recomputed from memory
    k_before = cache.k
    mha(x[:, :1], torch.zeros_like(memory), mask=mask, cache=cache)
    assert cache.k is k_before


def test_kv_cache_reorder_matches_recomputation_on_reordered_prefixes():
    """Beam search: after reorder(index) the caches hold the chosen hypotheses' prefixes."""
    self_attn, cross_attn = make_mha(8, 2, seed=1), make_mha(8, 2, seed=2)
    x = torch.randn(3, 6, 8)
    memory = torch.randn(3, 4, 8)
    self_cache, cross_cache = KVCache(), KVCache()

    def step(tokens, mem):
        h = self_attn(tokens, is_causal=True, cache=self_cache)
        return cross_attn(h, mem, cache=cross_cache)

    step(x[:, :4], memory)
    index = torch.tensor([2, 0, 0])
    self_cache.reorder(index)
    cross_cache.reorder(index)
    got = step(x[:, 4:], memory[index])
    prefix = torch.cat([x[index, :4], x[:, 4:]], 1)  # the hypotheses that survived
    expected = cross_attn(self_attn(prefix, is_causal=True), memory[index])[:, 4:]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert len(self_cache) == 6 and self_cache.k.shape[0] == 3


def test_kv_cache_basics():
    cache = KVCache()
    assert len(cache) == 0
    cache.reorder(torch.tensor([0]))  # a no-op on an empty cache
    k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4)
    cache.append(k, v)
    k_all, v_all = cache.append(k[..., :1, :], v[..., :1, :])
    assert len(cache) == 4 and torch.equal(k_all[..., 3, :], k[..., 0, :])


# ---------------------------------------------------------------- training behaviour


def test_attention_dropout_only_in_training():
    mha = make_mha(8, 2, dropout=0.5)
    x = torch.randn(2, 16, 8)
    plain = make_mha(8, 2)  # same seed, same weights, no dropout
    torch.testing.assert_close(mha(x), plain(x))
    mha.train()
    torch.manual_seed(0)
    assert not torch.allclose(mha(x), plain(x))


def test_gradients_reach_every_parameter():
    for kw in ({}, {"kdim": 6, "vdim": 5}):
        mha = make_mha(8, 2, **kw)
        x = torch.randn(2, 3, 8)
        mem = None if not kw else torch.randn(2, 4, 6)
        value = None if not kw else torch.randn(2, 4, 5)
        mha(x, mem, value=value).pow(2).sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in mha.parameters())


def test_autocast_mixed_precision_is_accepted():
    """The dtype checks step aside under autocast, which mixes dtypes on purpose."""
    mha = make_mha(8, 2)
    x = torch.randn(2, 5, 8)
    expected = mha(x, is_causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for inp in (x, x.bfloat16()):
            out = mha(inp, is_causal=True)
            assert out.dtype == torch.bfloat16
            torch.testing.assert_close(out.float(), expected, rtol=0.05, atol=0.05)


# ---------------------------------------------------------------- the mask contract


def test_a_2d_mask_is_key_padding_even_when_batch_equals_queries():
    """The issue's case, tried as a new user would: B = n_q = 4, sentence 0 has two real tokens.
    The 2-D mask is key padding (docs/design.md, "Masks"), equal to its 4-D form; it was read
    as (n_q, n_k) once and differed by 0.36."""
    mha = make_mha(8, 2)
    x = torch.randn(4, 4, 8)
    real = torch.ones(4, 4, dtype=torch.bool)
    real[0, 2:] = False
    for rw in (False, True):
        got = mha(x, mask=real, return_weights=rw)
        torch.testing.assert_close(got, mha(x, mask=real[:, None, None], return_weights=rw), rtol=0, atol=0)
    alone = mha(x[:1, :2])  # sentence 0's two real tokens on their own: what padding must give
    torch.testing.assert_close(mha(x, mask=real)[:1, :2], alone, rtol=1e-5, atol=1e-6)
    memory = torch.randn(4, 6, 8)
    src_real = torch.ones(4, 6, dtype=torch.bool)
    src_real[1, 3:] = False
    torch.testing.assert_close(mha(x, memory, mask=src_real), mha(x, memory, mask=src_real[:, None, None, :]),
                               rtol=0, atol=0)


def test_a_2d_mask_that_is_not_key_padding_is_refused_naming_both_shapes():
    mha = make_mha(8, 2)
    with pytest.raises(ValueError, match=r"mask has shape \(5, 5\) but a 2-D mask is a key-padding "
                       r"mask \(B, n_k\) = \(2, 5\)"):
        mha(torch.randn(2, 5, 8), mask=torch.ones(5, 5, dtype=torch.bool).tril())

