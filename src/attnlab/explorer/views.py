"""The explorer's three views: what the page draws and the API returns, computed by attnlab.

Each view is a JSON-ready dict; attention weights are nested lists rounded to :data:`DIGITS`
decimals (each row still sums to 1 within ``n · 5e-5``). The API (:mod:`.app`) and
``attnlab export-html`` (:mod:`.export`) share them, so the served page and the exported file
draw the same data.

* :func:`translation_view` — a translation and its encoder-decoder attention, every decoder
  layer and head ``(L, H, T, S)``: rows the output subwords and ``<eos>``, columns the source
  subwords (Ba (CSC413 Lecture 8), "Transformer Machine Translation"; Bahdanau's alignment
  maps). Computed as ``attnlab plot-alignment`` computes its picture:
  :meth:`~attnlab.tasks.translator.Translator.alignment` on the model's own translation.
* :func:`generate` — a GPT continuing a prompt (Ba (CSC413 Lecture 8), "Transformer Language
  Pre-training"), one event per sampled token, each with the attention ``(L, H, n_k)`` of
  the query that chose it over its ``n_k`` context tokens — the very weights of the
  KV-cached step that drew the token (:class:`AttentionRecorder`).
* :func:`head_view` — every MiniLM layer and head ``(L, H, n, n)`` over one sentence's word
  pieces (Steinert-Threlkeld (Transformers I), "Attention Visualization: Coreference?").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from attnlab.generation import sample
from attnlab.labs.minilm import encode_sentence
from attnlab.models.encoder import Encoder
from attnlab.tasks.language_model import PlainTextModel, TextStream
from attnlab.tasks.translation import checkpoint_decoding
from attnlab.tasks.translator import Translator

DIGITS = 4

Event = dict[str, Any]


def rounded(weights: Tensor) -> list:
    """``weights`` as nested lists of floats rounded to :data:`DIGITS` decimals."""
    return weights.detach().double().cpu().round(decimals=DIGITS).tolist()


def translation_view(
    translator: Translator, recipe: Mapping[str, Any], source: str, *, beam: int | None = None,
    max_len: int | None = None, before_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Translate ``source`` with beam size ``beam`` and at most ``max_len`` output subwords
    (default: the recipe's) and return the translation with its cross-attention ``attention``
    ``(L, H, T, S)``, the ``source_tokens`` (S) and ``target_tokens`` (T, ending in
    ``<eos>``). A model without attention (Cho et al.'s) has ``attention: null`` and a
    ``note`` saying why."""
    decoding = checkpoint_decoding(recipe, beam_size=beam, max_len=max_len)
    (translation,) = translator.translate([source], decoding, before_step=before_step)
    view: dict[str, Any] = {"source": source, "translation": translation, "beam": decoding.beam_size}
    if not translator.draws_attention:
        try:
            translator.alignment(source, translation)
        except ValueError as why:
            note = str(why)
        return {**view, "source_tokens": [], "target_tokens": [], "layers": 0, "heads": 0,
                "attention": None, "note": note}
    first = translator.alignment(source, translation, layer=0)
    layers = [first, *(translator.alignment(source, translation, layer=i) for i in range(1, first.layers))]
    weights = torch.stack([found.weights for found in layers])  # (L, H, T, S)
    return {
        **view, "source_tokens": first.source, "target_tokens": first.target,
        "layers": weights.shape[0], "heads": weights.shape[1], "attention": rounded(weights),
    }


class AttentionRecorder(nn.Module):
    """A decoder-only language model (``model(idx, cache=..., return_weights=True)``) seen
    through ``forward(idx, cache=...)`` → logits, keeping in :attr:`last` the attention of the
    last query of each call: one ``(H, n_k)`` per layer, ``n_k`` the keys it saw (the cache and
    the new tokens). That query is the one whose logits the sampler draws the next token from."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.config = model, model.config
        self.last: list[Tensor] = []

    def new_cache(self):
        return self.model.new_cache()

    def forward(self, idx: Tensor, *, cache=None) -> Tensor:
        logits, weights = self.model(idx, cache=cache, return_weights=True)  # (1, n, V), L × (1, H, n, n_k)
        self.last = [w[0, :, -1] for w in weights]  # L × (H, n_k)
        return logits


def prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """The token ids of ``prompt``; ``ValueError`` naming what the vocabulary cannot encode."""
    try:
        ids = tokenizer.encode(prompt)
    except ValueError as err:  # a character tokenizer names the characters it lacks
        raise ValueError(f"prompt cannot be encoded: {err}") from None
    if not ids:
        raise ValueError(f"prompt must encode to at least one token, got {prompt!r}")
    return ids


def generate(
    model: nn.Module, tokenizer: Any, prompt: str, emit: Callable[[Event], None], *,
    max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None, seed: int | None,
    before_step: Callable[[], None] | None = None,
) -> str:
    """Sample a continuation of ``prompt`` (KV-cached, the sliding window of
    :mod:`attnlab.generation.state`; the special tokens never drawn, as ``attnlab generate``)
    and pass each step to ``emit`` as it happens; returns the continuation. Events:

    * ``{"event": "prompt", "tokens": [...], "layers": L, "heads": H, "block_size": n}``;
    * one ``{"event": "token", "index": i, "token": s, "text": piece, "context_start": j,
      "attention": (L, H, i - j)}`` a token: ``i`` its position in prompt + continuation,
      ``attention`` the weights of the query that chose it over tokens ``j..i-1``, ``text`` the
      newly decodable text (a byte-level token may complete a character only later);
    * ``{"event": "done", "text": rest, "continuation": text, "new_tokens": count}``.
    """
    ids = prompt_ids(tokenizer, prompt)
    recorder = AttentionRecorder(model)
    emit({"event": "prompt", "tokens": tokenizer.token_strings(ids), "layers": model.config.num_layers,
          "heads": model.config.num_heads, "block_size": model.config.block_size})
    pieces: list[str] = []
    stream = TextStream(tokenizer, pieces.append)
    position = [len(ids)]

    def on_token(row: int, token: int) -> None:
        stream(row, token)
        weights = torch.stack(recorder.last)  # (L, H, n_k)
        index = position[0]
        emit({"event": "token", "index": index, "token": tokenizer.token_strings([token])[0],
              "text": "".join(pieces), "context_start": index - weights.shape[-1],
              "attention": rounded(weights)})
        pieces.clear()
        position[0] += 1

    new = sample(PlainTextModel(recorder), ids, max_new_tokens, temperature=temperature, top_k=top_k,
                 top_p=top_p, seed=seed, use_cache=True, on_token=on_token, before_step=before_step)[0]
    text = tokenizer.decode(new)
    stream.finish(text)
    emit({"event": "done", "text": "".join(pieces), "continuation": text, "new_tokens": len(new)})
    return text


def head_view(encoder: Encoder, text: str) -> dict[str, Any]:
    """MiniLM's self-attention over ``text``: ``tokens`` (n word pieces, ``[CLS]`` … ``[SEP]``)
    and ``attention`` ``(L, H, n, n)``, rows the queries."""
    encoded = encode_sentence(encoder, text)
    weights = torch.stack(encoded.attention)  # (L, H, n, n)
    return {"text": text, "tokens": encoded.tokens, "layers": weights.shape[0], "heads": weights.shape[1],
            "attention": rounded(weights)}
