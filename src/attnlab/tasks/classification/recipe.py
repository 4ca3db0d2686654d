"""The classification recipe (the task is :mod:`attnlab.tasks.classification.task`; the shape of
every recipe: :mod:`attnlab.tasks.recipe`).

    task = "classification"
    [data]   corpus ("shakespeare_vs_kjv", the preset, or your labelled files: TSV or JSON
             lines, :mod:`attnlab.tasks.classification.corpus`), val, test, text_field,
             label_field; val_fraction, test_fraction (held out of your files by hash when
             val / test name none); per_class, train_per_class, holdout_fraction, seed and
             sword_dir (the SWORD library holding the KJV; "" = $SWORD_PATH or
             /usr/share/sword) shape the preset only
             (:class:`~attnlab.data.classification.ShakespeareKJVConfig`); batch_size
    [model]  type = "gpt_classifier", init_from = CKPT (a "gpt" checkpoint whose weights start
             the body; left out: from scratch), pooling, dropout (the head's) and [model.gpt],
             the body's GPT config except vocab_size (the tokenizer's); num_classes is the
             data's (the distinct training labels); with init_from the
             checkpoint's own config fills what [model.gpt] leaves out, and what it sets must
             agree
    [optim]  OptimConfig (AdamW, warmup + cosine) and lm_weight, GPT-1's λ (eq. 5)
    [train]  TrainConfig (max_steps bounds the run; metric "val_accuracy" with metric_mode
             "max", or "val_loss" with "min")
    [eval]   batch_size (the examples a forward pass scores)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attnlab.checkpoint import load_config
from attnlab.config import upgrade
from attnlab.data.classification import PRESET, ShakespeareKJVConfig
from attnlab.data.tokenizers import SMALLEST_VOCABULARY
from attnlab.models import GPT, GPTConfig
from attnlab.tasks.recipe import ModelTable, Recipe, corpus_paths
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive

PRESETS = (PRESET,)
PRESET_ONLY = ("per_class", "train_per_class", "holdout_fraction", "seed", "sword_dir")
"""The ``[data]`` keys that shape the preset and mean nothing for your own files."""


@dataclass
class ClassificationData(ShakespeareKJVConfig):
    """``[data]``: which labelled texts and the training batch.

    ``corpus`` is the ``shakespeare_vs_kjv`` preset (Shakespeare lines against King James
    verses, :mod:`attnlab.data.classification`; where the KJV is installed: ``sword_dir``) or
    your own labelled files (TSV ``text<TAB>label`` or JSON lines with ``text_field`` and
    ``label_field``); ``val`` and ``test`` name files of their own, else ``val_fraction`` and
    ``test_fraction`` of ``corpus`` are held out by a hash of each text
    (:mod:`attnlab.tasks.classification.corpus`). Paths are made absolute when read."""

    corpus: str | list[str] = PRESET
    val: str | list[str] = ""
    test: str | list[str] = ""
    text_field: str = "text"
    label_field: str = "label"
    batch_size: int = 32
    sword_dir: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        paths = corpus_paths("data.corpus", self.corpus, PRESETS, self.val, self.test)
        self.corpus, self.val, self.test = paths
        check_positive("data.batch_size", self.batch_size)
        if not self.is_preset:
            for name in PRESET_ONLY:
                default = next(f.default for f in dataclasses.fields(self) if f.name == name)
                if getattr(self, name) != default:
                    raise ValueError(f"data.{name} shapes the {PRESET} preset only; remove it to read "
                                     f"your own data.corpus")

    @property
    def is_preset(self) -> bool:
        """Whether ``corpus`` names the bundled preset (not files)."""
        return isinstance(self.corpus, str) and self.corpus in PRESETS


@dataclass
class ClassificationOptim(OptimConfig):
    """``[optim]``: :class:`~attnlab.training.OptimConfig` (AdamW with decay / no-decay groups,
    warmup + cosine) plus ``lm_weight``, the weight λ of the auxiliary language-model loss in
    GPT-1's L3 = L2 + λ·L1 (Radford et al. 2018, eq. 5; 0 = classification loss only)."""

    lr: float = 5e-4
    min_lr: float = 5e-5
    warmup: int = 30
    weight_decay: float = 0.01
    lm_weight: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("optim.lm_weight", self.lm_weight, allow_zero=True)


@dataclass
class ClassificationEval:
    """``[eval]``: how many examples one forward pass scores (validation and test accuracy)."""

    batch_size: int = 256

    def __post_init__(self) -> None:
        check_positive("eval.batch_size", self.batch_size)


@dataclass
class ClassificationRecipe(Recipe):
    """A whole classification recipe (one TOML file)."""

    data: ClassificationData
    model: ModelTable
    optim: ClassificationOptim
    eval: ClassificationEval

    task_name = "classification"
    takes_init_from = True

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """What the data decides: the body's vocabulary, the tokenizer's (at least the special
        tokens and one character), and the number of classes (at least 2)."""
        return {"gpt.vocab_size": SMALLEST_VOCABULARY, "num_classes": 2}

    @classmethod
    def model_start(cls, checkpoint: str) -> Mapping[str, Any]:
        """The body a ``"gpt"`` checkpoint holds: its config, as ``[model.gpt]``."""
        config = load_config(checkpoint)
        model_type = config.pop("model_type", None)
        if model_type != GPT.model_type:
            raise ValueError(f"[model] init_from {checkpoint} has model_type {model_type!r}; a classifier's "
                             f"body starts from a {GPT.model_type!r} checkpoint")
        return {"gpt": upgrade(GPTConfig, config)}

    def check(self) -> None:
        if self.train.max_steps is None:
            raise ValueError("train.max_steps must be set: it bounds the run")
        train = self.train
        check_choice("train.metric", train.metric, ("val_loss", "val_accuracy"))
        mode = "max" if train.metric == "val_accuracy" else "min"
        if train.metric_mode != mode:
            raise ValueError(
                f"train.metric_mode must be {mode!r} for {train.metric}, got {train.metric_mode!r}")
