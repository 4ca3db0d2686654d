"""Settings and outcome of a training run: :class:`TrainConfig`, :class:`TrainResult`, and
the error raised when the loss stops being finite."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnlab.validation import check_positive


class NonFiniteLossError(RuntimeError):
    """The loss (or gradient norm) became NaN or inf; training stopped before the update."""


@dataclass
class TrainConfig:
    """Loop settings; the ``[train]`` table of a recipe maps onto it 1:1.

    ``eval_every``/``save_every``/``log_every`` count optimizer steps (0 = never, except the
    final evaluation and checkpoint). ``patience`` evaluations without improvement of
    ``metric`` (``metric_mode`` ``"min"`` or ``"max"``) stop training. ``keep_last_k`` step
    checkpoints are kept (0 = all); ``save_best`` also writes ``run_dir/best``.
    ``max_time_s`` stops (with a checkpoint) after that much wall time. ``measure_memory``
    measures the live tensor peak on a CPU (:mod:`attnlab.training.step_memory`: about a
    second a measured step); ``None`` is on under ``attnlab train`` and off in a library loop.
    """

    max_steps: int | None = None
    max_epochs: int | None = None
    grad_accum: int = 1
    clip_norm: float | None = 1.0
    eval_every: int = 0
    patience: int | None = None
    metric: str = "val_loss"
    metric_mode: str = "min"
    bf16: bool = False
    compile: bool = False
    log_every: int = 10
    save_every: int = 0
    keep_last_k: int = 3
    save_best: bool = True
    seed: int = 0
    run_dir: str | None = None
    progress: bool = True
    max_time_s: float | None = None
    measure_memory: bool | None = None

    def __post_init__(self) -> None:
        if self.max_steps is None and self.max_epochs is None:
            raise ValueError("max_steps or max_epochs must be set, got both None")
        for name in ("max_steps", "max_epochs", "grad_accum", "patience"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (or None), got {value}")
        for name in ("eval_every", "log_every", "save_every", "keep_last_k"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.metric_mode not in ("min", "max"):
            raise ValueError(f"metric_mode must be 'min' or 'max', got {self.metric_mode!r}")
        if self.clip_norm is not None:
            check_positive("clip_norm", self.clip_norm)
        if self.max_time_s is not None:
            check_positive("max_time_s", self.max_time_s)


@dataclass
class TrainResult:
    """How :meth:`Trainer.fit` ended. ``stopped`` is one of ``"max_steps"``,
    ``"max_epochs"``, ``"early_stopping"``, ``"max_time"``, ``"interrupted"``."""

    step: int
    epoch: int
    stopped: str
    best_metric: float | None
    last_checkpoint: Path | None
    last_eval: dict[str, float]
    history: list[dict[str, float]]  # one {"step", "loss", "lr", "tokens"} per optimizer step
    seconds: float = 0.0  # wall time of this fit (a resumed run counts from the resume)
    signal: int | None = None  # SIGINT or SIGTERM when stopped == "interrupted"
    live_tensor_peak: int | None = None  # bytes, on a CPU (training/step_memory.py); else None
