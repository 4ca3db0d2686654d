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
