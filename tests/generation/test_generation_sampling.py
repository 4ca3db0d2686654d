"""Sampling: KV cache vs recomputation, top-k / top-p against independent references,
temperature limits, seeds, stop tokens and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.generation import greedy_search, sample, top_k_filter, top_p_filter
from attnlab.generation.sampling import sample_next
from generation_toys import BigramStub, tiny_gpt, toy_translator

PROMPT = [3, 1, 4, 1, 5]


@pytest.fixture(scope="module")
def gpt():
    return tiny_gpt("learned", block_size=16)


def plain_sampling(model, prompt, max_new, seed):
    """Independent reference: full forward, softmax, one multinomial draw per step."""
    gen = torch.Generator().manual_seed(seed)
    idx = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(max_new):
            probs = model(idx)[:, -1].softmax(-1)  # (1, V)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=gen)], dim=1)
    return idx[0, len(prompt) :].tolist()


def nucleus_reference(logits: np.ndarray, p: float) -> np.ndarray:
    """Boolean keep-mask of the smallest most-probable set with mass >= p (float64, one row)."""
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    keep, mass = np.zeros(len(probs), dtype=bool), 0.0
    for i in sorted(range(len(probs)), key=lambda i: -probs[i]):
        keep[i] = True
        mass += probs[i]
        if mass >= p:
            break
    return keep


# --- KV cache, seeds ----------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["learned", "rope", "sinusoidal"])
def test_cache_gives_exactly_the_tokens_of_recomputation(positional):
    """Same seed, same tokens — here also across several slides of the context window."""
    model = tiny_gpt(positional, block_size=8, sharpen=5.0)
    prompt = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    kwargs = dict(max_new_tokens=40, seed=7, top_k=10, temperature=0.9)
    cached = sample(model, prompt, **kwargs)
    assert cached == sample(model, prompt, use_cache=False, **kwargs)
    assert len(set(cached[0])) > 3  # genuinely random output


def test_fixed_seed_reproducible_and_seeds_differ(gpt):
    first = sample(gpt, PROMPT, 10, seed=123, temperature=2.0)
    assert first == sample(gpt, PROMPT, 10, seed=123, temperature=2.0)
    others = {tuple(sample(gpt, PROMPT, 10, seed=s, temperature=2.0)[0]) for s in range(5)}
    assert len(others) > 1


def test_seed_none_uses_torch_global_generator(gpt):
    torch.manual_seed(5)
    first = sample(gpt, PROMPT, 8, temperature=2.0)
    torch.manual_seed(5)
    assert sample(gpt, PROMPT, 8, temperature=2.0) == first


def test_top_p_one_and_no_top_k_equal_plain_sampling(gpt):
    reference = plain_sampling(gpt, PROMPT, 10, seed=3)
    assert sample(gpt, PROMPT, 10, seed=3) == [reference]
    assert sample(gpt, PROMPT, 10, seed=3, top_p=1.0) == [reference]
    assert sample(gpt, PROMPT, 10, seed=3, top_k=gpt.config.vocab_size) == [reference]


# --- temperature ----------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.0, 1e-6])
def test_temperature_to_zero_is_greedy(gpt, temperature):
    prompt = torch.tensor([[3, 1, 4], [2, 7, 1]])
    greedy = greedy_search(gpt, prompt=prompt, max_new_tokens=11)
    assert sample(gpt, prompt, 11, temperature=temperature, seed=0) == greedy


def test_temperature_sharpens_the_stub_distribution():
    """Token frequencies follow softmax(z / T) of the stub's known logits."""
    z = torch.tensor([2.0, 1.0, 0.0, -1.0])
    stub = BigramStub(z.expand(4, 4))
    for temperature in (0.5, 2.0):
        draws = sample(
            stub, torch.zeros(4000, 1, dtype=torch.long), 1, temperature=temperature, seed=0
        )
        freq = np.bincount([d[0] for d in draws], minlength=4) / 4000
        np.testing.assert_allclose(freq, (z / temperature).softmax(0).numpy(), atol=0.03)


# --- top-k ----------------------------------------------------------------------------------


def test_top_k_never_leaves_the_models_top_k(gpt):
    """Each sampled token is among the k largest logits of the model's own (uncached) forward."""
    k, prompt = 3, torch.tensor([[3, 1], [4, 1], [5, 9]])
    out = torch.tensor(sample(gpt, prompt, 14, top_k=k, temperature=3.0, seed=1))  # (3, 14)
    seq = torch.cat([prompt, out], dim=1)  # (3, 16) = block_size: one forward covers it
    with torch.no_grad():
        logits = gpt(seq[:, :-1])  # (3, 15, V)
    allowed = logits[:, 1:].topk(k, dim=-1).indices  # (3, 14, k) next-token top-k at each step
    assert (allowed == out.unsqueeze(-1)).any(-1).all()
    assert len(out.unique()) > k  # the top-k sets moved, and sampling used more than one token


def test_top_k_on_a_stub_with_known_logits():
    table = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0, 0.0]]).repeat(3, 1)[:5]
    draws = sample(
        BigramStub(table),
        torch.zeros(500, 1, dtype=torch.long),
        6,
        top_k=2,
        temperature=5.0,
        seed=0,
    )
    steps = torch.tensor(draws)  # (500, 6)
    previous = torch.cat([torch.zeros(500, 1, dtype=torch.long), steps[:, :-1]], dim=1)
    top2 = table.topk(2, dim=-1).indices[previous]  # (500, 6, 2)
    assert (top2 == steps.unsqueeze(-1)).any(-1).all()
    assert set(steps.flatten().tolist()) == {0, 1, 3, 4}  # both of each row's top 2 were drawn


def test_top_k_filter_keeps_exactly_the_k_largest():
    logits = torch.randn(6, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for k in (1, 7, 50, 80):
        kept = top_k_filter(logits, k).isfinite()
        order = np.argsort(-logits.numpy(), axis=-1)[:, : min(k, 50)]
        expected = np.zeros_like(kept.numpy())
        np.put_along_axis(expected, order, True, axis=-1)
        np.testing.assert_array_equal(kept.numpy(), expected)


# --- top-p ----------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1e-3, 0.1, 0.5, 0.9, 0.99, 0.999999])
def test_top_p_filter_matches_sort_based_reference(p):
    gen = torch.Generator().manual_seed(int(p * 1e6))
    logits = (
        torch.randn(64, 40, dtype=torch.float64, generator=gen)
        * torch.tensor([0.3, 1.0, 4.0]).repeat(22)[:64, None]
    )
    kept = top_p_filter(logits, p).isfinite().numpy()
    expected = np.stack([nucleus_reference(row, p) for row in logits.numpy()])
    np.testing.assert_array_equal(kept, expected)
    probs = logits.softmax(-1).numpy()
    mass = (probs * kept).sum(-1)
    smallest_kept = np.where(kept, probs, np.inf).min(-1)
    assert (mass >= p).all() and (mass - smallest_kept < p).all()  # enough, and minimal


def test_top_p_keeps_logit_values_and_one_is_identity():
    logits = torch.randn(3, 9, generator=torch.Generator().manual_seed(1))
    out = top_p_filter(logits, 0.7)
    torch.testing.assert_close(out[out.isfinite()], logits[out.isfinite()], rtol=0, atol=0)
    assert torch.equal(top_p_filter(logits, 1.0), logits)


@pytest.mark.parametrize("p", [1e-300, 5e-324, 1e-45])  # 0 in float32, or its smallest subnormal
def test_a_tiny_top_p_keeps_exactly_the_most_probable_token(p):
    logits = torch.randn(4, 11, generator=torch.Generator().manual_seed(2))
    kept = top_p_filter(logits, p).isfinite()
    assert torch.equal(kept, torch.nn.functional.one_hot(logits.argmax(-1), 11).bool())
    for temperature in (1e-300, 1.0):  # a tiny temperature is greedy in the limit, never NaN
        seeded = torch.Generator().manual_seed(0)
        drawn = sample_next(logits, temperature=temperature, top_p=p, generator=seeded)
        assert torch.equal(drawn, logits.argmax(-1))


def test_top_p_sampling_draws_renormalized_nucleus():
    """probs (0.5, 0.3, 0.15, 0.05), p = 0.7: only tokens 0 and 1, in ratio 5 : 3."""
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    draws = sample(
        BigramStub(logits.expand(4, 4)),
        torch.zeros(4000, 1, dtype=torch.long),
        1,
        top_p=0.7,
        seed=2,
    )
    freq = np.bincount([d[0] for d in draws], minlength=4) / 4000
    np.testing.assert_allclose(freq, [0.625, 0.375, 0.0, 0.0], atol=0.03)


# --- stop tokens ----------------------------------------------------------------------------


def test_stop_tokens_end_each_row_at_its_first_stop(gpt):
    prompt = torch.tensor([[3, 1], [4, 1], [5, 9]])
    free = sample(gpt, prompt, 12, temperature=2.0, seed=4)
    stop = {free[0][3], free[1][5]}
    stopped = sample(gpt, prompt, 12, temperature=2.0, seed=4, stop_tokens=stop)
    first = [min([i for i, t in enumerate(row) if t in stop], default=None) for row in free]
    assert first[0] is not None and first[0] <= 3
    # until the first row stops, every row sees the same draws as the free run
    cut = min(f for f in first if f is not None)
    for row, free_row, f in zip(stopped, free, first, strict=True):
        assert row[:cut] == free_row[:cut]
        if f == cut:
            assert row == free_row[:f]
    assert all(t not in stop for row in stopped for t in row)
    assert stopped == sample(
        gpt, prompt, 12, temperature=2.0, seed=4, stop_tokens=stop, use_cache=False
    )


def test_stop_token_on_a_deterministic_stub():
    table = torch.full((5, 5), -30.0)
    table[0, 1] = table[1, 2] = table[2, 3] = table[3, 4] = table[4, 0] = 0.0  # 0→1→2→3→4→0
    stub = BigramStub(table)
    assert sample(stub, [0], 10, seed=0) == [[1, 2, 3, 4, 0, 1, 2, 3, 4, 0]]
    assert sample(stub, [0], 10, seed=0, stop_tokens=3) == [[1, 2]]
    assert sample(stub, [2], 10, seed=0, stop_tokens=[0, 4]) == [[3]]


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt, kwargs, message",
    [
        ([], {}, r"prompt must hold at least one token.*got shape \(1, 0\)"),
        (torch.zeros(2, 0, dtype=torch.long), {}, r"got shape \(2, 0\)"),
        (PROMPT, dict(max_new_tokens=0), "max_new_tokens must be > 0, got 0"),
        (PROMPT, dict(max_new_tokens=-5), "max_new_tokens must be > 0, got -5"),
        (PROMPT, dict(temperature=-0.1), "temperature must be a finite number >= 0, got -0.1"),
        (PROMPT, dict(temperature=float("nan")), "temperature must be a finite number"),
        (PROMPT, dict(top_k=0), "top_k must be > 0, got 0"),
        (PROMPT, dict(top_p=0.0), r"top_p must be in \(0, 1\], got 0.0"),
        (PROMPT, dict(top_p=1.5), r"top_p must be in \(0, 1\], got 1.5"),
        ([3, 17], {}, "prompt must be token ids < vocab_size=17, got a maximum of 17"),
        (torch.zeros(1, 2, 3, dtype=torch.long), {}, "prompt must have 1 or 2 dimensions"),
        (PROMPT, dict(stop_tokens=["a"]), "stop tokens must be int token ids"),
    ],
)
def test_bad_input_raises_value_error(gpt, prompt, kwargs, message):
    kwargs = {"max_new_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        sample(gpt, prompt, **kwargs)


def test_encoder_decoder_model_is_refused():
    with pytest.raises(ValueError, match="sample is for decoder-only models"):
        sample(toy_translator(steps=0), [3, 4], 3)
