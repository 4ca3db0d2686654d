"""The translation recipe: TOML tables mapped 1:1 onto dataclasses (Ba (CSC413 Lecture 8),
"Transformer Machine Translation"; Vaswani et al. 2017, §5 "Training").

A recipe file looks like::

    task = "translation"
    [data]   corpus (a preset or your pairs), val, test, held_out, src_lang, tgt_lang,
             vocab_size, joint_vocab, tokenizer_file, max_len, max_tokens, ...
    [model]  type = "transformer" (default), "attention_seq2seq" or "rnn_seq2seq", and that
             model config's fields except the vocabulary sizes (BPE's, once it is learned)
             and the padding id (the tokenizers')
    [optim]  OptimConfig fields (optimizer, lr, schedule, warmup, ...) and label_smoothing
    [train]  TrainConfig fields (attnlab.training.TrainConfig)
    [eval]   beam_size, length_penalty, max_len_a, max_len_b, average_last, val_bleu, ...

Every table rejects an unknown key by name, the model table included: it is checked against
the config class of its ``type`` (:class:`~attnlab.models.TransformerConfig`, ...) when the
recipe is read (:mod:`attnlab.tasks.recipe`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attnlab.data import LANGUAGES, SPLITS
from attnlab.data.corpora import ERRORS
from attnlab.data.presets import PAIR_PRESETS
from attnlab.data.sources import resolved
from attnlab.data.tokenizers import PAD_ID, SMALLEST_BPE, SMALLEST_VOCABULARY
from attnlab.pipelines.decoding import DecodeConfig
from attnlab.tasks.recipe import ModelTable, Recipe, corpus_paths
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive, check_probability


@dataclass
class TranslationData:
    """``[data]``: the sentence pairs, the language pair, BPE and batching.

    ``corpus`` is a preset (``multi30k``: its own validation and test files) or your pairs:
    a prefix (``corpus/train`` reads ``corpus/train.{src_lang}`` and ``.{tgt_lang}``, gzip
    too), two line-aligned files, a ``.tsv`` or a ``.jsonl`` (:mod:`attnlab.data.sources`).
    ``val`` and ``test`` name their own pairs the same ways; without them ``held_out`` of
    the pairs validates and as many test (chosen by a hash of the source sentence).
    ``tokenizer_file`` gives a ``tokenizer.json`` for both sides instead of learning BPE of
    ``vocab_size``. ``train_limit`` 0 = all pairs; training pairs longer than ``max_len``
    subwords are left out (and counted)."""

    corpus: str | list[str] = "multi30k"
    val: str | list[str] = ""
    test: str | list[str] = ""
    held_out: float = 0.01
    src_lang: str = "de"
    tgt_lang: str = "en"
    vocab_size: int = 8000
    joint_vocab: bool = True
    tokenizer_file: str = ""
    max_len: int = 128
    max_tokens: int = 4096  # padded tokens per batch (source or target side)
    train_limit: int = 0
    seed: int = 0
    errors: str = "strict"

    def __post_init__(self) -> None:
        self.corpus, self.val, self.test = corpus_paths("data.corpus", self.corpus, PAIR_PRESETS,
                                                        self.val, self.test)
        if self.corpus in PAIR_PRESETS:
            check_choice("data.src_lang", self.src_lang, LANGUAGES)
            check_choice("data.tgt_lang", self.tgt_lang, LANGUAGES)
        if not self.src_lang or self.src_lang == self.tgt_lang:
            raise ValueError(f"data.src_lang and data.tgt_lang must be two languages, got {self.src_lang!r}, "
                             f"{self.tgt_lang!r}")
        if self.tokenizer_file:
            self.tokenizer_file = str(resolved(self.tokenizer_file))
        check_choice("data.errors", self.errors, ERRORS)
        for name in ("vocab_size", "max_len", "max_tokens"):
            check_positive(f"data.{name}", getattr(self, name))
        if not 0.0 <= self.held_out < 0.5:
            raise ValueError(f"data.held_out must be in [0, 0.5), got {self.held_out}")
        if self.train_limit < 0:
            raise ValueError(f"data.train_limit must be >= 0 (0 = all), got {self.train_limit}")


@dataclass
class TranslationOptim(OptimConfig):
    """``[optim]``: :class:`~attnlab.training.OptimConfig` (here by default the paper's Adam
    and noam schedule, §5.3: ``lr`` is its scale) plus the label smoothing ε_ls of §5.4."""

    optimizer: str = "adam"
    lr: float = 1.0
    schedule: str = "noam"
    warmup: int = 4000
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_probability("optim.label_smoothing", self.label_smoothing)


@dataclass
class TranslationEval(DecodeConfig):
    """``[eval]``: how the test split is decoded (:class:`~attnlab.pipelines.DecodeConfig`,
    what a checkpoint's pipeline decodes with) and scored.

    ``average_last`` = k: the final model is the mean of the last k step checkpoints
    (paper §6.1); 1 = the last weights. ``val_bleu``: greedy BLEU on the first ``val_limit``
    validation sentences (0 = all) at each evaluation, logged as ``val_bleu`` (use it as
    ``train.metric`` with ``metric_mode = "max"`` to early-stop on BLEU). ``test_limit``
    0 = the whole test split.
    """

    average_last: int = 5
    val_bleu: bool = True
    val_limit: int = 0
    test_split: str = "test_2016_flickr"
    test_limit: int = 0
    sample_count: int = 5
    heatmap_index: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.average_last < 1:
            raise ValueError(f"eval.average_last must be >= 1, got {self.average_last}")
        for name in ("val_limit", "test_limit", "sample_count", "heatmap_index"):
            check_positive(f"eval.{name}", getattr(self, name), allow_zero=True)
        check_choice("eval.test_split", self.test_split, [s for s in SPLITS if s != "train"])


@dataclass
class TranslationRecipe(Recipe):
    """A whole translation recipe (see the module docstring)."""

    data: TranslationData
    model: ModelTable
    optim: TranslationOptim
    eval: TranslationEval

    task_name = "translation"

    @classmethod
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        return {} if tables["data"].tokenizer_file else {"pad_id": PAD_ID}

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The vocabulary sizes BPE learns (at least its bytes and special tokens); a given
        tokenizer decides them and the padding id."""
        if tables["data"].tokenizer_file:
            smallest = SMALLEST_VOCABULARY
            return {"src_vocab_size": smallest, "tgt_vocab_size": smallest, "pad_id": PAD_ID}
        return {"src_vocab_size": SMALLEST_BPE, "tgt_vocab_size": SMALLEST_BPE}

    def check(self) -> None:
        train, ev = self.train, self.eval
        if train.metric == "val_bleu" and not ev.val_bleu:
            raise ValueError("train.metric = 'val_bleu' needs eval.val_bleu = true, got false")
        check_choice("train.metric", train.metric, ("val_loss", "val_bleu"))
        if train.keep_last_k and ev.average_last > train.keep_last_k:
            raise ValueError(
                f"eval.average_last={ev.average_last} needs train.keep_last_k >= {ev.average_last} "
                f"(or 0 = keep all), got {train.keep_last_k}"
            )
        if self.model.settings["share_embeddings"] and not self.data.joint_vocab:
            raise ValueError("[model] share_embeddings = true needs data.joint_vocab = true")
