"""The CLI's task commands: each reads its arguments and calls the task that fits.

``train`` dispatches on the recipe's ``task``; ``evaluate`` on the checkpoint's ``model_type``
(each task lists the model types it scores); ``translate`` and ``generate`` belong to one task
each and refuse the other checkpoints by name.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnlab.checkpoint import resolve_resume, run_dir_of
from attnlab.config import apply_overrides
from attnlab.tasks import EvaluateRequest, load_recipe, task_for_checkpoint
from attnlab.tasks import train as train_task
from attnlab.tasks.base import saved_recipe
from attnlab.tasks.language_model import LanguageModelTask, generate_cli
from attnlab.tasks.translation import TranslationTask, translate_cli


def train(args: argparse.Namespace) -> int:
    """A new run from ``--config``, or ``--resume`` a run, by default into its own directory
    with its own recipe (``--config`` then must agree with it; overrides apply to either)."""
    if args.config is not None:
        recipe = load_recipe(args.config, args.overrides)
    elif args.resume is not None:
        recipe = apply_overrides(saved_recipe(resolve_resume(args.resume)), args.overrides)
    else:
        raise ValueError("train needs --config RECIPE, or --resume RUN to continue a run")
    if args.run_dir:
        run_dir = Path(args.run_dir)
    else:
        run_dir = run_dir_of(args.resume) if args.resume else Path("runs") / Path(args.config).stem
    train_task(recipe, run_dir=run_dir, resume=args.resume, data_dir=args.data_dir, device=args.device)
    return 0


def translate(args: argparse.Namespace) -> int:
    if task_for_checkpoint(args.checkpoint) is not TranslationTask:
        raise ValueError(f"checkpoint {args.checkpoint} is not a translation model (model_type transformer)")
    return translate_cli(args)


def evaluate(args: argparse.Namespace) -> int:
    task = task_for_checkpoint(args.checkpoint)
    request = EvaluateRequest(
        split=args.split, data_dir=args.data_dir, device=args.device,
        beam_size=args.beam, length_penalty=args.length_penalty,
    )
    print(task.format_scores(task.evaluate(Path(args.checkpoint), request)), flush=True)
    return 0


def generate(args: argparse.Namespace) -> int:
    if task_for_checkpoint(args.checkpoint) is not LanguageModelTask:
        raise ValueError(f"checkpoint {args.checkpoint} is not a language model (model_type gpt)")
    return generate_cli(args)


def plot(args: argparse.Namespace) -> int:
    from attnlab.training.plots import plot_run

    for path in plot_run(args.run_dir):
        print(path)
    return 0
