"""The neuron view's queries and keys, read by forward hooks, against the model's own weights:
``softmax(q kᵀ / √d_h)`` (masked as the model masks) equals the attention every layer returns —
a GPT with learned positions, one with rotary positions and grouped-query heads (SmolLM2's
build), and a bidirectional encoder — and reading them leaves the model as it was."""

from __future__ import annotations

import pytest
import torch

from attnlab import views
from attnlab.pipelines import LanguageModelPipeline
from explorer_toys import gpt_checkpoint, tiny_encoder
from views_toys import rope_gqa_gpt


def softmax_of(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = q.double() @ k.double().transpose(-1, -2) / q.shape[-1] ** 0.5  # (L, H, n, n)
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1)


@pytest.mark.parametrize("build", ["learned", "rope_gqa"])
def test_a_gpts_queries_and_keys_make_its_weights(build, tmp_path):
    if build == "learned":
        pipeline = LanguageModelPipeline.from_checkpoint(gpt_checkpoint(tmp_path))
    else:
        pipeline = rope_gqa_gpt()
    text = "to be or not to be"
    before = {name: p.clone() for name, p in pipeline.model.state_dict().items()}
    found = views.queries_and_keys(pipeline, text)
    weights = pipeline.attention(text)
    assert found.tokens == weights.tokens and found.causal
    layers, heads, n, _ = weights.weights.shape
    assert found.q.shape == found.k.shape == (layers, heads, n, pipeline.model.config.d_model // heads)
    assert torch.allclose(softmax_of(found.q, found.k, causal=True), weights.weights.double(), atol=2e-6)
    assert all(torch.equal(before[name], p) for name, p in pipeline.model.state_dict().items())
    assert all(not m._forward_hooks for m in pipeline.model.modules())  # every hook removed


def test_an_encoders_queries_and_keys_make_its_weights():
    pipeline = tiny_encoder()
    sentence = "the animal did n't cross the street because it was too tired"
    found = views.queries_and_keys(pipeline, sentence)
    encoded = pipeline.attention(sentence)
    assert found.tokens == encoded.tokens and not found.causal
    assert torch.allclose(softmax_of(found.q, found.k, causal=False), torch.stack(encoded.attention).double(),
                          atol=2e-6)


def test_the_neuron_views_softmax_is_the_models_weight(tmp_path):
    pipeline = rope_gqa_gpt()
    found = views.queries_and_keys(pipeline, "to be or not")
    view = found.view(layer=1, head=3, query=2)
    keys, weights = view.scores(2)
    assert keys.shape[0] == 3  # causal: the keys up to the query
    model = pipeline.attention("to be or not").weights[1, 3, 2, :3]
    assert torch.allclose(weights.double(), model.double(), atol=2e-6)


def test_queries_and_keys_refuse_what_has_none():
    with pytest.raises(TypeError, match="takes a LanguageModelPipeline or an EncoderPipeline, got str"):
        views.queries_and_keys("gpt", "text")
    with pytest.raises(ValueError, match="text must be a non-empty string"):
        views.queries_and_keys(tiny_encoder(), "  ")
