"""The translation recipe: TOML tables mapped 1:1 onto dataclasses (seed 004, "Transformer
Machine Translation"; Vaswani et al. 2017, §5 "Training").

A recipe file looks like::

    task = "translation"
    [data]   corpus, src_lang, tgt_lang, vocab_size, joint_vocab, max_len, max_tokens, ...
    [model]  TransformerConfig fields except the vocabulary sizes (taken from the tokenizer)
    [optim]  optimizer, lr, schedule ("noam" | "warmup_cosine"), warmup, label_smoothing, ...
    [train]  TrainConfig fields (attnlab.training.TrainConfig)
    [eval]   beam_size, length_penalty, max_len_a, max_len_b, average_last, val_bleu, ...

Every table rejects an unknown key by name (:func:`attnlab.config.from_dict`), the model table
included: it is checked against :class:`~attnlab.config.TransformerConfig` when the recipe is read.
The recipe is saved as ``recipe.json`` into every checkpoint (:func:`checkpoint_files`), so
:func:`load_translator` knows a checkpoint's language pair and decoding settings.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab.config import TransformerConfig, _unknown_key_error, from_dict
from attnlab.data import load_tokenizers, save_tokenizers
from attnlab.models import Transformer
from attnlab.training import TrainConfig, noam, warmup_cosine

RECIPE_FILE = "recipe.json"  # the recipe as JSON, saved into every checkpoint
CORPORA = ("multi30k",)
SCHEDULES = ("noam", "warmup_cosine")
VOCAB_KEYS = ("src_vocab_size", "tgt_vocab_size", "pad_id")


@dataclass
class DataConfig:
    """``[data]``: corpus, language pair, BPE and batching. ``train_limit`` 0 = all pairs."""

    corpus: str = "multi30k"
    src_lang: str = "de"
    tgt_lang: str = "en"
    vocab_size: int = 8000
    joint_vocab: bool = True
    max_len: int = 128  # training pairs longer than this (in subwords) are dropped
    max_tokens: int = 4096  # padded tokens per batch (source or target side)
    train_limit: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.corpus not in CORPORA:
            raise ValueError(f"data.corpus must be one of {CORPORA}, got {self.corpus!r}")
        for name in ("vocab_size", "max_len", "max_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"data.{name} must be > 0, got {getattr(self, name)}")
        if self.train_limit < 0:
            raise ValueError(f"data.train_limit must be >= 0 (0 = all), got {self.train_limit}")


@dataclass
class OptimConfig:
    """``[optim]``. ``lr`` is the noam ``scale`` (paper: 1.0) or the warmup_cosine peak.
    ``total_steps`` (cosine only) defaults to ``train.max_steps``."""

    optimizer: str = "adam"
    lr: float = 1.0
    schedule: str = "noam"
    warmup: int = 4000
    min_lr: float = 0.0
    total_steps: int | None = None
    label_smoothing: float = 0.1
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"optim.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"optim.label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass
class EvalConfig:
    """``[eval]``. Output length cap: ``max_len_a · source_length + max_len_b`` subwords.

    ``average_last`` = k: the final model is the mean of the last k step checkpoints
    (paper §6.1); 1 = the last weights. ``val_bleu``: greedy BLEU on the first ``val_limit``
    validation sentences (0 = all) at each evaluation, logged as ``val_bleu`` (use it as
    ``train.metric`` with ``metric_mode = "max"`` to early-stop on BLEU). ``test_limit``
    0 = the whole test split.
    """

    beam_size: int = 5
    length_penalty: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10
    average_last: int = 5
    val_bleu: bool = True
    val_limit: int = 0
    test_split: str = "test_2016_flickr"
    test_limit: int = 0
    sample_count: int = 5
    heatmap_index: int = 0
    batch_size: int = 64

    def __post_init__(self) -> None:
        for name in ("beam_size", "average_last", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"eval.{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class TranslationRecipe:
    """A whole recipe. ``model`` holds the ``[model]`` table as given (already validated)."""

    task: str
    data: DataConfig
    optim: OptimConfig
    train: TrainConfig
    eval: EvalConfig
    model: dict[str, Any] = field(default_factory=dict)

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int, pad_id: int = 0):
        """The :class:`TransformerConfig` once the tokenizer fixed the vocabulary sizes."""
        sizes = dict(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, pad_id=pad_id)
        return TransformerConfig.from_dict({**self.model, **sizes})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


TABLES = {"data": DataConfig, "optim": OptimConfig, "train": TrainConfig, "eval": EvalConfig}


def parse_recipe(raw: Mapping[str, Any]) -> TranslationRecipe:
    """Map a recipe dict (from :func:`attnlab.tasks.load_recipe`) onto :class:`TranslationRecipe`.

    Unknown top-level keys, table keys and model keys raise ``ValueError`` naming the key.
    """
    allowed = ["task", "model", *TABLES]
    for key in raw:
        if key not in allowed:
            raise _unknown_key_error(key, allowed, "the recipe")
    if raw.get("task") != "translation":
        raise ValueError(f"task must be 'translation' for this recipe, got {raw.get('task')!r}")
    tables = {}
    for name, cls in TABLES.items():
        table = raw.get(name, {})
        if not isinstance(table, Mapping):
            raise ValueError(f"[{name}] must be a table, got {table!r}")
        tables[name] = from_dict(cls, table, where=f"[{name}]")
    model = dict(raw.get("model", {}))
    for key in VOCAB_KEYS:
        if key in model:
            raise ValueError(f"[model] key {key!r} is set from the tokenizer; remove it")
    recipe = TranslationRecipe(task="translation", model=model, **tables)
    _check_model(recipe)
    _check_consistency(recipe)
    return recipe


def _check_consistency(recipe: TranslationRecipe) -> None:
    """Settings that are each valid but contradict one another."""
    train, ev = recipe.train, recipe.eval
    if train.metric == "val_bleu" and not ev.val_bleu:
        raise ValueError("train.metric = 'val_bleu' needs eval.val_bleu = true, got false")
    if train.metric not in ("val_loss", "val_bleu"):
        raise ValueError(f"train.metric must be 'val_loss' or 'val_bleu', got {train.metric!r}")
    if train.keep_last_k and ev.average_last > train.keep_last_k:
        raise ValueError(
            f"eval.average_last={ev.average_last} needs train.keep_last_k >= {ev.average_last} "
            f"(or 0 = keep all), got {train.keep_last_k}"
        )


def _check_model(recipe: TranslationRecipe) -> None:
    """Build the model config once with placeholder sizes so bad keys fail before any work."""
    vocab = recipe.data.vocab_size
    try:
        recipe.model_config(vocab, vocab)
    except ValueError as err:
        raise ValueError(f"[model]: {err}") from err
    if recipe.model.get("share_embeddings") and not recipe.data.joint_vocab:
        raise ValueError("[model] share_embeddings = true needs data.joint_vocab = true")


# ----------------------------------------------------------------- schedule and checkpoint files
def make_schedule(recipe: TranslationRecipe, d_model: int):
    """The learning-rate schedule of ``[optim]`` (absolute lr per step, for ``lambda_lr``)."""
    o = recipe.optim
    if o.schedule == "noam":
        return noam(d_model, o.warmup, scale=o.lr)
    total = o.total_steps or recipe.train.max_steps
    if total is None:
        raise ValueError("optim.schedule 'warmup_cosine' needs optim.total_steps or train.max_steps")
    return warmup_cosine(o.warmup, total, o.lr, o.min_lr)


def checkpoint_files(run_dir: Path, recipe: TranslationRecipe, src_tok, tgt_tok) -> dict:
    """Tokenizer files + ``recipe.json``, copied into every checkpoint."""
    paths = save_tokenizers(run_dir / "tokenizer", src_tok, tgt_tok)
    files: dict = {p.name: p for p in paths}
    files[RECIPE_FILE] = json.dumps(recipe.to_dict(), indent=2).encode()
    return files


def load_translator(checkpoint: str | Path):
    """``(model, src_tok, tgt_tok, recipe dict)`` of a translation checkpoint directory."""
    model = Transformer.from_pretrained(checkpoint)
    src_tok, tgt_tok = load_tokenizers(checkpoint)
    recipe_file = Path(checkpoint) / RECIPE_FILE
    recipe = json.loads(recipe_file.read_text()) if recipe_file.is_file() else {}
    return model, src_tok, tgt_tok, recipe
