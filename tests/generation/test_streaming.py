"""The evicting KV cache (window attention, StreamingLLM's sinks + window) against recomputation.

In a one-layer model the keys and values depend only on the token and its position, so a
cache that evicted positions and moved the later ones back must give exactly what a fresh
forward pass over the kept tokens gives, at positions 0 .. len − 1 within the cache (Xiao et
al. 2023, §3.2). A window as long as the text is the full context, whatever the depth.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.generation.streaming import evict, streaming_nll
from attnlab.models import GPT, GPTConfig
from attnlab.modules.rotary import RotaryEmbedding


def gpt(positional: str = "rope", layers: int = 1, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    config = GPTConfig(50, 64, layers, d_model=32, num_heads=4, num_kv_heads=2, positional=positional,
                       norm="rmsnorm", activation="swiglu", bias=False)
    model = GPT(config).eval()
    with torch.no_grad():  # larger weights than the init's: attention far from uniform
        for name, p in model.named_parameters():
            if "in_proj" in name:
                p.mul_(8)
    return model


def kept(t: int, window: int, sinks: int) -> list[int]:
    """Positions of the tokens the cache holds when token ``t`` is read."""
    if t + 1 <= sinks + window:
        return list(range(t + 1))
    return list(range(sinks)) + list(range(t - window + 1, t + 1))


@pytest.mark.parametrize("positional", ["rope", "alibi", "none"])
@pytest.mark.parametrize(("window", "sinks"), [(5, 0), (4, 2), (1, 3)])
def test_one_layer_streaming_equals_a_fresh_pass_over_the_kept_tokens(positional, window, sinks):
    model = gpt(positional)
    ids = torch.randint(0, 50, (2, 20), generator=torch.Generator().manual_seed(1))
    nll = streaming_nll(model, ids, window=window, sinks=sinks)
    assert nll.shape == (2, 19)
    with torch.no_grad():
        for t in range(19):
            logits = model(ids[:, kept(t, window, sinks)])[:, -1]  # positions within the cache
            expected = F.cross_entropy(logits, ids[:, t + 1], reduction="none")
            torch.testing.assert_close(nll[:, t], expected, atol=2e-5, rtol=1e-5)


def test_a_window_as_long_as_the_text_is_the_full_context():
    model, ids = gpt(layers=3), torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = model(ids)
    full = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    for sinks in (0, 4):
        nll = streaming_nll(model, ids, window=16, sinks=sinks)
        torch.testing.assert_close(nll, full, atol=2e-5, rtol=1e-5)


def rotated(x: torch.Tensor, angle_of_position: float, base: float) -> torch.Tensor:
    """``x`` ``(..., d_h)`` with each pair ``(x_2i, x_2i+1)`` turned by ``m θ_i``, ``θ_i =
    base^(−2i/d_h)``, written with cos and sin in float64 (Su et al. 2021, eq. 34)."""
    x = x.double()
    theta = base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
    cos, sin = torch.cos(angle_of_position * theta), torch.sin(angle_of_position * theta)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def test_evicting_moves_the_later_keys_back_as_if_rotated_there():
    model = gpt(layers=2)
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(3))
    cache = model.new_cache()
    with torch.no_grad():
        model(ids, cache=cache)
    before = [(c.k.clone(), c.v.clone()) for c in cache]
    evict(cache, model.pos.rotary, start=2, count=3)
    base = model.config.rope_base
    for (k, v), c in zip(before, cache, strict=True):
        assert len(c) == 9
        torch.testing.assert_close(c.v, torch.cat([v[..., :2, :], v[..., 5:, :]], dim=-2), atol=0, rtol=0)
        torch.testing.assert_close(c.k[..., :2, :], k[..., :2, :], atol=0, rtol=0)
        # the key at position 5 + r (rotated by (5 + r)θ) now sits at 2 + r: turned back by 3θ
        expected = rotated(k[..., 5:, :], -3, base)
        torch.testing.assert_close(c.k[..., 2:, :].double(), expected, atol=1e-5, rtol=0)


def test_shift_composes_with_rotate():
    rope = RotaryEmbedding(8, base=100.0)
    x = torch.randn(2, 3, 1, 8, dtype=torch.float64)
    for m, by in ((7, -3), (2, 5), (4, -4)):
        torch.testing.assert_close(rope.rotate(x, m), rotated(x, m, 100.0), atol=1e-12, rtol=0)
        torch.testing.assert_close(rope.shift(rope.rotate(x, m), by), rotated(x, m + by, 100.0), atol=1e-12,
                                   rtol=0)


def test_absolute_positions_cannot_be_evicted():
    model = gpt("learned")
    with pytest.raises(ValueError, match="positional is 'learned'"):
        streaming_nll(model, torch.zeros(1, 4, dtype=torch.long), window=2)
    with pytest.raises(ValueError, match="window must be >= 1"):
        streaming_nll(gpt(), torch.zeros(1, 4, dtype=torch.long), window=0)
    cache = gpt().new_cache()
    with pytest.raises(ValueError, match="cannot evict positions 0..1 of a cache of 0"):
        evict(cache, None, start=0, count=2)
