"""``views.show`` on what each attnlab pipeline and model returns: the view it picks, drawing the
very weights the pipeline computed (decoded from the view's payload, within a quantization
step) — the GPT's, the Transformer's and the RNN translator's, MiniLM-style encoder's, the
captioner's, and an NTM's trace."""

from __future__ import annotations

import base64

import numpy as np
import pytest
import torch

from attnlab import views
from attnlab.explorer.quantize import LEVELS, dequantize
from attnlab.pipelines import LanguageModelPipeline, TranslationPipeline
from explorer_toys import gpt_checkpoint, tiny_encoder, translator_checkpoint
from views_toys import captioner, decoded_heads, ntm, payload_of, rnn_translator, within_a_step


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> LanguageModelPipeline:
    return LanguageModelPipeline.from_checkpoint(gpt_checkpoint(tmp_path_factory.mktemp("lm")))


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> TranslationPipeline:
    return TranslationPipeline.from_checkpoint(translator_checkpoint(tmp_path_factory.mktemp("mt")))


def test_a_language_models_attention_is_its_model_view(lm):
    found = lm.attention("to be or not")
    view = views.show(found)
    payload = payload_of(view._repr_html_())
    assert isinstance(view, views.AttentionView) and view.kind == "map" and payload.get("grid") is not False
    assert payload["tokens"] == found.tokens and payload["causal"] and "headLabels" in payload
    assert (payload["layers"], payload["heads"]) == tuple(found.weights.shape[:2])
    assert within_a_step(decoded_heads(payload), found.weights)


@pytest.mark.parametrize("make", ["transformer", "rnn"])
def test_a_translations_attention_is_its_alignment(make, translator):
    pipeline = translator if make == "transformer" else rnn_translator()
    found = pipeline.attention("Ein Hund läuft über die Wiese.", "A dog runs across the grass.")
    payload = payload_of(views.show(found)._repr_html_())
    assert payload["tokens"] == found.target and payload["keys"] == found.source
    assert payload["palette"] == "grey" and payload["axes"] == ["target", "source"]
    layers, heads = found.weights.shape[:2]
    decoded = decoded_heads(payload)
    assert within_a_step(decoded[:, :heads], found.weights)
    if heads > 1:  # the mean of each layer's heads, last
        assert within_a_step(decoded[:, heads], found.weights.mean(dim=1))
    else:
        assert (layers, heads) == (1, 1) and decoded.shape[1] == 1  # Bahdanau's: one matrix


def test_an_encoders_attention_is_its_head_view():
    found = tiny_encoder().attention("the animal did n't cross the street")
    view = views.show(found)
    payload = payload_of(view._repr_html_())
    assert view.kind == "lines" and payload["tokens"] == found.tokens and not payload["causal"]
    assert view.title == found.sentence
    assert within_a_step(decoded_heads(payload), torch.stack(found.attention))


def test_a_captions_maps_are_its_caption_view_and_need_the_image():
    pipeline = captioner()
    image = torch.rand(1, 16, 16, generator=torch.Generator().manual_seed(0))
    ids = pipeline.tokenizer.encode("a big seven")
    found = pipeline.attention(image, ids)
    with pytest.raises(ValueError, match=r"holds no image: show\(maps, image=image\)"):
        views.show(found)
    payload = payload_of(views.show(found, image=image)._repr_html_())
    assert payload["words"] == ["a", "big", "seven", "<eos>"] and payload["grid"] == [4, 4]
    decoded = dequantize(base64.b64decode(payload["maps"]), 4, False, 16)
    assert within_a_step(decoded, found.maps.reshape(4, 16))


def test_an_ntm_trace_is_its_memory_view():
    model, x = ntm(), (torch.rand(2, 7, 5, generator=torch.Generator().manual_seed(0)) > 0.5).float()
    logits, trace = model(x, return_trace=True)
    payload = payload_of(views.show((logits, trace), inputs=x, index=1)._repr_html_())
    panels = {p["name"]: p for p in payload["panels"]}
    assert list(panels) == ["inputs", "outputs", "add vectors", "write weightings", "read weightings"]
    for name, exact in (("read weightings", trace.read_weights[1, :, 0].T),
                        ("outputs", torch.sigmoid(logits[1]).T)):
        panel = panels[name]
        span = panel["hi"] - panel["lo"]
        levels = np.frombuffer(base64.b64decode(panel["data"]), dtype=np.uint8).reshape(exact.shape)
        values = panel["lo"] + span * levels / LEVELS
        assert np.abs(values - exact.detach().numpy()).max() <= span / (2 * LEVELS) + 1e-6
    assert views.show(trace).payload["panels"][0]["name"] == "add vectors"  # the trace alone: no in/outputs
    with pytest.raises(ValueError, match=r"index must be an integer in \[0, 1\]"):
        views.show(trace, index=2)


def test_arrays_views_and_queries_pass_through_and_anything_else_is_refused(lm):
    weights = torch.rand(4, 4).softmax(-1)
    assert views.show(weights).kind == "map" and views.show(weights.numpy()).kind == "map"
    view = views.heatmap(weights)
    assert views.show(view) is view
    assert views.show(views.queries_and_keys(lm, "to be")).kind == "neuron"
    with pytest.raises(TypeError, match="views.show has no view of dict"):
        views.show({"weights": weights})
