"""The CLI's task commands: each reads its arguments and calls the task module that fits.

``train`` dispatches on the recipe's ``task``; ``evaluate`` on the checkpoint's
``model_type`` (``transformer`` → translation, ``gpt`` → language model).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnlab.tasks import MODEL_TYPE_TASKS, load_recipe, task_module


def train(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.config, args.overrides)
    run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / Path(args.config).stem
    task_module(recipe["task"]).train(recipe, run_dir=run_dir, resume=args.resume, data_dir=args.data_dir)
    return 0


def _checkpoint_task(checkpoint: str) -> str:
    from attnlab.checkpoint import load_config

    model_type = load_config(checkpoint).get("model_type")
    if model_type not in MODEL_TYPE_TASKS:
        raise ValueError(
            f"checkpoint {checkpoint} has model_type {model_type!r}; this command takes "
            f"{' or '.join(MODEL_TYPE_TASKS)} checkpoints"
        )
    return MODEL_TYPE_TASKS[model_type]


def translate(args: argparse.Namespace) -> int:
    if _checkpoint_task(args.checkpoint) != "translation":
        raise ValueError(f"checkpoint {args.checkpoint} is not a translation model (model_type transformer)")
    return task_module("translation").translate_cli(args)


def evaluate(args: argparse.Namespace) -> int:
    return task_module(_checkpoint_task(args.checkpoint)).evaluate_cli(args)


def generate(args: argparse.Namespace) -> int:
    if _checkpoint_task(args.checkpoint) != "language_model":
        raise ValueError(f"checkpoint {args.checkpoint} is not a language model (model_type gpt)")
    return task_module("language_model").generate_cli(args)


def plot(args: argparse.Namespace) -> int:
    from attnlab.training.plots import plot_run

    for path in plot_run(args.run_dir):
        print(path)
    return 0
