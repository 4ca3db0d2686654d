"""Attention sinks in SmolLM2-135M-Instruct, what evicting them costs, and what its KV cache weighs.

Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks": trained language
models put a large share of their attention on the first token whatever it is — a place to
park the softmax's mass — so a KV cache that keeps only the last tokens (window attention)
breaks once the first token leaves it, while keeping the first 4 tokens beside the window
(StreamingLLM) restores it. This lab measures, on SmolLM2 and real text:

* **the sink share**: for each layer, the attention on the first token ``α_{i,0}``, averaged
  over heads and over the queries ``i ≥ 1`` (query 0 sees only itself) of tinyshakespeare
  stretches and Multi30k English sentences; beside it what uniform attention over the visible
  keys would give, ``mean_i 1/(i + 1)``;
* **evicting it**: per-token loss on tinyshakespeare read one token at a time through a cache
  of equal size, three ways (:func:`attnlab.generation.streaming.streaming_nll`, positions
  within the cache): the full context (reference), window only, 4 sinks + window; perplexity
  ``exp(mean loss)`` over the tokens read once the cache is full, and over all;
* **the cache's bytes** (Ainslie et al. 2023, "GQA"): the key and value tensors the cache holds
  after a prompt, per token, measured against ``L · 2 · H_kv · d_h · bytes``
  (:func:`attnlab.analysis.kv_cache_bytes`): SmolLM2's 3 key/value heads against a model of the
  same size with one per query head (9), in float32 and bfloat16.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from attnlab.labs.report import LabOptions, LabReport

if TYPE_CHECKING:
    from attnlab.pipelines import LanguageModelPipeline

__all__ = ["SINKS", "SOURCE", "TITLE", "cache_bytes", "first_token_share", "run", "uniform_share"]

TITLE = "Attention sinks: the first token's share, evicting it from the cache, and the KV cache's bytes"
SOURCE = ('Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks"; Ainslie et al. '
          '2023, "GQA"')
SINKS = 4
SHARE_TEXTS = {False: (8, 256, 64), True: (1, 48, 4)}  # quick → (stretches, their tokens, sentences)
STREAM = {False: (4, 1024, 256), True: (1, 64, 24)}  # quick → (rows, tokens, cache size)
PROMPT = 32  # tokens in the cache whose bytes are measured


def first_token_share(weights: list[Tensor]) -> Tensor:
    """``(L,)`` float64: each layer's mean attention on key 0 over the batch, heads and queries
    ``i ≥ 1`` of its ``(B, H, n, n)`` weights."""
    return torch.stack([w[..., 1:, 0].double().mean() for w in weights])


def uniform_share(n: int) -> float:
    """What uniform causal attention puts on key 0, averaged over queries ``1 .. n − 1``:
    ``mean_i 1/(i + 1)``."""
    return sum(1 / (i + 1) for i in range(1, n)) / (n - 1)


def cache_bytes(cache: list) -> int:
    """Bytes of the keys and values a model's cache holds (its filled positions)."""
    return sum(t.numel() * t.element_size() for layer in cache for t in (layer.k, layer.v))


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Sink shares by layer, perplexity under three caches, the cache's bytes; draw them."""
    from attnlab.labs.sinks_plots import plot_losses, plot_shares
    from attnlab.labs.smollm2 import load_smollm2

    report = LabReport("sinks", TITLE, SOURCE)
    pipeline = load_smollm2(options)
    shares = _shares(report, pipeline, options)
    report.figure(plot_shares(out_dir / "sinks_share_by_layer.png", shares),
                  "Attention on the first token by layer (mean over heads and queries), against uniform")
    losses, cache_size = _streaming(report, pipeline, options)
    report.figure(plot_losses(out_dir / "sinks_eviction.png", losses, cache_size),
                  f"Loss by position under three caches of {cache_size} tokens (running mean over 32 tokens)")
    _bytes(report, pipeline.model)
    return report


Shares = dict[str, tuple[Tensor, float]]  # corpus → ((L,) share by layer, uniform attention's share)


def _shares(report: LabReport, pipeline: LanguageModelPipeline, options: LabOptions) -> Shares:
    from attnlab.labs.smollm2 import multi30k_english, shakespeare_ids

    model = pipeline.model
    rows, tokens, sentences = SHARE_TEXTS[options.quick]
    with torch.no_grad():
        text = shakespeare_ids(pipeline, options, tokens, rows)
        _, weights = model(text, return_weights=True)
        out = {"tinyshakespeare": (first_token_share(weights), uniform_share(tokens))}
        total, uniform, queries = 0.0, 0.0, 0
        for sentence in multi30k_english(options, sentences):  # one at a time: no padding
            ids = torch.tensor([pipeline.tokenizer.encode(sentence)])
            _, weights = model(ids, return_weights=True)
            n = ids.shape[1] - 1  # queries 1 .. n, each weighted alike
            total = total + first_token_share(weights) * n
            uniform, queries = uniform + uniform_share(n + 1) * n, queries + n
        out["Multi30k English"] = (total / queries, uniform / queries)
    for name, (share, base) in out.items():
        report.number(f"sink_share_{name.split()[0].lower()}", share.tolist())
        report.number(f"uniform_share_{name.split()[0].lower()}", base)
    what = (f"{rows} tinyshakespeare stretch{'es' if rows > 1 else ''} of {tokens} tokens and the first "
            f"{sentences} English sentences of Multi30k's validation split ({queries} queries)")
    bases = [base for _, base in out.values()]
    table = [[layer + 1, *(float(share[layer]) for share, _ in out.values()), *bases]
             for layer in range(len(out["tinyshakespeare"][0]))]
    report.table(["layer", *(f"{name}: share" for name in out), *(f"{name}: uniform" for name in out)], table,
                 caption=f"Attention on the first token, mean over heads and queries i ≥ 1, on {what}; "
                         "uniform attention's share beside it:")
    return out


def _streaming(
    report: LabReport, pipeline: LanguageModelPipeline, options: LabOptions
) -> tuple[dict[str, Tensor], int]:
    from attnlab.generation.streaming import streaming_nll
    from attnlab.labs.smollm2 import shakespeare_ids

    rows, tokens, size = STREAM[options.quick]
    ids = shakespeare_ids(pipeline, options, tokens, rows)  # (rows, tokens)
    model = pipeline.model
    with torch.no_grad():
        logits = model(ids)  # (rows, tokens, V): the full context, one forward pass
        full = nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    shown = options.progress
    losses = {"full context": full,
              f"window of {size}": streaming_nll(model, ids, window=size, progress=shown),
              f"{SINKS} sinks + window of {size - SINKS}": streaming_nll(
                  model, ids, window=size - SINKS, sinks=SINKS, progress=shown)}
    rows_out = []
    for name, loss in losses.items():  # loss[:, t] predicts token t + 1 with min(t + 1, size) keys
        after, every = math.exp(float(loss[:, size:].mean())), math.exp(float(loss.mean()))
        rows_out.append([name, after, every])
        report.number(f"perplexity_{_key(name)}", after)
    stretches = f"{rows} tinyshakespeare stretch{'es' if rows > 1 else ''} of {tokens} tokens"
    report.table(["cache", f"perplexity, tokens {size + 1}-{tokens - 1} (cache full)", "perplexity, all"],
                 rows_out, caption=f"{stretches}, read one token at a time through a cache of {size} tokens:")
    return losses, size


def _key(name: str) -> str:
    return {"full": "full", "window": "window", str(SINKS): "sinks"}[name.split()[0]]


def _bytes(report: LabReport, model: nn.Module) -> None:
    from attnlab.analysis import kv_cache_bytes
    from attnlab.models import GPT

    mha = GPT(dataclasses.replace(model.config, num_kv_heads=model.config.num_heads)).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(0))
    rows = []
    for name, gpt in (("SmolLM2-135M (GQA)", model), ("same size, one K/V head per query head", mha)):
        for dtype in (torch.float32, torch.bfloat16):
            run_model = gpt if dtype == torch.float32 else copy.deepcopy(gpt).to(dtype)
            cache = run_model.new_cache()
            with torch.no_grad():
                run_model(ids, cache=cache)
            measured = cache_bytes(cache) // PROMPT
            formula = kv_cache_bytes(gpt.config, 1, bytes_per_element=torch.finfo(dtype).bits // 8)
            heads = gpt.config.num_kv_heads or gpt.config.num_heads
            rows.append([name, str(dtype).removeprefix("torch."), heads, measured, formula,
                         measured * gpt.config.block_size / 2**20])
            report.number(f"bytes_per_token_{'gqa' if gpt is model else 'mha'}_{rows[-1][1]}", measured)
            report.number(f"formula_per_token_{'gqa' if gpt is model else 'mha'}_{rows[-1][1]}", formula)
    c = model.config
    report.table(["model", "dtype", "K/V heads", "measured bytes / token", "L·2·H_kv·d_h·bytes",
                  f"MiB at {c.block_size} tokens"], rows,
                 caption=f"The KV cache after a {PROMPT}-token prompt (keys and values of every layer, "
                         f"divided by {PROMPT}); L = {c.num_layers}, d_h = {c.head_dim}:")
