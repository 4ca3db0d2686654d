"""Learning-rate schedules: the paper's warmup + inverse square root ("noam"), warmup +
cosine, and constant.

Every schedule is a small callable ``schedule(step) -> lr`` giving the **absolute** learning
rate, where ``step`` is the number of optimizer updates already taken (PyTorch's
``LRScheduler.last_epoch``: 0 before the first update). :func:`lambda_lr` turns one into a
``torch.optim.lr_scheduler.LambdaLR`` that sets every parameter group's lr to
``schedule(step)``; step it once per optimizer step (not per micro-batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.optim.lr_scheduler import LambdaLR

from attnlab.validation import check_positive


@dataclass(frozen=True)
class Noam:
    """Vaswani et al. (2017), §5.3, eq. (3):

        lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5)

    times ``scale`` (1.0 in the paper; the Annotated Transformer uses 1–2 for small
    models). ``step_num`` counts updates from 1, so ``schedule(step)`` uses
    ``step_num = step + 1``; the peak ``scale · (d_model · warmup)^-0.5`` is reached at
    ``step_num = warmup``.
    """

    d_model: int
    warmup: int = 4000
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_positive("d_model", self.d_model)
        check_positive("warmup", self.warmup)
        check_positive("scale", self.scale)

    def __call__(self, step: int) -> float:
        n = step + 1
        return self.scale * self.d_model**-0.5 * min(n**-0.5, n * self.warmup**-1.5)


@dataclass(frozen=True)
class WarmupCosine:
    """Linear warmup to ``peak`` over ``warmup`` updates, then a half cosine down to
    ``min_lr`` at update ``total``, constant ``min_lr`` afterwards (the GPT recipe; nanoGPT
    ``get_lr``)::

        step < warmup:  peak · (step + 1) / warmup
        step <= total:  min_lr + ½ (1 + cos(π · (step − warmup) / (total − warmup))) (peak − min_lr)
        step > total:   min_lr
    """

    warmup: int
    total: int
    peak: float
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        check_positive("warmup", self.warmup, allow_zero=True)
        check_positive("peak", self.peak)
        check_positive("min_lr", self.min_lr, allow_zero=True)
        if self.total <= self.warmup:
            raise ValueError(f"total must be > warmup={self.warmup}, got {self.total}")
        if self.min_lr > self.peak:
            raise ValueError(f"min_lr must be <= peak={self.peak}, got {self.min_lr}")

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / (self.total - self.warmup))
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (self.peak - self.min_lr)


@dataclass(frozen=True)
class Constant:
    """A constant ``lr``, optionally after a linear warmup of ``warmup`` updates."""

    lr: float
    warmup: int = 0

    def __post_init__(self) -> None:
        check_positive("lr", self.lr)
        check_positive("warmup", self.warmup, allow_zero=True)

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        return self.lr


def noam(d_model: int, warmup: int = 4000, scale: float = 1.0) -> Noam:
    """The paper's schedule, eq. (3); see :class:`Noam`."""
    return Noam(d_model, warmup, scale)


def warmup_cosine(warmup: int, total: int, peak: float, min_lr: float = 0.0) -> WarmupCosine:
    """Linear warmup then cosine decay; see :class:`WarmupCosine`."""
    return WarmupCosine(warmup, total, peak, min_lr)


def constant(lr: float, warmup: int = 0) -> Constant:
    """Constant learning rate (optionally warmed up); see :class:`Constant`."""
    return Constant(lr, warmup)


def lambda_lr(optimizer: torch.optim.Optimizer, schedule) -> LambdaLR:
    """A ``LambdaLR`` that sets every parameter group's lr to ``schedule(step)``.

    ``LambdaLR`` multiplies each group's initial lr by a factor, so the factor is
    ``schedule(step) / initial_lr``. Its ``state_dict()`` holds only numbers (the lambdas are
    closures, which PyTorch does not serialise), so it loads with ``weights_only=True``.
    """
    factors = []
    for i, group in enumerate(optimizer.param_groups):
        base = float(group.get("initial_lr", group["lr"]))
        if base <= 0:
            raise ValueError(f"optimizer.param_groups[{i}]['lr'] must be > 0, got {base}")
        factors.append(lambda step, base=base: schedule(step) / base)
    return LambdaLR(optimizer, factors)

