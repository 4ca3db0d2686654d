"""The attention map's records (``explorer/quantize.py``): what the page decodes is the float
weights within half a quantization step, and a causal record holds the whole lower triangle and
nothing else — properties over random softmax rows, and a float64 recomputation of the
thumbnails."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.explorer.quantize import LEVELS, dequantize, quantize_heads, record_size, thumbnails


def attention(layers: int, heads: int, n: int, causal: bool, seed: int, sharpness: float) -> torch.Tensor:
    """Softmax rows of random scores, masked above the diagonal when ``causal`` (as a GPT's)."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(layers, heads, n, n, generator=generator) * sharpness
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), layers=st.integers(1, 3), heads=st.integers(1, 3), causal=st.booleans(),
       seed=st.integers(0, 2**31 - 1), sharpness=st.floats(0.0, 12.0))
def test_a_record_decodes_to_the_weights_within_half_a_step(n, layers, heads, causal, seed, sharpness):
    weights = attention(layers, heads, n, causal, seed, sharpness)
    records = quantize_heads(weights, causal)
    assert len(records) == layers * heads
    for index, record in enumerate(records):
        assert len(record) == record_size(n, causal)
        layer, head = divmod(index, heads)  # layer-major
        exact = weights[layer, head].double()
        decoded = dequantize(record, n, causal).double()
        step = exact.amax(dim=-1, keepdim=True) / LEVELS  # each row's own step
        assert ((decoded - exact).abs() <= step / 2 + 1e-7).all()
        assert torch.allclose(decoded.amax(dim=-1), exact.amax(dim=-1), atol=1e-7)  # maxima: float32


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 64), seed=st.integers(0, 2**31 - 1))
def test_a_causal_record_holds_every_weight_of_the_lower_triangle(n, seed):
    """Row i carries columns 0..i: n(n+1)/2 levels after the n maxima, every one of them read
    back where it belongs (a matrix of distinct weights, rebuilt exactly)."""
    weights = attention(1, 1, n, True, seed, 3.0)
    (record,) = quantize_heads(weights, causal=True)
    assert len(record) == 4 * n + n * (n + 1) // 2
    levels = np.frombuffer(record[4 * n:], dtype=np.uint8)
    maxima = weights[0, 0].amax(dim=-1)
    expected = torch.cat([(weights[0, 0, i, :i + 1] / maxima[i] * LEVELS).round() for i in range(n)])
    assert torch.equal(torch.from_numpy(levels.astype(np.float32)), expected)
    decoded = dequantize(record, n, causal=True)
    assert torch.equal(decoded.triu(1), torch.zeros(n, n))
    assert torch.allclose(decoded.sum(dim=-1), torch.ones(n), atol=n * 0.5 / LEVELS)


def test_a_weight_above_the_diagonal_is_refused_in_a_causal_record():
    weights = attention(1, 2, 5, causal=False, seed=0, sharpness=1.0)
    with pytest.raises(ValueError, match="a weight above the diagonal is not 0"):
        quantize_heads(weights, causal=True)
    with pytest.raises(ValueError, match=r"must be \(layers, heads, n, n\), got \(2, 5, 5\)"):
        quantize_heads(weights[0], causal=False)
    with pytest.raises(ValueError, match="a record of 5 tokens has 35 bytes, got 34"):
        dequantize(bytes(34), 5, causal=True)


def test_record_sizes_at_the_cap():
    assert record_size(512, causal=True) == 133_376  # 2,048 bytes of maxima + 131,328 levels
    assert record_size(512, causal=False) == 4 * 512 + 512 * 512
    assert 30 * 9 * record_size(512, True) < 30 * 9 * 512 * 512 * 4 / 7.8  # vs float32 weights


@pytest.mark.parametrize(("n", "size"), [(7, 32), (64, 32), (50, 16)])
def test_thumbnails_are_block_means_scaled_to_their_largest(n, size):
    weights = attention(2, 3, n, True, seed=n, sharpness=4.0)
    t, data = thumbnails(weights, size)
    assert t == min(n, size) and len(data) == 2 * 3 * t * t
    got = torch.from_numpy(np.frombuffer(data, dtype=np.uint8).astype(np.float64)).view(2, 3, t, t)
    for layer in range(2):
        for head in range(3):
            matrix = weights[layer, head].double()
            # a float64 recomputation of adaptive average pooling: block [floor(i n / t), ceil((i+1) n / t))
            bounds = [(i * n // t, -(-(i + 1) * n // t)) for i in range(t)]
            means = torch.tensor([[matrix[r0:r1, c0:c1].mean().item() for c0, c1 in bounds]
                                  for r0, r1 in bounds])
            expected = (means / means.max() * LEVELS).round()
            assert (got[layer, head] - expected).abs().max() <= 1
            assert got[layer, head].max() == LEVELS
