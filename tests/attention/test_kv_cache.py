"""The KV cache's buffers (issue 19): preallocated, written in place, reordered by rows."""

from __future__ import annotations

import torch

from attnlab.attention import KVCache, MultiHeadAttention


def test_kv_cache_is_preallocated_and_written_in_place():
    """One buffer per growth (capacity at least doubles), never a copy per step."""
    cache, steps = KVCache(), torch.randn(2, 3, 70, 4)
    buffers = set()
    for t in range(70):
        k_all, v_all = cache.append(steps[..., t : t + 1, :], -steps[..., t : t + 1, :])
        buffers.add(k_all.untyped_storage().data_ptr())
        assert torch.equal(k_all, steps[..., : t + 1, :]) and torch.equal(v_all, -k_all)
    assert len(buffers) == 3  # capacities 32, 64, 128 for 70 positions
    cache.reorder(torch.tensor([1, 1, 0]))  # copies the filled positions only
    assert torch.equal(cache.k, steps[[1, 1, 0]]) and torch.equal(cache.v, -steps[[1, 1, 0]])
    assert len(cache) == 70 and cache.batch_size == 3
    k_all, _ = cache.append(steps[[0, 1, 1], :, :1], steps[[0, 1, 1], :, :1])  # after the reorder
    assert torch.equal(k_all[..., 70, :], steps[[0, 1, 1], :, 0])


def test_kv_cache_under_autograd_gives_the_full_causal_gradient():
    """With gradients the cache concatenates: in-place writes would break backward."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8, requires_grad=True)
    mha(x, is_causal=True).square().sum().backward()
    full_grad, x.grad = x.grad, None
    cache, outs = KVCache(), []
    for start, size in ((0, 2), (2, 1), (3, 2)):
        outs.append(mha(x[:, start : start + size], is_causal=True, cache=cache))
    torch.cat(outs, 1).square().sum().backward()
    torch.testing.assert_close(x.grad, full_grad, rtol=1e-5, atol=1e-6)


def _filled(rows: int = 3, n: int = 5) -> tuple[KVCache, torch.Tensor]:
    cache, steps = KVCache(), torch.randn(rows, 2, n, 4)
    for t in range(n):
        cache.append(steps[..., t : t + 1, :], -steps[..., t : t + 1, :])
    return cache, steps


def test_reorders_compose():
    """Beam search reorders every step: each reorder applies to the rows the last one left."""
    cache, steps = _filled()
    expected = steps
    for index in ([2, 0, 0], [1, 1, 2], [0, 2, 1], [2, 2, 2]):
        cache.reorder(torch.tensor(index))
        expected = expected[index]
        assert torch.equal(cache.k, expected) and torch.equal(cache.v, -expected)


def test_reordering_never_writes_into_a_callers_tensors():
    """Keys handed to the cache (``KVCache(k, v)``, ``fill``) are the caller's: never written."""
    k, v = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)
    k0, v0 = k.clone(), v.clone()
    for cache in (KVCache(k, v), KVCache()):
        if len(cache) == 0:
            cache.fill(k, v)
        for index in ([1, 2, 0], [0, 0, 1], [2, 1, 0]):
            cache.reorder(torch.tensor(index))
        assert torch.equal(k, k0) and torch.equal(v, v0)
        assert torch.equal(cache.k, k0[[1, 2, 0]][[0, 0, 1]][[2, 1, 0]])


def test_reorders_that_drop_rows():
    """Rows leaving the batch (greedy search) shrink it between reorders."""
    cache, steps = _filled(rows=4)
    cache.reorder(torch.tensor([3, 2, 1, 0]))
    cache.reorder(torch.tensor([0, 2]))
    cache.reorder(torch.tensor([1, 0]))
    assert torch.equal(cache.k, steps[[3, 2, 1, 0]][[0, 2]][[1, 0]])


def test_a_cache_built_in_inference_mode_reorders_outside_it():
    """Buffers made in inference mode are never written in place outside it (PyTorch forbids it)."""
    with torch.inference_mode():
        cache, steps = _filled()
        cache.reorder(torch.tensor([1, 0, 2]))
    cache.reorder(torch.tensor([2, 2, 0]))
    cache.reorder(torch.tensor([0, 1, 2]))
    assert torch.equal(cache.k, steps[[1, 0, 2]][[2, 2, 0]])
