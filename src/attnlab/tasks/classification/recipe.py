"""The classification recipe (the task is :mod:`attnlab.tasks.classification.task`; the shape of
every recipe: :mod:`attnlab.tasks.recipe`).

    task = "classification"
    [data]   per_class, train_per_class, val_fraction, test_fraction, holdout_fraction, seed
             (:class:`~attnlab.data.classification.ShakespeareKJVConfig`), batch_size,
             sword_dir (the SWORD library holding the KJV; "" = $SWORD_PATH or /usr/share/sword)
    [model]  type = "gpt_classifier", init_from = CKPT (a "gpt" checkpoint whose weights start
             the body; left out: from scratch), pooling, dropout (the head's) and [model.gpt],
             the body's GPT config except vocab_size (the tokenizer's); with init_from the
             checkpoint's own config fills what [model.gpt] leaves out, and what it sets must
             agree
    [optim]  OptimConfig (AdamW, warmup + cosine) and lm_weight, GPT-1's λ (eq. 5)
    [train]  TrainConfig (max_steps bounds the run; metric "val_accuracy" with metric_mode
             "max", or "val_loss" with "min")
    [eval]   batch_size (the examples a forward pass scores)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attnlab.checkpoint import load_config
from attnlab.config import upgrade
from attnlab.data.classification import LABELS, ShakespeareKJVConfig
from attnlab.data.tokenizers import SMALLEST_VOCABULARY
from attnlab.models import GPT, GPTConfig
from attnlab.tasks.recipe import ModelTable, Recipe
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive


@dataclass
class ClassificationData(ShakespeareKJVConfig):
    """``[data]``: which Shakespeare lines and King James verses (:mod:`attnlab.data.classification`),
    the training batch, and where the KJV is installed."""

    batch_size: int = 32
    sword_dir: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("data.batch_size", self.batch_size)


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
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        return {"num_classes": len(LABELS)}

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The body's vocabulary, the tokenizer's: at least the special tokens and one character."""
        return {"gpt.vocab_size": SMALLEST_VOCABULARY}

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
