"""The explorer's three views: what the page draws and the API returns, computed by attnlab.

Each view is a JSON-ready dict; attention weights are nested lists rounded to :data:`DIGITS`
decimals (each row still sums to 1 within ``n · 5e-5``). The API (:mod:`.app`) and
``attnlab export-html`` (:mod:`.export`) share them, so the served page and the exported file
draw the same data.

* :func:`translation_view` — a translation and its encoder-decoder attention, every decoder
  layer and head ``(L, H, T, S)``: rows the output subwords and ``<eos>``, columns the source
  subwords (Ba (CSC413 Lecture 8), "Transformer Machine Translation"; Bahdanau's alignment
  maps). Computed as ``attnlab plot-alignment`` computes its picture:
  :meth:`~attnlab.pipelines.TranslationPipeline.attention` on the model's own translation.
* :func:`generate` — a GPT continuing a prompt (Ba (CSC413 Lecture 8), "Transformer Language
  Pre-training"), one event per sampled token, each with the attention ``(L, H, n_k)`` of
  the query that chose it over its ``n_k`` context tokens — the very weights of the
  KV-cached step that drew the token (:meth:`~attnlab.pipelines.LanguageModelPipeline.generate`
  watched).
* :func:`head_view` — every MiniLM layer and head ``(L, H, n, n)`` over one sentence's word
  pieces (Steinert-Threlkeld (Transformers I), "Attention Visualization: Coreference?").

A GPT's attention map over up to 512 tokens, far too large for nested lists (SmolLM2: 283 MB as
float32), is not one of these: :mod:`.readings` keeps it and sends it a head at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from attnlab.pipelines import EncoderPipeline, LanguageModelPipeline, TranslationPipeline

DIGITS = 4

Event = dict[str, Any]


def rounded(weights: Tensor) -> list:
    """``weights`` as nested lists of floats rounded to :data:`DIGITS` decimals."""
    return weights.detach().double().cpu().round(decimals=DIGITS).tolist()


def translation_view(
    translator: TranslationPipeline, source: str, *, beam: int | None = None, max_len: int | None = None,
    before_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Translate ``source`` with beam size ``beam`` and at most ``max_len`` output subwords
    (default: the checkpoint's) and return the translation with its cross-attention
    ``attention`` ``(L, H, T, S)``, the ``source_tokens`` (S) and ``target_tokens`` (T, ending
    in ``<eos>``). A model without attention (Cho et al.'s) has ``attention: null`` and a
    ``note`` saying why."""
    decoding = translator.settings(beam_size=beam, max_len=max_len)
    (translation,) = translator.translate([source], decoding, before_step=before_step)
    view: dict[str, Any] = {"source": source, "translation": translation, "beam": decoding.beam_size}
    if not translator.draws_attention:
        try:
            translator.attention(source, translation)
        except ValueError as why:
            note = str(why)
        return {**view, "source_tokens": [], "target_tokens": [], "layers": 0, "heads": 0,
                "attention": None, "note": note}
    found = translator.attention(source, translation)
    weights = found.weights  # (L, H, T, S)
    return {
        **view, "source_tokens": found.source, "target_tokens": found.target,
        "layers": weights.shape[0], "heads": weights.shape[1], "attention": rounded(weights),
    }


def generate(
    pipeline: LanguageModelPipeline, prompt: str, emit: Callable[[Event], None], *,
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
    ids, tokenizer, config = pipeline.prompt_ids(prompt), pipeline.tokenizer, pipeline.model.config
    emit({"event": "prompt", "tokens": tokenizer.token_strings(ids), "layers": config.num_layers,
          "heads": config.num_heads, "block_size": config.block_size})
    pieces: list[str] = []
    position = [len(ids)]

    def watch(token: int, weights: Tensor) -> None:  # weights (L, H, n_k)
        index = position[0]
        emit({"event": "token", "index": index, "token": tokenizer.token_strings([token])[0],
              "text": "".join(pieces), "context_start": index - weights.shape[-1],
              "attention": rounded(weights)})
        pieces.clear()
        position[0] += 1

    text = pipeline.generate(prompt, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                             seed=seed, write=pieces.append, watch=watch, before_step=before_step)
    new_tokens = position[0] - len(ids)
    emit({"event": "done", "text": "".join(pieces), "continuation": text, "new_tokens": new_tokens})
    return text


def head_view(encoder: EncoderPipeline, text: str) -> dict[str, Any]:
    """MiniLM's self-attention over ``text``: ``tokens`` (n word pieces, ``[CLS]`` … ``[SEP]``)
    and ``attention`` ``(L, H, n, n)``, rows the queries."""
    encoded = encoder.attention(text)
    weights = torch.stack(encoded.attention)  # (L, H, n, n)
    return {"text": text, "tokens": encoded.tokens, "layers": weights.shape[0], "heads": weights.shape[1],
            "attention": rounded(weights)}
