"""GPT: cached decoding for every positional scheme, causality, tying, weights, bad input."""

from __future__ import annotations

import pytest
import torch

from attnlab.models import GPT, GPTConfig
from attnlab.modules.positional import POSITIONAL_KINDS, LearnedPositionalEmbedding, RelativePositionBias

V = 19


def make(kind: str = "learned", **kw) -> GPT:
    torch.manual_seed(0)
    cfg = (
        dict(vocab_size=V, block_size=16, d_model=32, num_heads=4, num_layers=2, positional=kind)
        | kw
    )
    model = GPT.from_config(GPTConfig(**cfg)).eval()
    for m in model.modules():  # make position tables matter as much as the tokens
        if isinstance(m, RelativePositionBias | LearnedPositionalEmbedding):
            torch.nn.init.normal_(m.embedding.weight, std=1.0)
    return model


def tokens(b: int = 3, n: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (b, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_cached_decoding_equals_full_recomputation(kind, norm_first):
    model = make(kind, norm_first=norm_first)
    idx = tokens()
    full = model(idx)  # (B, n, V)
    cache = model.new_cache()
    steps = [model(idx[:, :4], cache=cache)]  # a prompt, then one token at a time
    steps += [model(idx[:, i : i + 1], cache=cache) for i in range(4, idx.shape[1])]
    assert cache.offset == idx.shape[1]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_logits_never_see_the_future(kind):
    model = make(kind)
    idx = tokens()
    changed = idx.clone()
    changed[:, 6] = (idx[:, 6] + 1) % V
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_positions_matter_except_without_a_scheme():
    idx = torch.tensor([[3, 5, 7, 11]])
    for kind in POSITIONAL_KINDS:  # one layer: the last token attends to a bag of the others
        model = make(kind, num_layers=1)
        same = torch.allclose(model(idx)[0, -1], model(idx[:, [2, 1, 0, 3]])[0, -1], atol=1e-6)
        assert same == (kind == "none"), kind


def test_attention_weights_are_causal_distributions():
    model = make("alibi")
    idx = tokens(n=7)
    logits, weights = model(idx, return_weights=True)
    torch.testing.assert_close(logits, model(idx))
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (3, 4, 7, 7)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 7))
        assert torch.all(w.triu(diagonal=1) == 0)
    cache = model.new_cache()
    model(idx[:, :5], cache=cache)
    _, step = model(idx[:, 5:6], cache=cache, return_weights=True)
    assert step[0].shape == (3, 4, 1, 6)


def test_weight_tying_and_block_size():
    model = make()
    assert model.head.weight is model.tok_embed.weight and model.block_size == 16
    untied = make(tie_output=False)
    assert untied.head.weight is not untied.tok_embed.weight
    assert untied.num_parameters() == model.num_parameters() + V * 32


def test_bad_input_names_argument_expected_and_actual():
    model = make("learned")
    with pytest.raises(
        ValueError, match=r"idx must be token ids < vocab_size=19, got a maximum of 19"
    ):
        model(torch.tensor([[1, 19]]))
    with pytest.raises(ValueError, match=r"idx must be token ids >= 0, got a minimum of -3"):
        model(torch.tensor([[-3, 1]]))
    with pytest.raises(
        ValueError, match=r"idx reaches length 17 but learned positions allow at most block_size=16"
    ):
        model(tokens(n=17))
    cache = model.new_cache()
    model(tokens(n=15), cache=cache)
    with pytest.raises(ValueError, match=r"idx reaches length 17 .*block_size=16"):
        model(tokens(n=2), cache=cache)
    with pytest.raises(ValueError, match=r"idx must have 2 dimensions"):
        model(tokens()[0])


@pytest.mark.parametrize("kind", ["rope", "alibi", "sinusoidal", "relative"])
def test_relative_and_fixed_schemes_run_past_block_size(kind):
    assert make(kind)(tokens(n=24)).shape == (3, 24, V)


@pytest.mark.parametrize("kind", ["learned", "rope"])
def test_last_only_gives_the_last_positions_logits_of_the_full_forward(kind):
    """What a decoding step reads: the last position's logits ``(B, 1, V)``, with or without a cache
    and with the attention weights unchanged."""
    model, idx = make(kind), tokens(2, 9)
    full, weights = model(idx, return_weights=True)
    last, last_weights = model(idx, return_weights=True, last_only=True)
    assert last.shape == (2, 1, V)
    torch.testing.assert_close(last, full[:, -1:])
    for a, b in zip(last_weights, weights, strict=True):
        torch.testing.assert_close(a, b)
    cache = model.new_cache()
    model(idx[:, :5], cache=cache, last_only=True)
    stepped = model(idx[:, 5:], cache=cache, last_only=True)
    torch.testing.assert_close(stepped, full[:, -1:], atol=1e-5, rtol=1e-5)
