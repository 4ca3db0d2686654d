"""Bad input raises ValueError naming the argument, the expected and the actual value (issue 2).

Never a bare assertion, and never a RuntimeError / IndexError from deep inside torch.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    from_key_padding_mask,
    lengths_to_mask,
    masked_softmax,
    padding_mask,
    scaled_dot_product_attention,
    self_attention,
)


@pytest.fixture(autouse=True)
def _seed_everything():
    """Unseeded draws (torch.randn without a generator) are reproducible too."""
    torch.manual_seed(0)


sdpa = scaled_dot_product_attention


def r(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype)


def b(*shape):
    return torch.ones(*shape, dtype=torch.bool)


# (callable taking the sdpa function, regex its message must match): the message names
# the argument, the expectation and the actual value
SDPA_CASES = {
    "q rank": (
        lambda f: f(r(5), r(5, 5), r(5, 5)),
        r"q must have at least 2 dimensions \(\.\.\., n, d\), got shape \(5,?\)",
    ),
    "k rank differs": (
        lambda f: f(r(2, 3, 4), r(3, 4), r(3, 4)),
        r"q, k and v must have the same number of dimensions, got q \(2, 3, 4\), k \(3, 4\)",
    ),
    "q vs k width": (
        lambda f: f(r(2, 3, 5), r(2, 4, 4), r(2, 4, 4)),
        r"k has width 4 but q has width 5",
    ),
    "v length": (
        lambda f: f(r(2, 3, 4), r(2, 4, 4), r(2, 3, 4)),
        r"v has length 3 but k has length 4",
    ),
    "batch mismatch": (
        lambda f: f(r(2, 3, 4), r(3, 4, 4), r(3, 4, 4)),
        r"q, k and v must share their batch dimensions \(k and v may have H_kv heads dividing q's H\), "
        r"got q \(2, 3, 4\), k \(3, 4, 4\)",
    ),
    "dtype mismatch": (
        lambda f: f(r(2, 3, 4), r(2, 3, 4, dtype=torch.float64), r(2, 3, 4)),
        r"q, k and v must share one dtype, got q torch.float32, k torch.float64",
    ),
    "integer q": (
        lambda f: f(torch.ones(2, 3, 4, dtype=torch.long), r(2, 3, 4), r(2, 3, 4)),
        r"q must be a floating-point tensor, got dtype torch.int64",
    ),
    "mask keys": (
        lambda f: f(r(1, 2, 4), r(1, 9, 4), r(1, 9, 4), b(1, 2, 7)),
        r"mask has shape \(1, 2, 7\) but keys have length 9",
    ),
    "mask 2-D not key padding": (  # docs/design.md, "Masks": a 2-D mask is (B, n_k)
        lambda f: f(r(2, 5, 4), r(2, 6, 4), r(2, 6, 4), b(5, 6)),
        r"mask has shape \(5, 6\) but a 2-D mask is a key-padding mask \(B, n_k\) = \(2, 6\)",
    ),
    "mask batch": (
        lambda f: f(r(2, 3, 5, 4), r(2, 3, 6, 4), r(2, 3, 6, 4), b(4, 1, 1, 6)),
        r"mask has shape \(4, 1, 1, 6\), which does not broadcast to the attention "
        r"weights' shape \(2, 3, 5, 6\)",
    ),
    "mask queries": (
        lambda f: f(r(2, 5, 4), r(2, 6, 4), r(2, 6, 4), b(2, 3, 6)),
        r"mask has shape \(2, 3, 6\), which does not broadcast .* \(2, 5, 6\)",
    ),
    "mask too many dims": (
        lambda f: f(r(2, 5, 4), r(2, 6, 4), r(2, 6, 4), b(1, 1, 5, 6)),
        r"mask must have 2 or 3 dimensions \(B, n_k\) up to the scores' \(2, 5, 6\), "
        r"got shape \(1, 1, 5, 6\)",
    ),
    "mask NaN": (
        lambda f: f(r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), torch.tensor([[0.0, float("nan"), 0.0]] * 2)),
        r"mask is a float \(additive\) mask and must not contain NaN",
    ),
    "mask +inf": (
        lambda f: f(r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), torch.tensor([[0.0, float("inf"), 0.0]] * 2)),
        r"mask is a float \(additive\) mask and must not contain \+inf",
    ),
    "mask int dtype": (
        lambda f: f(r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), torch.ones(3, dtype=torch.long)),
        r"mask must be boolean \(True = allowed\) or floating \(additive\), got dtype torch.int64",
    ),
    "mask scalar": (
        lambda f: f(r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), torch.tensor(True)),
        r"mask must have 2 or 3 dimensions .* got shape \(\) \(0 dimensions\)",
    ),
    "dropout": (
        lambda f: f(r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), dropout=1.5),
        r"dropout must be in \[0, 1\), got 1.5",
    ),
    "causal more queries than keys": (
        lambda f: f(r(2, 5, 4), r(2, 3, 4), r(2, 3, 4), is_causal=True),
        r"n_k >= n_q .* got n_q=5, n_k=3",
    ),
}


@pytest.mark.parametrize("return_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_errors(case, return_weights):
    """Both paths validate the same way."""
    fn, match = SDPA_CASES[case]
    with pytest.raises(ValueError, match=match):
        fn(functools.partial(sdpa, return_weights=return_weights))


def test_non_tensor_input_is_a_type_error():
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got list"):
        sdpa([[1.0]], r(1, 1), r(1, 1))


def mha(**kw):
    return MultiHeadAttention(8, 2, **kw)


MHA_CASES = {
    "num_heads divides": (
        lambda: MultiHeadAttention(10, 3),
        r"num_heads must divide d_model, got d_model=10 and num_heads=3",
    ),
    "num_heads zero": (lambda: MultiHeadAttention(8, 0), r"num_heads must be > 0, got 0"),
    "d_model zero": (lambda: MultiHeadAttention(0, 1), r"d_model must be > 0, got 0"),
    "kdim zero": (lambda: mha(kdim=0), r"kdim must be > 0, got 0"),
    "vdim negative": (lambda: mha(vdim=-3), r"vdim must be > 0, got -3"),
    "dropout": (lambda: mha(dropout=-0.1), r"dropout must be in \[0, 1\), got -0.1"),
    "x rank": (
        lambda: mha()(r(4, 8)),
        r"x must have 3 dimensions \(B, n, d_model\), got shape \(4, 8\) \(2 dimensions\)",
    ),
    "x width": (lambda: mha()(r(2, 4, 6)), r"x has width 6 but d_model is 8"),
    "x integer": (
        lambda: mha()(torch.ones(2, 4, 8, dtype=torch.long)),
        r"x must be a floating-point tensor, got dtype torch.int64",
    ),
    "x dtype": (
        lambda: mha()(r(2, 4, 8, dtype=torch.float64)),
        r"x has dtype torch.float64 but the module's parameters have dtype torch.float32",
    ),
    "memory rank": (
        lambda: mha()(r(2, 4, 8), r(4, 8)),
        r"memory must have 3 dimensions \(B, n_k, kdim\), got shape \(4, 8\)",
    ),
    "memory width": (lambda: mha()(r(2, 4, 8), r(2, 5, 5)), r"memory has width 5 but kdim is 8"),
    "memory vs kdim": (
        lambda: mha(kdim=6, vdim=6)(r(2, 4, 8), r(2, 5, 8)),
        r"memory has width 8 but kdim is 6",
    ),
    "memory batch": (
        lambda: mha()(r(2, 4, 8), r(3, 5, 8)),
        r"memory has batch size 3 but x has batch size 2",
    ),
    "memory dtype": (
        lambda: mha()(r(2, 4, 8), r(2, 5, 8, dtype=torch.float64)),
        r"memory has dtype torch.float64 but the module's parameters",
    ),
    "value without memory": (
        lambda: mha()(r(2, 4, 8), value=r(2, 4, 8)),
        r"value was given without memory",
    ),
    "value width": (
        lambda: mha(kdim=6, vdim=5)(r(2, 4, 8), r(2, 3, 6), value=r(2, 3, 4)),
        r"value has width 4 but vdim is 5",
    ),
    "value length": (
        lambda: mha()(r(2, 4, 8), r(2, 3, 8), value=r(2, 5, 8)),
        r"value has shape \(2, 5, 8\) but memory has shape \(2, 3, 8\)",
    ),
    "value missing": (
        lambda: mha(kdim=6, vdim=5)(r(2, 4, 8), r(2, 3, 6)),
        r"kdim=6 differs from vdim=5, so value \(B, n_k, vdim\) must be given",
    ),
    "self-attention on kdim module": (
        lambda: mha(kdim=6)(r(2, 4, 8)),
        r"self-attention needs kdim = vdim = d_model=8, got kdim=6",
    ),
    "mask batch": (
        lambda: mha()(r(2, 4, 8), mask=b(3, 1, 1, 4)),
        r"mask has shape \(3, 1, 1, 4\), which does not broadcast to the attention "
        r"weights' shape \(2, 2, 4, 4\)",
    ),
    "mask keys": (
        lambda: mha()(r(2, 4, 8), r(2, 6, 8), mask=b(2, 1, 1, 4)),
        r"mask has shape \(2, 1, 1, 4\) but keys have length 6",
    ),
    "mask NaN": (
        lambda: mha()(r(2, 4, 8), mask=torch.full((2, 4), float("nan"))),
        r"mask is a float \(additive\) mask and must not contain NaN",
    ),
    "cache batch": (
        lambda: _cached_then(r(2, 1, 8)),
        r"cache holds batch size 3 but x has batch size 2",
    ),
    "cache reorder index": (
        lambda: KVCache().reorder(torch.tensor([[0, 1]])),
        r"index must be a 1-D integer tensor of batch rows, got shape \(1, 2\)",
    ),
}


def _cached_then(x):
    m, cache = mha(), KVCache()
    m(r(3, 2, 8), is_causal=True, cache=cache)
    return m(x, is_causal=True, cache=cache)


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_errors(case):
    fn, match = MHA_CASES[case]
    with pytest.raises(ValueError, match=match):
        fn()


def test_multihead_cache_must_be_a_kv_cache():
    with pytest.raises(TypeError, match="cache must be a KVCache, got dict"):
        mha()(r(2, 4, 8), cache={})


MASK_CASES = {
    "causal negative": (lambda: causal_mask(-1), r"causal_mask sizes must be >= 0, got n_q=-1"),
    "causal n_k < n_q": (lambda: causal_mask(4, 2), r"needs n_k >= n_q .* got n_q=4, n_k=2"),
    "lengths rank": (
        lambda: lengths_to_mask(torch.ones(2, 3, dtype=torch.long)),
        r"lengths must have 1 dimensions \(B,\), got shape \(2, 3\)",
    ),
    "lengths float": (
        lambda: lengths_to_mask(torch.tensor([1.0, 2.0])),
        r"lengths must be an integer tensor, got dtype torch.float32",
    ),
    "lengths negative": (
        lambda: lengths_to_mask(torch.tensor([2, -1])),
        r"lengths must be >= 0, got a minimum of -1",
    ),
    "lengths > max_len": (
        lambda: lengths_to_mask(torch.tensor([2, 5]), 4),
        r"lengths must be <= max_len=4, got a maximum of 5",
    ),
    "padding rank": (
        lambda: padding_mask(torch.ones(2, 3, 4, dtype=torch.long), 0),
        r"x must have 2 dimensions \(B, n\), got shape \(2, 3, 4\)",
    ),
    "padding pad_id": (
        lambda: padding_mask(torch.ones(2, 3, dtype=torch.long)),
        r"padding_mask needs pad_id when x holds token ids \(got pad_id=None\)",
    ),
    "key_padding_mask rank": (
        lambda: from_key_padding_mask(b(3)),
        r"key_padding_mask must have 2 dimensions \(B, n\), got shape \(3,?\)",
    ),
    "softmax integer scores": (
        lambda: masked_softmax(torch.ones(2, 3, dtype=torch.long)),
        r"scores must be a floating-point tensor, got dtype torch.int64",
    ),
    "softmax mask keys": (
        lambda: masked_softmax(r(2, 3), b(2, 4)),
        r"mask has shape \(2, 4\) but keys have length 3",
    ),
    "softmax mask NaN": (
        lambda: masked_softmax(r(2, 3), torch.tensor([0.0, float("nan"), 0.0])),
        r"must not contain NaN",
    ),
    "self_attention rank": (
        lambda: self_attention(r(4)),
        r"x must have at least 2 dimensions \(\.\.\., n, d\), got shape \(4,?\)",
    ),
}


@pytest.mark.parametrize("case", list(MASK_CASES))
def test_mask_and_helper_errors(case):
    fn, match = MASK_CASES[case]
    with pytest.raises(ValueError, match=match):
        fn()


# ---------------------------------------------------------------- fuzz: ValueError or success

dims = st.integers(0, 4)


@settings(max_examples=60, deadline=None)
@given(
    q_shape=st.lists(dims, min_size=1, max_size=4),
    k_shape=st.lists(dims, min_size=1, max_size=4),
    v_shape=st.lists(dims, min_size=1, max_size=4),
    mask_shape=st.one_of(st.none(), st.lists(dims, min_size=0, max_size=5)),
    mask_float=st.booleans(),
    is_causal=st.booleans(),
    return_weights=st.booleans(),
)
def test_fuzz_sdpa_only_ever_raises_value_error(
    q_shape, k_shape, v_shape, mask_shape, mask_float, is_causal, return_weights
):
    q, k, v = r(*q_shape), r(*k_shape), r(*v_shape)
    mask = None
    if mask_shape is not None:
        mask = r(*mask_shape) if mask_float else torch.rand(mask_shape) > 0.5
    try:
        out = sdpa(q, k, v, mask, is_causal=is_causal, return_weights=return_weights)
    except ValueError:
        return
    out = out[0] if return_weights else out
    assert out.shape == (*q.shape[:-1], v.shape[-1])
    assert torch.isfinite(out).all()


@settings(max_examples=40, deadline=None)
@given(
    x_shape=st.lists(dims, min_size=1, max_size=4),
    mem_shape=st.one_of(st.none(), st.lists(dims, min_size=1, max_size=4)),
    mask_shape=st.one_of(st.none(), st.lists(dims, min_size=1, max_size=5)),
    kdim=st.sampled_from([None, 3]),
    is_causal=st.booleans(),
    return_weights=st.booleans(),
)
def test_fuzz_multihead_only_ever_raises_value_error(
    x_shape, mem_shape, mask_shape, kdim, is_causal, return_weights
):
    m = MultiHeadAttention(4, 2, kdim=kdim, vdim=kdim)
    x = r(*x_shape)
    memory = None if mem_shape is None else r(*mem_shape)
    mask = None if mask_shape is None else torch.rand(mask_shape) > 0.5
    try:
        out = m(x, memory, mask=mask, is_causal=is_causal, return_weights=return_weights)
    except ValueError:
        return
    out = out[0] if return_weights else out
    assert out.shape == x.shape


def test_plural_names_queries_and_keys():
    """The views' captions ("10 queries × 40 keys"): consonant + y takes -ies, the rest -s."""
    from attnlab.validation import counted, plural

    assert [plural(w) for w in ("query", "key", "token", "day")] == ["queries", "keys", "tokens", "days"]
    assert counted(2, "batch", "batches") == "2 batches"
