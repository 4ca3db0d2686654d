"""The training progress bar: step count, loss, lr, tokens/s, and an ETA that knows the budget.

Every bar attnlab shows is :func:`attnlab.progress.progress_bar`, switched by the recipe's
``train.progress`` (training, decoding a test set after training or in ``attnlab evaluate``,
where the checkpoint's recipe decides, and preparing a corpus).

A run ends at ``max_steps``, after ``max_epochs`` epochs, or when ``max_time_s`` runs out,
whichever comes first. The bar's total is the first two (:func:`planned_steps`); with a time
budget it shrinks to the steps the measured pace still fits (:func:`steps_within_budget`),
so the ETA counts down to the real end of training.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from attnlab.progress import progress_bar
from attnlab.training.config import TrainConfig

__all__ = ["TrainingProgress", "planned_steps", "steps_within_budget"]


def planned_steps(config: TrainConfig, train_data: Iterable | Any) -> int | None:
    """``max_steps``, or the optimizer steps of ``max_epochs`` epochs when the epoch's data
    has a length (the smaller of the two when both are known); None when unknown."""
    per_run = None
    if config.max_epochs is not None and not callable(train_data) and hasattr(train_data, "__len__"):
        per_run = math.ceil(len(train_data) / config.grad_accum) * config.max_epochs
    if config.max_steps is None:
        return per_run
    return config.max_steps if per_run is None else min(config.max_steps, per_run)


def steps_within_budget(step: int, steps_done: int, elapsed_s: float, budget_s: float) -> int | None:
    """The step a run at ``step`` reaches before ``budget_s`` seconds, at the pace of
    ``steps_done`` steps in ``elapsed_s`` seconds (None before there is a pace)."""
    if steps_done <= 0 or elapsed_s <= 0:
        return None
    return step + int(steps_done / elapsed_s * max(budget_s - elapsed_s, 0.0))


class TrainingProgress:
    """A tqdm bar over optimizer steps (shown on rank 0 when ``enabled``)."""

    def __init__(self, total: int | None, initial: int, *, enabled: bool) -> None:
        self.planned = total
        self.bar = progress_bar(total, initial=initial, unit="step", enabled=enabled)

    def advance(self) -> None:
        self.bar.update(1)

    def show(self, *, loss: float, lr: float, tokens_per_s: float, epoch: int) -> None:
        """Put the latest logged figures beside the bar."""
        self.bar.set_postfix(
            loss=f"{loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}", epoch=epoch,
            refresh=False,
        )

    def bound_by_time(self, step: int, steps_done: int, elapsed_s: float, budget_s: float | None) -> None:
        """With a time budget, let the bar end where the budget will stop training."""
        if budget_s is None:
            return
        reachable = steps_within_budget(step, steps_done, elapsed_s, budget_s)
        if reachable is None:
            return
        self.bar.total = reachable if self.planned is None else min(self.planned, reachable)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
