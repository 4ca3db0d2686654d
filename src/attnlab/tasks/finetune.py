"""GPT-1-style transfer, measured: fine-tune a pretrained GPT vs the same model from scratch.

Ba (CSC413 Lecture 8), "Transformer Language Pre-training": a language model pre-trained on raw text
is fine-tuned on a downstream classification task (Radford et al. 2018, §3.2). The task
here is telling Shakespeare lines from King James Bible verses
(:mod:`attnlab.data.classification`), and the experiment has two arms that differ only in
the starting weights:

* ``pretrained`` — :class:`~attnlab.models.classifier.GPTForSequenceClassification` on the
  body of a ``"gpt"`` checkpoint (e.g. ``configs/shakespeare_char.toml``'s), new head;
* ``scratch`` — the same architecture and size, randomly initialised (same seed).

Both see the same batches in the same order, the same optimizer (AdamW, decay / no-decay
groups), warmup + cosine schedule, clipping and auxiliary LM weight λ (GPT-1 eq. 5), all run
by :class:`~attnlab.training.trainer.Trainer`. The report gives each arm's validation and
test accuracy, the trivial length-only baseline and chance.

    attnlab finetune --checkpoint runs/shakespeare_char/best \
        --config configs/shakespeare_vs_kjv.toml [key=value ...] [--out runs/kjv]

The KJV comes from Debian's ``sword-text-kjv``, which ``make data-kjv`` installs once (as root);
without it the command says so and stops before any training.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnlab.atomic import write_atomic
from attnlab.config import Config, apply_overrides, load_toml
from attnlab.data.classification import (
    ShakespeareKJVConfig,
    TextClassificationData,
    encode_examples,
    length_baseline,
    load_shakespeare_vs_kjv,
    pad_batch,
)
from attnlab.data.tokenizers import TOKENIZER_FILE, CharTokenizer, load_tokenizer
from attnlab.devices import model_device, to_device
from attnlab.models import GPTClassifierConfig, GPTForSequenceClassification
from attnlab.models.classifier import POOLINGS
from attnlab.signals import reraise
from attnlab.training import OptimConfig, TrainConfig, Trainer, build_optimizer
from attnlab.training.run_dir import writing_run
from attnlab.validation import check_choice, check_positive, check_probability, counted

Encoded = tuple[list[list[int]], Tensor]  # token ids per example, labels (N,)
ARMS = ("pretrained", "scratch")


@dataclass
class FinetuneConfig(Config):
    """The ``[finetune]`` table: the one training setup both arms share.

    GPT-1 fine-tuned with λ = 0.5, batch 32, warmup over 0.2 % of training and dropout 0.1
    on the classifier; the learning rate here is larger because the models are tiny.
    """

    steps: int = 600
    batch_size: int = 32
    lr: float = 5e-4
    min_lr: float = 5e-5
    warmup: int = 30
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    lm_weight: float = 0.5
    pooling: str = "last"
    dropout: float = 0.1
    eval_every: int = 100
    seed: int = 1337
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0 <= self.warmup < self.steps:
            raise ValueError(f"warmup must be in [0, steps={self.steps}), got {self.warmup}")
        for name in ("lm_weight", "weight_decay", "min_lr", "eval_every"):
            check_positive(name, getattr(self, name), allow_zero=True)
        check_positive("clip_norm", self.clip_norm)
        check_probability("dropout", self.dropout)
        check_choice("pooling", self.pooling, POOLINGS)


@dataclass
class FinetuneRecipe(Config):
    """``configs/shakespeare_vs_kjv.toml``: a ``[data]`` and a ``[finetune]`` table."""

    data: ShakespeareKJVConfig = field(default_factory=ShakespeareKJVConfig)
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)

    @classmethod
    def from_file(cls, path: str | Path, overrides: Sequence[str] | None = None) -> FinetuneRecipe:
        return cls.from_dict(load_toml(path, overrides))


def batch_stream(ids: list[list[int]], labels: Tensor, batch_size: int, seed: int, pad_id: int = 0):
    """``stream(epoch)`` → batches ``(idx (B, n), lengths (B,), labels (B,))`` in a seeded
    shuffled order that depends only on ``seed`` and ``epoch`` (both arms see the same)."""
    def stream(epoch: int) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(len(ids), generator=g).tolist()
        for start in range(0, len(order) - batch_size + 1, batch_size):  # full batches only
            rows = order[start:start + batch_size]
            idx, lengths = pad_batch([ids[r] for r in rows], pad_id)
            yield idx, lengths, labels[rows]
    return stream


@torch.no_grad()
def accuracy(model: GPTForSequenceClassification, data: Encoded, batch_size: int = 256) -> float:
    """Fraction of ``data`` classified correctly (model put in eval mode)."""
    ids, labels = data
    model.eval()
    device = model_device(model)
    correct = 0
    for start in range(0, len(ids), batch_size):
        idx, lengths = to_device(pad_batch(ids[start:start + batch_size]), device)
        pred = model(idx, lengths).argmax(dim=-1).cpu()  # (B,)
        correct += int((pred == labels[start:start + batch_size]).sum())
    return correct / len(ids)


def finetune(
    model: GPTForSequenceClassification,
    train: Encoded,
    cfg: FinetuneConfig,
    *,
    val: Encoded | None = None,
    run_dir: str | Path | None = None,
    files: dict[str, str | Path | bytes] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Train every parameter of ``model`` (body and head) on ``train`` for ``cfg.steps``
    steps of L3 = L2 + λ·L1; return ``{"val_accuracy", "best_val_accuracy", "train_loss"
    (L3, mean of the last 20 steps), "steps", "seconds"}``. With ``run_dir`` the Trainer
    writes checkpoints there (``best`` = highest validation accuracy), each with ``files``
    (e.g. the tokenizer)."""
    model.to(cfg.device).train()
    optim = OptimConfig(
        optimizer="adamw", lr=cfg.lr, min_lr=min(cfg.min_lr, cfg.lr), warmup=cfg.warmup,
        weight_decay=cfg.weight_decay,
    )
    optimizer, scheduler = build_optimizer(optim, model, max_steps=cfg.steps)

    def loss_fn(m, batch):  # the Trainer moves the batch to the model's device
        idx, lengths, labels = batch
        loss, _ = m.loss(idx, labels, lengths, lm_weight=cfg.lm_weight)
        return loss * len(labels), len(labels)  # summed over the batch, as the Trainer wants

    eval_fn = None if val is None else (lambda m: {"val_accuracy": accuracy(m, val)})
    train_cfg = TrainConfig(
        max_steps=cfg.steps, clip_norm=cfg.clip_norm, eval_every=cfg.eval_every if val else 0,
        metric="val_accuracy", metric_mode="max", seed=cfg.seed, progress=progress,
        run_dir=None if run_dir is None else str(run_dir), log_every=max(1, cfg.steps // 20),
    )
    trainer = Trainer(
        model, optimizer, loss_fn, batch_stream(*train, cfg.batch_size, cfg.seed), train_cfg,
        scheduler=scheduler, eval_fn=eval_fn, files=files,
    )
    start = time.perf_counter()
    result = trainer.fit()
    if result.stopped == "interrupted":  # saved (with run_dir); stop here, not at the next arm
        reraise(result.signal)
    losses = [h["loss"] for h in result.history[-20:]]
    return {
        "val_accuracy": result.last_eval.get("val_accuracy"),
        "best_val_accuracy": result.best_metric,
        "train_loss": sum(losses) / len(losses),
        "steps": result.step,
        "seconds": time.perf_counter() - start,
    }


def _majority(labels: Tensor) -> float:
    """Accuracy of always answering the most frequent label."""
    return float(torch.bincount(labels).max()) / len(labels)


def _encode(data: TextClassificationData, tokenizer, block_size: int) -> dict[str, Encoded]:
    splits = {"train": data.train, "val": data.val, "test": data.test}
    return {name: encode_examples(split, tokenizer, block_size) for name, split in splits.items()}


def run_finetune(
    checkpoint: str | Path,
    recipe: FinetuneRecipe | None = None,
    *,
    data: TextClassificationData | None = None,
    data_dir: str | None = None,
    sword_dir: str | None = None,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Fine-tune ``checkpoint`` (a ``"gpt"`` checkpoint with its ``tokenizer.json``) and train
    the same architecture from scratch on Shakespeare-vs-KJV (or ``data``); return the report.

    With ``out_dir``, each arm's run goes to ``out_dir/<arm>`` and the report to
    ``out_dir/report.json``; ``out_dir`` must be empty, or ``overwrite`` replaces the earlier
    comparison in it, and it is locked like a run directory (:mod:`attnlab.training.run_dir`)
    before anything is read.

    Raises:
        ValueError: the checkpoint is not a GPT (names its ``model_type``).
        FileNotFoundError: tokenizer, corpus or KJV missing (says how to get it).
    """
    with writing_run(out_dir, overwrite=overwrite, flag="--out"):
        recipe = recipe or FinetuneRecipe()
        return _compare(checkpoint, recipe, data, data_dir, sword_dir, out_dir, progress, log)


def _compare(
    checkpoint: str | Path, recipe: FinetuneRecipe, data: TextClassificationData | None, data_dir: str | None,
    sword_dir: str | None, out_dir: str | Path | None, progress: bool, log: Callable[[str], None],
) -> dict[str, Any]:
    """:func:`run_finetune` once its ``out_dir`` is held."""
    cfg = recipe.finetune
    pretrained = GPTForSequenceClassification.from_pretrained(
        checkpoint, 2, pooling=cfg.pooling, dropout=cfg.dropout
    )
    tokenizer = load_tokenizer(checkpoint)
    chars = tokenizer.chars if isinstance(tokenizer, CharTokenizer) else None
    if data is None:
        data = load_shakespeare_vs_kjv(
            recipe.data, chars=chars, data_dir=data_dir, sword_dir=sword_dir
        )
    log(f"data: {data.describe()}")
    encoded = _encode(data, tokenizer, pretrained.config.gpt.block_size)
    torch.manual_seed(cfg.seed)
    scratch = GPTForSequenceClassification.from_config(
        GPTClassifierConfig(pretrained.config.gpt, 2, cfg.pooling, cfg.dropout)
    )
    report: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "parameters": pretrained.num_parameters(),
        "sizes": {name: len(encoded[name][0]) for name in encoded},
        "chance": _majority(encoded["test"][1]),
        "length_baseline_test_accuracy": length_baseline(data.train, data.test),
        "config": recipe.to_dict(),
    }
    for arm, model in zip(ARMS, (pretrained, scratch), strict=True):
        run_dir = None if out_dir is None else Path(out_dir) / arm
        result = finetune(
            model, encoded["train"], cfg, val=encoded["val"], run_dir=run_dir,
            files={TOKENIZER_FILE: Path(checkpoint) / TOKENIZER_FILE}, progress=progress,
        )
        result["test_accuracy"] = accuracy(model, encoded["test"])
        report[arm] = result
        log(
            f"{arm}: test accuracy {result['test_accuracy']:.4f} (val "
            f"{result['val_accuracy']:.4f}, {counted(result['steps'], 'step')}, {result['seconds']:.1f} s)"
        )
    log(
        f"length-only baseline: {report['length_baseline_test_accuracy']:.4f}; "
        f"chance {report['chance']:.4f}"
    )
    if out_dir is not None:
        write_atomic(Path(out_dir) / "report.json", json.dumps(report, indent=2) + "\n")
    return report


def cli(args: argparse.Namespace) -> int:
    """``attnlab finetune``: run both arms and print the accuracies."""
    if args.config:
        recipe = FinetuneRecipe.from_file(args.config, args.overrides)
    else:
        recipe = FinetuneRecipe.from_dict(apply_overrides({}, args.overrides))
    run_finetune(  # a missing corpus / KJV raises FileNotFoundError saying how to get it
        args.checkpoint, recipe, data_dir=args.data_dir, sword_dir=args.sword_dir,
        out_dir=args.out, overwrite=args.overwrite, progress=True,
    )
    return 0
