"""Tiny models for the notebook views' tests (``tests/views``), each built in well under a second:
the explorer's translator, GPT and encoder (``explorer_toys``), and here

* :func:`rnn_translator` — Bahdanau et al.'s GRU encoder-decoder with additive attention (one
  layer, one head: an alignment ``(1, 1, T, S)``) over the explorer's word vocabulary;
* :func:`captioner` — a random Show, Attend and Tell over 16 × 16 grey images (a 4 × 4 grid);
* :func:`ntm` — a random Neural Turing Machine of 12 locations;
* :func:`rope_gqa_gpt` — a GPT with rotary positions and grouped-query attention (4 query heads
  sharing 2 key/value heads), as SmolLM2 is built;

and what the tests read a view's HTML with: :class:`Parsed` (ids, links, scripts),
:func:`payload_of` (its JSON), :func:`decoded_heads` (its attention records, decoded by the
explorer's own decoder) and :func:`within_a_step` (the quantization's bound).
"""

from __future__ import annotations

import base64
import json
import zlib
from html.parser import HTMLParser

import torch

from attnlab.data import CharTokenizer
from attnlab.data.tokenizers import WordTokenizer
from attnlab.explorer.quantize import LEVELS, dequantize
from attnlab.models import GPT, GPTConfig, ShowAttendTell, ShowAttendTellConfig
from attnlab.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from attnlab.models.ntm import NTM, NTMConfig
from attnlab.pipelines import CaptioningPipeline, LanguageModelPipeline, TranslationPipeline
from explorer_toys import CHARS, ENGLISH, GERMAN


def rnn_translator() -> TranslationPipeline:
    tokenizer = WordTokenizer.train(GERMAN + ENGLISH)
    torch.manual_seed(0)
    config = AttentionSeq2SeqConfig(src_vocab_size=tokenizer.vocab_size, embed_dim=8, hidden_dim=16,
                                    encoder_dim=8, attention_dim=8, dropout=0.0, share_embeddings=True)
    return TranslationPipeline(AttentionSeq2Seq(config).eval(), tokenizer, tokenizer)


def captioner() -> CaptioningPipeline:
    tokenizer = WordTokenizer.train(["a big seven", "two small threes and a one"])
    torch.manual_seed(0)
    config = ShowAttendTellConfig(vocab_size=tokenizer.vocab_size, image_size=16, conv_channels=(4, 8),
                                  feature_dim=8, embed_dim=8, hidden_dim=16, attention_dim=8, dropout=0.0)
    return CaptioningPipeline(ShowAttendTell(config).eval(), tokenizer, recipe={"eval": {"max_len": 6}})


def ntm() -> NTM:
    torch.manual_seed(0)
    return NTM(NTMConfig(input_dim=5, output_dim=4, controller_dim=16, memory_size=12, memory_width=6)).eval()


def rope_gqa_gpt() -> LanguageModelPipeline:
    tokenizer = CharTokenizer.train(CHARS)
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=32, d_model=32, num_heads=4,
                       num_kv_heads=2, num_layers=2, positional="rope", tie_output=False)
    return LanguageModelPipeline(GPT(config).eval(), tokenizer)


class Parsed(HTMLParser):
    """Every element's id, every ``src`` / ``href`` attribute and each script's text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script: dict | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        self.links += [attrs[k] for k in ("src", "href") if k in attrs]
        if tag == "script":
            self._in_script = attrs

    def handle_data(self, data):
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


def payload_of(html: str) -> dict:
    (data,) = [text for attrs, text in Parsed(html).scripts if attrs.get("type") == "application/json"]
    return json.loads(data)


def causal_weights(layers: int, heads: int, n: int, seed: int = 0) -> torch.Tensor:
    scores = torch.randn(layers, heads, n, n, generator=torch.Generator().manual_seed(seed)) * 3
    return scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)


def decoded_heads(payload: dict) -> torch.Tensor:
    """The payload's records as the page reads them: ``(L, H, n_q, n_k)``."""
    n, n_k = len(payload["tokens"]), len(payload.get("keys", payload["tokens"]))
    heads = [dequantize(zlib.decompress(base64.b64decode(r)), n, payload["causal"], n_k)
             for r in payload["records"]]
    return torch.stack(heads).view(payload["layers"], payload["heads"], n, n_k)


def within_a_step(decoded: torch.Tensor, exact: torch.Tensor) -> bool:
    step = exact.amax(dim=-1, keepdim=True) / LEVELS / 2  # each row's half step
    return bool(((decoded.double() - exact.double()).abs() <= step + 1e-7).all())
