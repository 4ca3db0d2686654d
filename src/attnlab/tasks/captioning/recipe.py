"""The captioning recipe (the task is :mod:`attnlab.tasks.captioning`; the shape of every recipe:
:mod:`attnlab.tasks.recipe`).

    task = "captioning"
    [data]   source ("scenes" | "folder"); scenes: canvas, counts, train_scenes, val_scenes,
             test_scenes (composed from the MNIST split of each); folder: folder (holding
             train/, val/, test/, each a folder of images + captions.txt or captions.jsonl),
             channels, size;
             batch_size, seed
    [model]  type = "show_attend_tell", and its config's fields except vocab_size, pad_id,
             in_channels and image_size (the data fixes them)
    [optim]  OptimConfig (Adam, warmup + cosine by default)
    [train]  TrainConfig (max_steps bounds the run)
    [eval]   beam_size, length_penalty, max_len, val_limit, sample_count, mistakes
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlab.data.sources import resolved
from attnlab.data.tokenizers import PAD_ID, SMALLEST_VOCABULARY
from attnlab.tasks.recipe import ModelTable, Recipe
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive

SOURCES = ("scenes", "folder")


@dataclass
class CaptionData:
    """``[data]``: where the images and captions come from. ``scenes`` composes MNIST scenes of
    ``counts`` digits on a ``canvas`` (:mod:`attnlab.data.scenes`; each split from its own
    source digits) and writes them as a folder of images + captions, so both sources load
    through the same code (:mod:`attnlab.data.image_captions`). ``folder`` reads
    ``folder/{train,val,test}/captions.txt`` (or ``captions.jsonl``: ``{"image": PATH,
    "caption": TEXT}`` a line) and their images, converted to ``channels`` and resized to
    ``size`` × ``size``; it is made absolute when the recipe is read."""

    source: str = "scenes"
    canvas: int = 64
    counts: list[int] = field(default_factory=lambda: [1, 2, 3, 4])
    train_scenes: int = 20000
    val_scenes: int = 500
    test_scenes: int = 1000
    folder: str = ""
    channels: int = 1
    size: int = 64
    batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("data.source", self.source, SOURCES)
        for name in ("canvas", "train_scenes", "val_scenes", "test_scenes", "size", "batch_size"):
            check_positive(f"data.{name}", getattr(self, name))
        check_choice("data.channels", self.channels, (1, 3))
        if not self.counts or any(c not in (1, 2, 3, 4) for c in self.counts):
            raise ValueError(f"data.counts must list digit counts from 1 to 4, got {self.counts}")
        if self.source == "folder" and not self.folder:
            raise ValueError('data.folder must name a folder when data.source = "folder"')
        if self.folder:
            self.folder = str(resolved(self.folder))
        if self.source == "scenes" and (self.channels, self.size) != (1, self.canvas):
            raise ValueError(
                f"scenes are 1-channel {self.canvas} x {self.canvas}: set data.channels = 1 and "
                f"data.size = data.canvas, got channels {self.channels}, size {self.size}"
            )


@dataclass
class CaptionOptim(OptimConfig):
    """``[optim]``: :class:`~attnlab.training.OptimConfig`, by default Adam at 2e-3 with a
    warmup of 100 steps and a cosine to 2e-4."""

    optimizer: str = "adam"
    lr: float = 2e-3
    schedule: str = "warmup_cosine"
    warmup: int = 100
    min_lr: float = 2e-4
    betas: list[float] | None = field(default_factory=lambda: [0.9, 0.999])


@dataclass
class CaptionEval:
    """``[eval]``: beam search settings of the final test decoding (and ``attnlab caption``),
    the validation scenes decoded greedily at each periodic evaluation (0 = all), how many
    samples and worst captions ("mistakes") the report shows."""

    beam_size: int = 3
    length_penalty: float = 0.0
    max_len: int = 24
    val_limit: int = 500
    sample_count: int = 5
    mistakes: int = 8
    batch_size: int = 100

    def __post_init__(self) -> None:
        for name in ("beam_size", "max_len", "batch_size"):
            check_positive(f"eval.{name}", getattr(self, name))
        for name in ("val_limit", "sample_count", "mistakes"):
            check_positive(f"eval.{name}", getattr(self, name), allow_zero=True)


@dataclass
class CaptionRecipe(Recipe):
    """A whole captioning recipe (one TOML file)."""

    data: CaptionData
    model: ModelTable
    optim: CaptionOptim
    eval: CaptionEval

    task_name = "captioning"

    @classmethod
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        data = tables["data"]
        return {"pad_id": PAD_ID, "in_channels": data.channels, "image_size": data.size}

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The vocabulary of the training captions: at least the special tokens and one word."""
        return {"vocab_size": SMALLEST_VOCABULARY}

    def check(self) -> None:
        if self.train.max_steps is None:
            raise ValueError("train.max_steps must be set: it bounds the run")
