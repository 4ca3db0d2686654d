"""The notebook views' HTML: self-contained (no URL fetched, no requirejs, no CDN), unique ids
however many views a page holds, and the data the page decodes equal to the arrays given — each
payload decoded here in Python (the explorer's own decoder for the records) and compared with the
weights within the quantization step."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
import torch

from attnlab import views
from attnlab.explorer.quantize import LEVELS, dequantize
from views_toys import Parsed, causal_weights, decoded_heads, payload_of, within_a_step

SVG_NAMESPACE = "http://www.w3.org/2000/svg"  # the SVG downloads' xmlns: a name, never fetched
TOKENS = "the cat sat on the mat because tired".split()


def every_view() -> list:
    weights = causal_weights(2, 3, 8)
    q, k = torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 16)
    maps = torch.rand(4, 4, 4)
    reads, writes = torch.rand(10, 12).softmax(-1), torch.rand(10, 12).softmax(-1)
    return [views.heatmap(weights, TOKENS),
            views.alignment(torch.rand(5, 7).softmax(-1), list("abcdefg"), list("VWXYZ")),
            views.model_view(TOKENS, weights), views.head_view(TOKENS, weights),
            views.neuron_view(TOKENS, q, k, 1, 2, causal=True),
            views.caption_attention(torch.rand(1, 16, 16), ["a", "big", "seven", "<eos>"], maps / maps.sum()),
            views.ntm_memory(reads, writes, adds=torch.rand(10, 6) * 2 - 1)]


@pytest.mark.parametrize("view", every_view(), ids=lambda v: type(v).__name__ + "-" + v.kind)
def test_a_view_is_self_contained(view):
    html = view._repr_html_()
    parsed = Parsed(html)
    assert parsed.links == []  # no <script src>, no <link href>, no <img src>
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {SVG_NAMESPACE}
    for word in ("require(", "requirejs(", "require.config", "define(", "import(", "fetch(", "XMLHttpRequest",
                 "@import", "url("):  # as a call or a name of its own (a function prefetch() is neither)
        assert not re.search(r"(?<![\w$])" + re.escape(word), html), word
    assert [attrs for attrs, _ in parsed.scripts if "src" in attrs] == []
    payload = payload_of(html)
    assert payload["kind"] == view.kind and html.count("window.attnlabAttention.views.boot(") == 1


def test_ids_are_unique_across_views_and_across_showing_one_view_twice():
    first, second = every_view()[:2]
    html = first._repr_html_() + second._repr_html_() + first._repr_html_()
    ids = Parsed(html).ids
    assert len(ids) == 3 and len(set(ids)) == 3
    assert all(f'boot("{i}"' in html for i in ids)  # each view mounts on its own element


def test_heatmap_round_trips_every_head_and_the_mean_within_a_step():
    weights = causal_weights(2, 3, 9, seed=1)
    payload = payload_of(views.heatmap(weights, TOKENS + ["."])._repr_html_())
    assert payload["causal"] and payload["headLabels"] == ["1", "2", "3", "mean"] and "keys" not in payload
    assert (payload["layer"], payload["head"]) == (1, 3)  # the last layer's mean, first
    decoded = decoded_heads(payload)
    assert decoded.shape == (2, 4, 9, 9)
    assert within_a_step(decoded[:, :3], weights)
    assert within_a_step(decoded[:, 3], weights.mean(dim=1))
    assert torch.equal(decoded.triu(1), torch.zeros_like(decoded))  # never sent, drawn grey


def test_cross_attention_round_trips_with_its_own_keys():
    weights = torch.rand(2, 2, 3, 5).softmax(-1)
    src, tgt = ["ein", "Hund", "läuft", ".", "<eos>"], ["a", "dog", "<eos>"]
    payload = payload_of(views.heatmap(weights, src, tgt)._repr_html_())
    assert payload["tokens"] == tgt and payload["keys"] == src and not payload["causal"]
    assert within_a_step(decoded_heads(payload)[:, :2], weights)


def test_alignment_of_an_rnn_is_one_matrix_in_grey():
    weights = torch.rand(4, 6).softmax(-1)
    view = views.alignment(weights, list("abcdef"), list("wxyz"))
    payload = payload_of(view._repr_html_())
    assert (payload["layers"], payload["heads"]) == (1, 1)
    assert (payload["palette"], payload["scale"]) == ("grey", "linear")
    assert payload["axes"] == ["target", "source"] and within_a_step(decoded_heads(payload)[0, 0], weights)


def test_neuron_view_carries_the_heads_q_and_k_exactly():
    q, k = torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 16)
    payload = payload_of(views.neuron_view(TOKENS, q, k, -1, 1)._repr_html_())
    assert (payload["layer"], payload["head"], payload["d"], payload["query"]) == (1, 1, 16, 7)
    for name, values in (("q", q), ("k", k)):
        sent = np.frombuffer(base64.b64decode(payload[name]), dtype="<f4").reshape(8, 16)
        assert np.array_equal(sent, values[1, 1].numpy())


def test_caption_view_round_trips_the_image_and_each_words_map():
    image, maps = torch.rand(3, 12, 10), torch.rand(3, 2, 5)
    payload = payload_of(views.caption_attention(image, ["a", "one", "<eos>"], maps)._repr_html_())
    sent = payload["image"]
    pixels = np.frombuffer(base64.b64decode(sent["data"]), dtype=np.uint8).reshape(12, 10, 3) / LEVELS
    assert (sent["width"], sent["height"], sent["channels"]) == (10, 12, 3)
    assert np.abs(pixels - image.permute(1, 2, 0).numpy()).max() <= 0.5 / LEVELS + 1e-7
    assert payload["grid"] == [2, 5]
    decoded = dequantize(base64.b64decode(payload["maps"]), 3, False, 10)
    assert within_a_step(decoded, maps.reshape(3, 10))


def test_ntm_view_round_trips_every_panel_within_a_step():
    reads, writes = torch.rand(9, 2, 12).softmax(-1), torch.rand(9, 12).softmax(-1)
    adds, inputs = torch.rand(9, 6) * 2 - 1, (torch.rand(9, 5) > 0.5).float()
    view = views.ntm_memory(reads, writes, adds=adds, inputs=inputs, locations=(2, 10))
    payload = payload_of(view._repr_html_())
    names = [p["name"] for p in payload["panels"]]
    assert names == ["inputs", "add vectors", "write weightings", "read weightings, head 1",
                     "read weightings, head 2"]
    expected = [inputs.T, adds.T, writes[:, 2:10].T, reads[:, 0, 2:10].T, reads[:, 1, 2:10].T]
    for panel, exact in zip(payload["panels"], expected, strict=True):
        levels = np.frombuffer(base64.b64decode(panel["data"]), dtype=np.uint8).reshape(panel["rows"], 9)
        values = panel["lo"] + (panel["hi"] - panel["lo"]) * levels / LEVELS
        assert np.abs(values - exact.numpy()).max() <= (panel["hi"] - panel["lo"]) / (2 * LEVELS) + 1e-6
    assert payload["panels"][1]["signed"] and payload["panels"][2]["first"] == 2


@pytest.mark.parametrize(("call", "message"), [
    (lambda: views.heatmap(torch.rand(2, 3, 4, 5, 6)), r"weights must be \(n_q, n_k\), \(H, n_q, n_k\) or"),
    (lambda: views.heatmap(-torch.rand(3, 3)), "weights must be ≥ 0"),
    (lambda: views.heatmap(torch.full((3, 3), float("nan"))), "weights must be finite, got 9 NaN"),
    (lambda: views.heatmap(torch.rand(3, 3), ["a", "b"]), "x_labels has 2 labels but the weights have 3"),
    (lambda: views.heatmap(torch.rand(3, 3), "abc"), "must be a list of 3 labels, got one string"),
    (lambda: views.model_view(["a", "b"], torch.rand(2, 3)), "self-attention weights must be square"),
    (lambda: views.model_view(["a"] * 3, torch.rand(2, 2, 3, 3), layer=2),
     r"layer must be an integer in \[-2, 1\]"),
    (lambda: views.heatmap(torch.rand(3, 3), scale="cubic"), "scale must be 'log', 'sqrt', 'linear' or"),
    (lambda: views.neuron_view(["a"] * 4, torch.rand(1, 2, 4, 8), torch.rand(1, 2, 4, 8), 0, 2),
     r"head must be an integer in \[-2, 1\], got 2"),
    (lambda: views.caption_attention(torch.rand(16, 16) * 2, ["a"], torch.rand(1, 4, 4)),
     r"image must be in \[0, 1\]"),
    (lambda: views.caption_attention(torch.rand(16, 16), ["a"], torch.rand(2, 4, 4)), "words has 1 labels"),
    (lambda: views.ntm_memory(torch.rand(5, 8), torch.rand(4, 8)), "writes must cover the reads' 5 steps"),
    (lambda: views.ntm_memory(torch.rand(5, 8), torch.rand(5, 8), locations=(4, 9)), "locations must be"),
])
def test_bad_input_is_refused_in_one_line(call, message):
    with pytest.raises(ValueError, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("view", every_view(), ids=lambda v: type(v).__name__ + "-" + v.kind)
def test_the_png_is_a_picture_and_save_writes_each_format(view, tmp_path):
    from PIL import Image

    png = view._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    picture = Image.open(__import__("io").BytesIO(png))
    assert picture.width > 100 and picture.height > 100
    page = view.save(tmp_path / "view.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and payload_of(page)["kind"] == view.kind
    assert view.save(tmp_path / "view.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
