"""The language-model recipe: TOML tables mapped 1:1 onto dataclasses (the task is
:mod:`attnlab.tasks.language_model`; the shape of every recipe: :mod:`attnlab.tasks.recipe`).

    task = "language_model"
    [data]   corpus (a preset or your files), val, text_field, tokenizer ("char" | "word" |
             "bpe"), vocab_size (bpe), tokenizer_file, train_fraction, block_size,
             batch_size, seed, errors
    [model]  type = "gpt" (default), "lstm" or "lstmn", and that model config's fields except
             vocab_size (from the tokenizer) and block_size (from data)
    [optim]  OptimConfig fields: lr, min_lr, warmup, decay_steps (default train.max_steps),
             weight_decay, decay_embeddings, betas (AdamW and warmup + cosine by default)
    [train]  TrainConfig fields (max_steps is required: the windows never run out)
    [eval]   eval_iters (random val windows per periodic eval), sample_chars
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlab.data.corpora import ERRORS
from attnlab.data.presets import TEXT_PRESETS
from attnlab.data.sources import resolved
from attnlab.data.tokenizers import SMALLEST_BPE, SMALLEST_VOCABULARY
from attnlab.tasks.recipe import ModelTable, Recipe, corpus_paths
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive

TOKENIZERS = ("char", "word", "bpe")


@dataclass
class LMData:
    """``[data]``: the text, its tokenizer and the windows.

    ``corpus`` is a preset (``tinyshakespeare``) or your own text: a file, a folder, a glob or
    a list of them; plain or gzip; JSON lines take their text from ``text_field``
    (:mod:`attnlab.data.sources`). ``val`` names validation files; without them the last
    ``1 - train_fraction`` of the text validates. ``tokenizer`` is learned on the training
    text — ``char`` (every character of the text), ``word`` or ``bpe`` (byte-level, of
    ``vocab_size``) — unless ``tokenizer_file`` gives a ``tokenizer.json`` to use as it is.
    ``errors = "replace"`` reads bytes that are not UTF-8 as U+FFFD (counted) instead of
    refusing them."""

    corpus: str | list[str] = "tinyshakespeare"
    val: str | list[str] = ""
    text_field: str = "text"
    tokenizer: str = "char"
    vocab_size: int = 2048  # BPE only
    tokenizer_file: str = ""
    train_fraction: float = 0.9
    block_size: int = 256
    batch_size: int = 64
    seed: int = 1337
    errors: str = "strict"

    def __post_init__(self) -> None:
        self.corpus, self.val = corpus_paths("data.corpus", self.corpus, TEXT_PRESETS, self.val)
        if self.tokenizer_file:
            self.tokenizer_file = str(resolved(self.tokenizer_file))
        check_choice("data.tokenizer", self.tokenizer, TOKENIZERS)
        check_choice("data.errors", self.errors, ERRORS)
        if not 0.0 < self.train_fraction < 1.0:
            raise ValueError(f"data.train_fraction must be in (0, 1), got {self.train_fraction}")
        for name in ("block_size", "batch_size", "vocab_size"):
            check_positive(f"data.{name}", getattr(self, name))


@dataclass
class LMOptim(OptimConfig):
    """``[optim]``: :class:`~attnlab.training.OptimConfig`, by default AdamW (decay / no-decay
    groups, β = (0.9, 0.99), weight decay 0.1) with linear warmup and cosine decay to 1e-4."""

    min_lr: float = 1e-4
    weight_decay: float = 0.1
    betas: list[float] | None = field(default_factory=lambda: [0.9, 0.99])


@dataclass
class LMEval:
    """``[eval]``: random validation windows per periodic evaluation; the sample (its length in
    tokens, seed, temperature and top-k) written to ``results.json``."""

    eval_iters: int = 20
    sample_chars: int = 300
    sample_seed: int = 0
    temperature: float = 0.8
    top_k: int | None = 200

    def __post_init__(self) -> None:
        check_positive("eval.eval_iters", self.eval_iters)
        check_positive("eval.sample_chars", self.sample_chars)
        check_positive("eval.temperature", self.temperature, allow_zero=True)
        if self.top_k is not None:
            check_positive("eval.top_k", self.top_k)


@dataclass
class LMRecipe(Recipe):
    """A whole language-model recipe (one TOML file)."""

    data: LMData
    model: ModelTable
    optim: LMOptim
    eval: LMEval

    task_name = "language_model"

    @classmethod
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        return {"block_size": tables["data"].block_size}

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The vocabulary the tokenizer learns from the text: at least BPE's bytes and special
        tokens, or the special tokens and one character."""
        bpe = tables["data"].tokenizer == "bpe" and not tables["data"].tokenizer_file
        return {"vocab_size": SMALLEST_BPE if bpe else SMALLEST_VOCABULARY}

    def check(self) -> None:
        if self.train.max_steps is None:
            raise ValueError("train.max_steps must be set: language-model windows never run out")
