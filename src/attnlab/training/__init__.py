"""Training: losses, learning-rate schedules, optimizers, the trainer loop, checkpoints of a
run, checkpoint averaging and data-parallel helpers (``torchrun``).

Typical use (the tasks of :mod:`attnlab.tasks` do exactly this from a recipe)::

    opt, sched = build_optimizer(OptimConfig(optimizer="adam", schedule="noam", lr=1.0), model,
                                 max_steps=10_000)
    trainer = Trainer(model, opt, loss_fn, batches, TrainConfig(max_steps=10_000,
                      run_dir="runs/x"), scheduler=sched, eval_fn=evaluate)
    result = trainer.fit()            # or trainer.fit(resume_from="runs/x")
"""

from attnlab.checkpoint import latest_checkpoint, list_checkpoints, resolve_resume
from attnlab.training.averaging import average_checkpoints, last_checkpoints
from attnlab.training.losses import label_smoothed_cross_entropy, mean_loss
from attnlab.training.optim import (
    OptimConfig,
    adamw,
    build_optimizer,
    make_optimizer,
    param_groups,
    translation_adam,
)
from attnlab.training.plots import plot_run
from attnlab.training.schedules import constant, lambda_lr, noam, warmup_cosine
from attnlab.training.state import TrainerState, load_trainer_state, seed_everything
from attnlab.training.trainer import NonFiniteLossError, TrainConfig, Trainer, TrainResult

__all__ = [
    "NonFiniteLossError",
    "OptimConfig",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainerState",
    "adamw",
    "average_checkpoints",
    "build_optimizer",
    "constant",
    "label_smoothed_cross_entropy",
    "lambda_lr",
    "last_checkpoints",
    "latest_checkpoint",
    "list_checkpoints",
    "load_trainer_state",
    "make_optimizer",
    "mean_loss",
    "noam",
    "param_groups",
    "plot_run",
    "resolve_resume",
    "seed_everything",
    "translation_adam",
    "warmup_cosine",
]
