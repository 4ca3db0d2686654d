"""Mask helpers and the masked softmax (issue 2, item 3; Li (Transformer Part I) "Attention Masks").

References: numpy / float64 recomputations of Li's (Transformer Part I) 0 / −∞ matrices, torch.tril, and
PyTorch's own nn.MultiheadAttention for the polarity converters.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlab.attention import (
    causal_mask,
    combine_masks,
    from_key_padding_mask,
    from_torch_attn_mask,
    lengths_to_mask,
    masked_softmax,
    padding_mask,
    to_additive,
)
from attnlab.interop import from_torch


@pytest.fixture(autouse=True)
def _seed_everything():
    """Unseeded draws (torch.randn without a generator) are reproducible too."""
    torch.manual_seed(0)


NEG_INF = float("-inf")


def np_masked_softmax(scores: np.ndarray, additive: np.ndarray) -> np.ndarray:
    """float64 ``softmax(S + M)`` row by row; a row with no finite entry gives zeros."""
    s = np.broadcast_to(scores + additive, np.broadcast_shapes(scores.shape, additive.shape))
    out = np.zeros(s.shape)
    for idx in np.ndindex(*s.shape[:-1]):
        row = s[idx]
        if np.isfinite(row).any():
            e = np.exp(row - row[np.isfinite(row)].max())
            out[idx] = e / e.sum()
    return out


# ---------------------------------------------------------------- causal / lengths / padding


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_causal_mask_square_is_lower_triangle(n):
    mask = causal_mask(n)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    assert torch.equal(mask, torch.tril(torch.ones(n, n)).bool())
    # Li (Transformer Part I): M_ij = 0 for j <= i, -inf for j > i
    i, j = np.indices((n, n))
    assert np.array_equal(to_additive(mask).numpy(), np.where(j <= i, 0.0, -np.inf))


@pytest.mark.parametrize("n_q, n_k", [(1, 1), (1, 6), (3, 7), (4, 4), (0, 3)])
def test_causal_mask_rectangular_is_bottom_right_aligned(n_q, n_k):
    """Queries are the last n_q positions: rows of the square n_k mask, from the bottom."""
    mask = causal_mask(n_q, n_k)
    assert mask.shape == (n_q, n_k)
    assert torch.equal(mask, torch.tril(torch.ones(n_k, n_k)).bool()[n_k - n_q :])
    if n_q:
        assert mask[-1].all()  # the newest query sees every key


def test_causal_mask_small_case_by_hand():
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_causal_mask_device():
    assert causal_mask(3, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("lengths, max_len", [([3, 1, 0, 4], None), ([2, 2], 5), ([], 3), ([0], 0)])
def test_lengths_to_mask(lengths, max_len):
    mask = lengths_to_mask(torch.tensor(lengths, dtype=torch.long), max_len)
    n = max(lengths, default=0) if max_len is None else max_len
    expected = [[j < length for j in range(n)] for length in lengths]
    assert mask.dtype == torch.bool and mask.shape == (len(lengths), n)
    assert mask.tolist() == expected


def test_padding_mask_from_token_ids_and_from_bool():
    ids = torch.tensor([[5, 7, 0, 0], [1, 0, 2, 0]])
    mask = padding_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, False, True, False]]
    real = torch.tensor([[True, False, True]])
    assert torch.equal(padding_mask(real), real[:, None, None, :])


def test_padding_mask_equals_seed_000_pad_matrix():
    """M^pad = 1 pᵀ · (−∞): every query row blocks the padded keys."""
    ids = torch.tensor([[3, 4, 9, 9, 9]])
    p = (ids == 9).numpy()[0].astype(float)  # padding indicator
    m_pad = np.where(np.outer(np.ones(5), p) == 1, -np.inf, 0.0)
    full = to_additive(padding_mask(ids, 9)).expand(1, 1, 5, 5)
    assert np.array_equal(full[0, 0].numpy(), m_pad)


# ---------------------------------------------------------------- combining


def test_combine_bool_masks_is_logical_and_with_broadcasting():
    g = torch.Generator().manual_seed(0)
    pad = torch.rand(3, 1, 1, 6, generator=g) > 0.3
    other = torch.rand(2, 6, 6, generator=g) > 0.3
    causal = causal_mask(6)
    got = combine_masks(pad, None, causal, other[:1])
    expected = np.logical_and(np.logical_and(pad.numpy(), causal.numpy()), other[:1].numpy())
    assert got.dtype == torch.bool and np.array_equal(got.numpy(), expected)


def test_combine_bool_and_float_is_sum_of_additive_masks():
    """Li (Transformer Part I): softmax(S + M^causal + M^pad) — bool masks become 0/−∞ and add
    to float ones."""
    bias = torch.randn(4, 4, dtype=torch.float64)  # a finite additive mask (e.g. a position bias)
    pad = torch.tensor([True, True, True, False])[None, None, None, :]  # (1, 1, 1, 4)
    got = combine_masks(causal_mask(4), bias, pad)
    i, j = np.indices((4, 4))
    m_causal = np.where(j <= i, 0.0, -np.inf)
    m_pad = np.where(j == 3, -np.inf, 0.0)
    assert got.dtype == torch.float64 and got.shape == (1, 1, 4, 4)
    assert np.array_equal(got[0, 0].numpy(), m_causal + bias.numpy() + m_pad)


def test_combine_masks_edge_cases():
    assert combine_masks() is None and combine_masks(None, None) is None
    m = torch.tensor([True, False])
    assert combine_masks(None, m) is m
    f = torch.tensor([0.0, -1.0])
    assert torch.equal(combine_masks(f, f), torch.tensor([0.0, -2.0]))


def test_to_additive():
    m = torch.tensor([[True, False], [False, True]])
    assert to_additive(m).tolist() == [[0.0, NEG_INF], [NEG_INF, 0.0]]
    assert to_additive(m, torch.float64).dtype == torch.float64
    f = torch.tensor([0.5, NEG_INF])
    assert torch.equal(to_additive(f, torch.float64), f.double())


# ---------------------------------------------------------------- PyTorch polarity


def test_converters_flip_boolean_polarity_and_keep_float():
    kpm = torch.tensor([[False, True, True], [False, False, False]])  # PyTorch: True = padding
    ours = from_key_padding_mask(kpm)
    assert ours.shape == (2, 1, 1, 3)
    assert ours[:, 0, 0].tolist() == [[True, False, False], [True, True, True]]
    attn = torch.tensor([[False, True], [False, False]])  # PyTorch: True = blocked
    assert from_torch_attn_mask(attn).tolist() == [[True, False], [True, True]]
    assert torch.equal(from_torch_attn_mask(from_torch_attn_mask(attn)), attn)  # an involution
    fk = torch.tensor([[0.0, NEG_INF]])
    assert torch.equal(from_key_padding_mask(fk), fk[:, None, None, :])
    fa = torch.tensor([[0.0, -2.0], [NEG_INF, 0.0]])
    assert torch.equal(from_torch_attn_mask(fa), fa)


def _torch_and_ours(seed: int = 0):
    torch.manual_seed(seed)
    torch_mha = nn.MultiheadAttention(12, 3, batch_first=True).eval()
    with torch.no_grad():
        for p in torch_mha.parameters():
            p.normal_(0.0, 0.5)
    return torch_mha, from_torch(torch_mha)


def test_key_padding_converter_both_ways_against_torch_mha():
    torch_mha, ours = _torch_and_ours()
    ids = torch.tensor([[4, 8, 2, 0, 0], [7, 1, 1, 3, 0], [5, 6, 2, 9, 1]])
    x = torch.randn(3, 5, 12)
    torch_pad = ids == 0  # built in PyTorch's polarity, independently of attnlab
    with torch.no_grad():
        ref = torch_mha(x, x, x, key_padding_mask=torch_pad, need_weights=False)[0]
        # PyTorch → attnlab
        got = ours(x, mask=from_key_padding_mask(torch_pad))
        # attnlab → PyTorch: our (B, 1, 1, n) True = real mask, flipped back for PyTorch
        ours_mask = padding_mask(ids, pad_id=0)
        back = torch_mha(x, x, x, key_padding_mask=~ours_mask[:, 0, 0], need_weights=False)[0]
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours(x, mask=ours_mask), back, rtol=1e-5, atol=1e-6)
    assert torch.equal(from_key_padding_mask(~ours_mask[:, 0, 0]), ours_mask)


def test_attn_mask_converter_both_ways_against_torch_mha():
    torch_mha, ours = _torch_and_ours(1)
    x = torch.randn(2, 6, 12)
    torch_causal = nn.Transformer.generate_square_subsequent_mask(6)  # PyTorch's float 0/-inf
    torch_bool = torch.ones(6, 6, dtype=torch.bool).triu(1)  # PyTorch's bool, True = blocked
    with torch.no_grad():
        ref = torch_mha(x, x, x, attn_mask=torch_causal, need_weights=False)[0]
        for got in (  # PyTorch's (n_q, n_k) is (1, 1, n_q, n_k) here: a 2-D mask is key padding
            ours(x, mask=from_torch_attn_mask(torch_bool)[None, None]),
            ours(x, mask=from_torch_attn_mask(torch_causal)[None, None]),
            ours(x, is_causal=True),
        ):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
        # attnlab → PyTorch: our causal mask flipped (the converter is its own inverse)
        back = torch_mha(
            x, x, x, attn_mask=from_torch_attn_mask(causal_mask(6)), need_weights=False
        )[0]
    torch.testing.assert_close(back, ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- masked softmax


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masked_softmax_matches_float64_reference(kind):
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 4, 6, generator=g, dtype=torch.float64) * 3
    allowed = torch.rand(2, 1, 4, 6, generator=g) > 0.4
    allowed[0, 0, 2] = False  # one fully blocked query row
    bias = torch.randn(2, 1, 4, 6, generator=g, dtype=torch.float64)
    mask = allowed if kind == "bool" else to_additive(allowed, torch.float64) + bias
    additive = to_additive(allowed, torch.float64).numpy() + (0 if kind == "bool" else bias.numpy())
    weights = masked_softmax(scores, mask)
    np.testing.assert_allclose(
        weights.numpy(), np_masked_softmax(scores.numpy(), additive), rtol=1e-12, atol=1e-15
    )
    full = allowed.expand_as(weights)
    assert (weights[~full] == 0).all()  # exactly 0 on blocked keys
    row_sums = weights.sum(-1)
    has_key = full.any(-1)
    torch.testing.assert_close(row_sums[has_key], torch.ones_like(row_sums[has_key]))
    assert (row_sums[~has_key] == 0).all() and (~has_key).any()


def test_masked_softmax_without_mask_and_along_other_dims():
    s = torch.randn(3, 5)
    torch.testing.assert_close(masked_softmax(s), torch.softmax(s, -1))
    m = torch.rand(3, 5) > 0.3
    torch.testing.assert_close(masked_softmax(s, m, dim=0), masked_softmax(s.T, m.T).T)


def test_masked_softmax_is_stable_for_huge_scores():
    s = torch.tensor([[1e4, 1e4 - 1.0, -1e4]])
    w = masked_softmax(s, torch.tensor([[True, True, False]]))
    assert torch.isfinite(w).all()
    torch.testing.assert_close(
        w,
        torch.tensor(
            [[1 / (1 + np.exp(-1.0)), np.exp(-1.0) / (1 + np.exp(-1.0)), 0.0]], dtype=torch.float32
        ),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_fully_blocked_rows_are_zero_in_every_dtype(dtype):
    s = torch.randn(2, 4, 4).to(dtype).requires_grad_()
    m = torch.tensor([True, True, False, False])[:, None].expand(4, 4)  # rows 2, 3 fully blocked
    w = masked_softmax(s, m)
    assert torch.isfinite(w).all() and (w[:, 2:] == 0).all()
    w.sum().backward()
    assert torch.isfinite(s.grad).all()


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masked_softmax_gradcheck(kind):
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(2, 3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    allowed = torch.rand(2, 3, 5, generator=g) > 0.4
    allowed[0, 1] = False  # a fully blocked row
    allowed[1, :, 0] = True
    mask = allowed if kind == "bool" else to_additive(allowed, torch.float64) + 0.5
    assert torch.autograd.gradcheck(lambda s: masked_softmax(s, mask), (scores,))
    assert torch.autograd.gradgradcheck(lambda s: masked_softmax(s, mask), (scores,))


def test_masked_softmax_gradcheck_through_a_finite_float_mask():
    """A learned additive bias (e.g. a relative position bias) gets gradients through the mask."""
    g = torch.Generator().manual_seed(2)
    scores = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(masked_softmax, (scores, bias))


@settings(max_examples=25, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6)),
    p_block=st.floats(0.0, 1.0),
    as_float=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_masked_softmax_property_no_nan_rows_sum_to_one_or_zero(shape, p_block, as_float, seed):
    g = torch.Generator().manual_seed(seed)
    scores = (torch.randn(*shape, generator=g) * 10).requires_grad_()
    allowed = torch.rand(*shape, generator=g) >= p_block
    mask = to_additive(allowed) if as_float else allowed
    w = masked_softmax(scores, mask)
    assert torch.isfinite(w).all()
    assert (w[~allowed] == 0).all()
    sums = w.sum(-1)
    has_key = allowed.any(-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert (sums[~has_key] == 0).all()
    (w * torch.randn(*shape, generator=g)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[~allowed] == 0).all()
