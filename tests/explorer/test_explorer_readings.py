"""The attention map over the API (``explorer/readings.py``, ``POST /api/attention`` and ``GET
/api/attention/ID/LAYER/HEAD``): the overview, then each head's record, which decodes to the
pipeline's own float weights within half a step; the readings the server keeps; the caps; the
file of ``attnlab export-html``, whose records inflate to the same bytes; and SmolLM2's 30 × 9
heads over a 64-token text (``make llm``)."""

from __future__ import annotations

import base64
import json
import zlib

import numpy as np
import pytest
import torch

from attnlab.explorer.export import export_views
from attnlab.explorer.quantize import LEVELS, dequantize, record_size
from attnlab.explorer.readings import Readings, read_text
from attnlab.explorer.requests import MAX_READ_CHARS, MAX_READ_TOKENS
from explorer_toys import api_client
from smollm2_fixtures import needs_llm

TEXT = "To be, or not"  # 13 characters: inside the toy GPT's block of 16


def post(client, body):
    return client.post("/api/attention", content=json.dumps(body),
                       headers={"content-type": "application/json"})


def decoded_heads(client, view) -> torch.Tensor:
    """Every head of a reading, fetched one by one and decoded: ``(L, H, n, n)``."""
    heads = []
    for layer in range(view["layers"]):
        for head in range(view["heads"]):
            response = client.get(f"/api/attention/{view['id']}/{layer}/{head}")
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/octet-stream"
            assert len(response.content) == view["record_bytes"]
            heads.append(dequantize(response.content, view["n"], view["causal"]))
    return torch.stack(heads).view(view["layers"], view["heads"], view["n"], view["n"])


def within_half_a_step(decoded: torch.Tensor, exact: torch.Tensor) -> bool:
    step = exact.amax(dim=-1, keepdim=True) / LEVELS
    return bool(((decoded.double() - exact.double()).abs() <= step / 2 + 1e-7).all())


def test_the_overview_then_each_head_as_the_pipeline_computes_it(client, models):
    response = post(client, {"text": TEXT})
    assert response.status_code == 200
    assert response.headers["server-timing"].startswith("model;dur=")
    view = response.json()
    exact = models.get("gpt").pipeline.attention(TEXT)
    assert view["tokens"] == exact.tokens and view["n"] == len(TEXT) and view["dropped"] == 0
    assert (view["layers"], view["heads"], view["causal"]) == (2, 2, True)
    assert view["record_bytes"] == record_size(len(TEXT), causal=True)
    assert within_half_a_step(decoded_heads(client, view), exact.weights)
    t = view["thumbnail"]["size"]
    assert t == len(TEXT) and len(base64.b64decode(view["thumbnail"]["data"])) == 2 * 2 * t * t
    again = post(client, {"text": TEXT, "checkpoint": "gpt"})  # held: the same reading, no model call
    assert again.json() == view and again.headers["server-timing"] == "model;dur=0.0"


def test_a_text_longer_than_the_context_is_read_from_its_end(client, models):
    text = "Now is the winter of our discontent"
    view = post(client, {"text": text}).json()
    assert view["n"] == 16 and view["dropped"] == len(text) - 16  # block_size 16, one token a character
    assert "".join(view["tokens"]) == text[-16:]


@pytest.mark.parametrize(("path", "status", "message"), [
    ("/api/attention/{id}/2/0", 404, "no layer 2, head 0: this model has 2 layers × 2 heads, counted from 0"),
    ("/api/attention/{id}/0/7", 404, "no layer 0, head 7:"),
    ("/api/attention/nothing-here/0/0", 404, "no reading 'nothing-here' is held (the server keeps the last"),
    ("/api/attention/{id}/-1/0", 404, "no such page"),
])
def test_a_head_that_is_not_there_is_a_404(client, path, status, message):
    reading = post(client, {"text": TEXT}).json()["id"]
    response = client.get(path.format(id=reading))
    assert response.status_code == status and response.json()["error"].startswith(message)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"text": "x" * (MAX_READ_CHARS + 1)}, 413, "text has 4001 characters; the limit is 4000"),
    ({"text": "a" * (MAX_READ_TOKENS + 1)}, 413, "text has 513 tokens; the limit is 512"),
    ({"text": "€"}, 422, "text cannot be encoded:"),
    ({"text": " "}, 422, "text must not be empty"),
    ({"text": "Hi", "layer": 1}, 422, "unknown field 'layer'; this endpoint takes text, checkpoint"),
    ({"text": "Hi", "checkpoint": "nope"}, 404, "unknown checkpoint 'nope'"),
])
def test_what_the_attention_map_refuses(client, body, status, message):
    response = post(client, body)
    assert response.status_code == status and response.json()["error"].startswith(message), response.text


def test_the_server_keeps_its_last_readings(models):
    readings, pipeline = Readings(kept=2), models.get("gpt").pipeline
    first, second, third = (readings.add(read_text(pipeline, text, "gpt")) for text in ("Hi", "Ho", "Ha"))
    assert readings.find(first.id) is None and readings.get(third.id) is third
    assert readings.find(second.id) is second  # found: now the most recent, so "Hu" pushes out "Ha"
    readings.add(read_text(pipeline, "Hu", "gpt"))
    assert readings.find(third.id) is None and readings.find(second.id) is second
    with pytest.raises(ValueError, match="read the text again"):
        readings.get(third.id)


def test_the_exported_reading_inflates_to_the_served_records(client, models):
    view = post(client, {"text": TEXT}).json()
    exported = export_views(models, prompt="Hi", max_new_tokens=2, text=TEXT)["attention"]
    assert exported["request"] == {"text": TEXT, "checkpoint": "gpt"}
    embedded = exported["view"]
    assert {k: v for k, v in embedded.items() if k not in ("records", "compressed")} == view
    assert embedded["compressed"] == "deflate" and len(embedded["records"]) == 4
    for index, packed in enumerate(embedded["records"]):
        served = client.get(f"/api/attention/{view['id']}/{index // 2}/{index % 2}").content
        assert zlib.decompress(base64.b64decode(packed)) == served


@needs_llm
def test_smollm2_answers_a_64_token_text_with_30_layers_of_9_heads(smollm2, two_threads, monkeypatch):
    """``--gpt smollm2`` loads through ``LanguageModelPipeline.from_pretrained`` (the session's
    pipeline handed back, not loaded twice), and the server reads 64 tokens with it."""
    from attnlab.explorer.models import ModelSet, load_gpt
    from attnlab.pipelines import LanguageModelPipeline

    asked = []
    monkeypatch.setattr(LanguageModelPipeline, "from_pretrained",
                        lambda source, **kwargs: asked.append((source, kwargs)) or smollm2)
    served = load_gpt("smollm2", command="serve")
    assert asked == [("smollm2", {"device": "cpu", "taker": "serve --gpt"})]
    assert (served.name, served.info["layers"], served.info["heads"]) == ("smollm2", 30, 9)
    assert served.path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")  # what serve prints
    text = " ".join(["The cat sat on the mat and looked at the dog."] * 6)
    ids = smollm2.prompt_ids(text)[:64]
    text = smollm2.tokenizer.decode(ids)
    assert len(smollm2.prompt_ids(text)) == 64
    models = ModelSet([served])
    with api_client(models, raise_errors=True) as client:
        view = post(client, {"text": text}).json()
        assert (view["n"], view["layers"], view["heads"], view["dropped"]) == (64, 30, 9, 0)
        assert view["tokens"] == smollm2.tokenizer.token_strings(ids)
        exact = smollm2.attention(text).weights
        for layer, head in ((0, 0), (14, 4), (29, 8)):
            record = client.get(f"/api/attention/{view['id']}/{layer}/{head}").content
            assert within_half_a_step(dequantize(record, 64, causal=True), exact[layer, head])
        assert len(np.frombuffer(base64.b64decode(view["thumbnail"]["data"]), np.uint8)) == 30 * 9 * 32 * 32


def test_a_token_guards_the_records_too(models):
    from attnlab.explorer.access import Access

    token = "correct-horse-battery-staple"
    bearer = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    with api_client(models, access=Access(token=token)) as client:
        answer = client.post("/api/attention", content=json.dumps({"text": TEXT}), headers=bearer)
        reading = answer.json()["id"]
        assert client.get(f"/api/attention/{reading}/0/0", headers=bearer).status_code == 200
        refused = client.get(f"/api/attention/{reading}/0/0")
        assert refused.status_code == 401 and refused.json()["error"].startswith("this explorer's API needs")
