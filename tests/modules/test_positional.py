"""Positional schemes against the formulas (float64 NumPy) and the properties they must have."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.modules.positional import (
    POSITIONAL_KINDS,
    ALiBi,
    LearnedPositionalEmbedding,
    PositionalScheme,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_slopes,
    relative_position_bucket,
)


def numpy_sinusoids(n: int, d: int, offset: int = 0) -> np.ndarray:
    """Ba (CSC413 Lecture 8): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos /
    10000^(2i/d))."""
    pe = np.zeros((n, d), dtype=np.float64)
    for pos in range(offset, offset + n):
        for j in range(d):
            i2 = j - (j % 2)  # the "2i" shared by columns 2i and 2i+1
            angle = pos / 10000.0 ** (i2 / d)
            pe[pos - offset, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


@pytest.mark.parametrize("d", [16, 7])
def test_sinusoidal_equals_formula(d):
    pe = SinusoidalPositionalEncoding(d, max_len=20)
    np.testing.assert_allclose(pe.table(50).numpy(), numpy_sinusoids(50, d), rtol=0, atol=1e-12)
    out = pe(torch.zeros(2, 30, d))  # longer than max_len: the table grows
    expected = numpy_sinusoids(30, d).astype(np.float32)
    np.testing.assert_allclose(out[0].numpy(), expected, rtol=0, atol=6e-8)
    np.testing.assert_array_equal(out[0].numpy(), out[1].numpy())


def test_sinusoidal_offset_adds_and_is_not_saved():
    pe = SinusoidalPositionalEncoding(8)
    x = torch.randn(2, 3, 8)
    np.testing.assert_allclose(
        (pe(x, offset=600) - x)[1].numpy(), numpy_sinusoids(3, 8, 600), rtol=0, atol=2e-6
    )
    assert pe.state_dict() == {}


def test_learned_positions_add_rows_and_refuse_long_sequences():
    emb = LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(emb(x, offset=7) - x, emb.embedding.weight[7:10].expand(2, 3, 4))
    with pytest.raises(ValueError, match=r"length 11 .*max_len=10"):
        emb(torch.zeros(1, 11, 4))
    with pytest.raises(ValueError, match=r"length 11 .*max_len=10"):
        emb(torch.zeros(1, 2, 4), offset=9)


def numpy_rope(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """RoFormer eq. 34 via complex numbers: pair (x_2i, x_2i+1) times exp(i · m · base^(-2i/d))."""
    d = x.shape[-1]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    theta = base ** (-np.arange(0, d, 2) / d)
    z = z * np.exp(1j * positions[:, None] * theta[None, :])
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def test_rope_equals_complex_rotation():
    rope = RotaryEmbedding(8)
    q = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    got = rope.rotate(q, offset=11).numpy()
    np.testing.assert_allclose(got, numpy_rope(q.numpy(), np.arange(11, 16)), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("m", "n", "t"), [(0, 0, 5), (3, 9, 17), (40, 2, 100), (7, 7, 1)])
def test_rope_scores_depend_only_on_relative_position(m, n, t):
    rope = RotaryEmbedding(16)
    gen = torch.Generator().manual_seed(m * 1000 + n)
    q = torch.randn(1, 1, 1, 16, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 16, generator=gen, dtype=torch.float64)
    score = (rope.rotate(q, m) * rope.rotate(k, n)).sum()
    shifted = (rope.rotate(q, m + t) * rope.rotate(k, n + t)).sum()
    torch.testing.assert_close(score, shifted, rtol=1e-10, atol=1e-10)
    if m != n:  # and it does depend on the relative position
        other = (rope.rotate(q, m) * rope.rotate(k, n + 1)).sum()
        assert abs(float(other - score)) > 1e-6


def test_rope_cache_offsets_match_the_full_sequence():
    rope = RotaryEmbedding(8)
    q, k = torch.randn(2, 2, 10, 8), torch.randn(2, 2, 10, 8)
    full_q, full_k = rope(q, k, 0)
    part_q, part_k = rope(q[:, :, 4:], k[:, :, 4:], 4)
    torch.testing.assert_close(part_q, full_q[:, :, 4:], rtol=0, atol=1e-6)
    torch.testing.assert_close(part_k, full_k[:, :, 4:], rtol=0, atol=1e-6)
    rq, none = rope(q, None, 3)
    assert none is None
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))  # rotations keep lengths


def test_alibi_slopes_match_the_paper():
    # 8 heads: the geometric sequence 2^(-8/8 · k) = 1/2, 1/4, ..., 1/256.
    assert alibi_slopes(8) == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    # 12 heads (not a power of two): the 8-head slopes, then every other slope of the 16-head
    # sequence 2^(-8/16 · k) = 2^(-k/2), k = 1, 3, 5, 7 — the values between the 8-head ones.
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    np.testing.assert_allclose(alibi_slopes(12), expected, rtol=1e-15, atol=0)
    # 6 heads: 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3 from the 8-head sequence.
    np.testing.assert_allclose(alibi_slopes(6), [2.0**-e for e in (2, 4, 6, 8, 1, 3)], rtol=1e-15)
    assert len(alibi_slopes(1)) == 1 and len(alibi_slopes(20)) == 20


def test_alibi_bias_is_slope_times_distance_with_offsets():
    alibi = ALiBi(4)
    bias = alibi(5, 5)  # (H, n_q, n_k)
    slopes = np.array(alibi_slopes(4))
    i, j = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
    expected = -slopes[:, None, None] * np.abs(i - j)[None]
    np.testing.assert_allclose(bias.numpy(), expected, rtol=1e-6, atol=0)
    torch.testing.assert_close(alibi(2, 5), bias[:, 3:])  # the last 2 queries, cache offset 3


def numpy_t5_bucket(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5's bucketing written out per distance (Raffel et al. §2.1, Mesh-TF's rule)."""
    base = 0
    if bidirectional:
        num_buckets //= 2
        base = num_buckets if rel > 0 else 0
        dist = abs(rel)
    else:
        dist = max(-rel, 0)
    exact = num_buckets // 2
    if dist < exact:
        return base + dist
    log_bucket = exact + int(
        math.log(dist / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    )
    return base + min(log_bucket, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_buckets_match_t5_rule(bidirectional):
    rel = torch.arange(-300, 301)
    got = relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=32, max_distance=128
    )
    expected = [numpy_t5_bucket(int(r), bidirectional, 32, 128) for r in rel]
    assert got.tolist() == expected


def test_relative_position_bias_looks_up_buckets_with_offsets():
    rpb = RelativePositionBias(3, num_buckets=8, max_distance=20, bidirectional=False)
    bias = rpb(6, 6)  # (H, n_q, n_k)
    assert bias.shape == (3, 6, 6)
    table = rpb.embedding.weight  # (buckets, H)
    for i in range(6):
        for j in range(6):
            b = numpy_t5_bucket(j - i, False, 8, 20)
            torch.testing.assert_close(bias[:, i, j], table[b])
    torch.testing.assert_close(rpb(1, 6, offset=5), bias[:, 5:6])


@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_scheme_factory_gives_each_kind_its_hook(kind):
    scheme = PositionalScheme(kind, d_model=16, num_heads=4, max_len=32)
    x = torch.randn(2, 5, 16)
    added = kind in ("sinusoidal", "learned")
    assert not torch.equal(scheme.add(x), x) if added else torch.equal(scheme.add(x), x)
    assert (scheme.rotary is not None) == (kind == "rope")
    bias = scheme.bias(5, 5)
    assert (bias is not None) == (kind in ("alibi", "relative"))
    if bias is not None:
        assert bias.shape == (1, 4, 5, 5)


def test_scheme_rejects_unknown_kind_by_name():
    with pytest.raises(ValueError, match=r"positional must be one of .*'rotary'"):
        PositionalScheme("rotary", d_model=16, num_heads=4)


def test_rope_rotates_any_strided_view_like_its_contiguous_copy():
    """The complex product views pairs as complex numbers; views whose strides do not allow
    that (odd strides, odd offsets) are copied first and give the same rotation."""
    rope = RotaryEmbedding(4)
    odd = torch.randn(3, 5, 9)[..., 1:5].unsqueeze(0)  # (1, 3, 5, 4), offset 1, stride 9
    torch.testing.assert_close(rope.rotate(odd, 2), rope.rotate(odd.contiguous(), 2))
    half = odd.bfloat16()
    assert rope.rotate(half).dtype == torch.bfloat16
    torch.testing.assert_close(rope.rotate(half).float(), rope.rotate(half.float()), rtol=0.01, atol=0.01)
