"""The sinks lab's measures on toy GPTs: the first token's share against a closed form (a layer
with no queries attends uniformly) and against layer 1's attention recomputed in float64 from
the weights; the KV cache's measured bytes against L · 2 · H_kv · d_h · bytes (Ainslie et al.
2023, "GQA"). The lab on SmolLM2 is checked in tests/labs/test_labs_smollm2.py."""

from __future__ import annotations

import pytest
import torch

from attnlab.analysis import kv_cache_bytes
from attnlab.labs import smollm2
from attnlab.labs.registry import LabUnavailable, run_lab
from attnlab.labs.report import LabOptions
from attnlab.labs.sinks import cache_bytes, first_token_share, uniform_share
from attnlab.models import GPT, GPTConfig


def gpt(num_kv_heads: int | None = 2, layers: int = 2) -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(40, 32, layers, d_model=32, num_heads=4, num_kv_heads=num_kv_heads, positional="rope",
                       norm="rmsnorm", activation="swiglu", bias=False)
    return GPT(config).eval()


def test_a_layer_without_queries_gives_uniform_attentions_share():
    model, ids = gpt(), torch.randint(0, 40, (3, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model.decoder.layers[0].self_attn.in_proj.weight[:32] = 0  # q = 0: every visible key alike
        model.decoder.layers[1].self_attn.in_proj.weight.mul_(10)  # layer 2: far from uniform
        _, weights = model(ids, return_weights=True)
    share = first_token_share(weights)
    harmonic = sum(1 / k for k in range(1, 12))
    assert float(share[0]) == pytest.approx((harmonic - 1) / 10, abs=1e-6)  # mean over i of 1/(i+1)
    assert uniform_share(11) == pytest.approx((harmonic - 1) / 10, abs=1e-12)
    assert float(share[1]) != pytest.approx(float(share[0]), abs=1e-3)  # layer 2 has its queries


def test_layer_one_share_equals_a_float64_recomputation_from_the_weights():
    model, ids = gpt(), torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(6)  # attention far from uniform
        _, weights = model(ids, return_weights=True)
    layer = model.decoder.layers[0]
    w_in = layer.self_attn.in_proj.weight.detach().double()  # (d + 2 d_kv, d)
    x = model.tok_embed.weight.detach().double()[ids]  # (B, n, d)
    gain = layer.norm1.weight.detach().double()
    h = x / torch.sqrt((x * x).mean(-1, keepdim=True) + layer.norm1.eps) * gain
    q = (h @ w_in[:32].T).view(2, 9, 4, 8).transpose(1, 2)  # (B, H, n, d_h)
    k = (h @ w_in[32:48].T).view(2, 9, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    q, k = model.pos.rotary.rotate(q), model.pos.rotary.rotate(k)
    scores = (q @ k.transpose(-1, -2)) / 8**0.5
    scores = scores.masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), float("-inf"))
    expected = scores.softmax(-1)[..., 1:, 0].mean()
    assert float(first_token_share(weights)[0]) == pytest.approx(float(expected), abs=1e-6)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_measured_cache_bytes_equal_the_formula(num_kv_heads, dtype):
    model = gpt(num_kv_heads, layers=3).to(dtype)
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, 40, (2, 7)), cache=cache)
        model(torch.randint(0, 40, (2, 1)), cache=cache)  # one more step: the buffers may be larger
    per_element = torch.finfo(dtype).bits // 8
    assert cache_bytes(cache) == kv_cache_bytes(model.config, 8, batch_size=2, bytes_per_element=per_element)
    assert cache_bytes(cache) == 3 * 2 * num_kv_heads * 8 * per_element * 8 * 2  # L·2·H_kv·d_h·b · n · B


def test_kv_cache_bytes_refuses_what_it_cannot_count():
    with pytest.raises(TypeError, match="GPTConfig"):
        kv_cache_bytes(object(), 1)
    with pytest.raises(ValueError, match="tokens"):
        kv_cache_bytes(gpt().config, 0)


@pytest.mark.parametrize("lab", ["induction", "sinks"])
def test_without_the_llm_extra_the_labs_name_make_llm(lab, tmp_path, monkeypatch):
    monkeypatch.setattr(smollm2, "NEEDS", ("attnlab_no_such_module",))
    with pytest.raises(LabUnavailable, match=r"attnlab_no_such_module: run `make llm`"):
        run_lab(lab, tmp_path, LabOptions(quick=True, progress=False))
