"""The recipe of the NTM's algorithmic tasks (the task is :mod:`attnlab.tasks.algorithmic`;
the shape of every recipe: :mod:`attnlab.tasks.recipe`).

    task = "algorithmic"
    [data]   task ("copy" | "repeat_copy" | "associative_recall" | "priority_sort"), bits,
             min_length / max_length (vectors; items for associative recall), min_repeats /
             max_repeats (repeat copy), item_length (associative recall), keep (priority
             sort), batch_size, seed
    [model]  type = "ntm" (default) or "sequence_lstm", and that config's fields except
             input_dim / output_dim (the task fixes them)
    [optim]  OptimConfig (Adam at 1e-3 held constant by default)
    [train]  TrainConfig (max_steps is required: the tasks never run out)
    [eval]   val_sequences, test_lengths, test_sequences, test_repeats
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlab.data.algorithmic import TASKS, task_dims
from attnlab.tasks.recipe import ModelTable, Recipe
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive


@dataclass
class AlgorithmicData:
    """``[data]``: which task, its sizes and the training range. For associative recall the
    lengths count items (the paper trains on 2-6); for priority sort ``keep`` of ``length``
    vectors come out (default: all).

    ``curriculum_steps = N > 0`` widens the training range step by step: batch ``i`` draws its
    length from ``min_length`` up to ``min_length + ⌈(max_length − min_length) · (i + 1) / N⌉`` (the
    repeats likewise), the full range from batch ``N`` on — the "naive" curriculum of Zaremba &
    Sutskever (2014), "Learning to Execute". 0 (the default) trains on the full range at once."""

    task: str = "copy"
    bits: int = 8
    min_length: int = 1
    max_length: int = 20
    min_repeats: int = 1
    max_repeats: int = 10
    item_length: int = 3
    keep: int | None = None
    batch_size: int = 1
    seed: int = 0
    curriculum_steps: int = 0

    def __post_init__(self) -> None:
        check_choice("data.task", self.task, tuple(TASKS))
        for name in ("bits", "min_length", "max_length", "min_repeats", "max_repeats",
                     "item_length", "batch_size"):
            check_positive(f"data.{name}", getattr(self, name))
        for low, high in (("min_length", "max_length"), ("min_repeats", "max_repeats")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"data.{low} must be <= data.{high}, got {getattr(self, low)} > {getattr(self, high)}"
                )
        if self.task == "associative_recall" and self.min_length < 2:
            raise ValueError(
                f"data.min_length counts items for associative_recall: at least 2, got {self.min_length}"
            )
        if self.curriculum_steps < 0:
            raise ValueError(f"data.curriculum_steps must be >= 0, got {self.curriculum_steps}")
        if self.keep is not None and self.keep > self.min_length:
            raise ValueError(f"data.keep must be <= data.min_length ({self.min_length}), got {self.keep}")

    def range_at(self, batch: int) -> tuple[int, int]:
        """``(max_length, max_repeats)`` for training batch ``batch`` (0-based) under the curriculum."""
        if self.curriculum_steps == 0 or batch >= self.curriculum_steps:
            return self.max_length, self.max_repeats
        share = (batch + 1) / self.curriculum_steps
        return (self.min_length + math.ceil((self.max_length - self.min_length) * share),
                self.min_repeats + math.ceil((self.max_repeats - self.min_repeats) * share))

    def stored_vectors(self, length: int) -> int:
        """How many vectors an episode of ``length`` asks the machine to hold at once."""
        return length * self.item_length if self.task == "associative_recall" else length


@dataclass
class AlgorithmicOptim(OptimConfig):
    """``[optim]``: :class:`~attnlab.training.OptimConfig`, by default Adam held at 1e-3
    (Collier & Beel 2018)."""

    optimizer: str = "adam"
    lr: float = 1e-3
    schedule: str = "constant"
    warmup: int = 0
    betas: list[float] | None = field(default_factory=lambda: [0.9, 0.999])


@dataclass
class AlgorithmicEval:
    """``[eval]``: ``val_sequences`` episodes of training-range lengths for the periodic
    evaluation; the final report scores ``test_sequences`` at each of ``test_lengths`` (and,
    for repeat copy, each of ``test_repeats``)."""

    val_sequences: int = 100
    test_lengths: list[int] = field(default_factory=lambda: [10, 20, 30, 40, 60, 80, 120])
    test_sequences: int = 100
    test_repeats: list[int] = field(default_factory=lambda: [10])

    def __post_init__(self) -> None:
        check_positive("eval.val_sequences", self.val_sequences)
        check_positive("eval.test_sequences", self.test_sequences)
        if not self.test_lengths:
            raise ValueError("eval.test_lengths must list at least one length")
        for name in ("test_lengths", "test_repeats"):
            for value in getattr(self, name):
                check_positive(f"eval.{name}", value)


@dataclass
class AlgorithmicRecipe(Recipe):
    """A whole algorithmic-task recipe (one TOML file)."""

    data: AlgorithmicData
    model: ModelTable
    optim: AlgorithmicOptim
    eval: AlgorithmicEval

    task_name = "algorithmic"

    @classmethod
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        input_dim, output_dim = task_dims(tables["data"].task, tables["data"].bits)
        return {"input_dim": input_dim, "output_dim": output_dim}

    def check(self) -> None:
        if self.train.max_steps is None:
            raise ValueError("train.max_steps must be set: the task's sequences never run out")
        if self.model.type != "ntm":
            return
        d, memory = self.data, self.model.settings["memory_size"]
        longest = (("data.max_length", d.max_length), ("eval.test_lengths", max(self.eval.test_lengths)))
        for name, length in longest:
            if d.stored_vectors(length) > memory:
                raise ValueError(
                    f"{name} = {length} asks the NTM to hold {d.stored_vectors(length)} vectors but "
                    f"model.memory_size is {memory}; raise model.memory_size or lower {name}"
                )
