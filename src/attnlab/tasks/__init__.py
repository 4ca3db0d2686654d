"""Tasks: the glue that turns a TOML recipe into data, a model, a training run and its report.

A recipe names its task at the top level (``task = "translation"``); :func:`train` finds the
:class:`~attnlab.tasks.base.Task` registered under that name and runs it through the one
training driver; ``attnlab evaluate`` finds the task by the checkpoint's ``model_type``.

* :mod:`~attnlab.tasks.base` — the :class:`Task` seam, the registry, :func:`train`
* :mod:`~attnlab.tasks.recipe` — :class:`Recipe`, :class:`ModelTable` (TOML tables → dataclasses)

and one package a task, each its ``task.py`` and ``recipe.py``:

* :mod:`~attnlab.tasks.translation` — Multi30k translation (:class:`TranslationTask`)
* :mod:`~attnlab.tasks.language_model` — a GPT on tinyshakespeare (:class:`LanguageModelTask`)
* :mod:`~attnlab.tasks.algorithmic` — the Neural Turing Machine's tasks (copy, repeat copy,
  associative recall, priority sort) for the NTM and its LSTM baseline (:class:`AlgorithmicTask`)
* :mod:`~attnlab.tasks.captioning` — Show, Attend and Tell on scenes of handwritten digits
  (:class:`CaptioningTask`), with ``boxes.py`` (attention on the named digit) and
  ``pictures.py``
* :mod:`~attnlab.tasks.classification` — a GPT classifier, Shakespeare against King James
  (:class:`ClassificationTask`), fine-tuned from a pretrained GPT (``[model] init_from``) or
  from scratch, with ``transfer.py`` (both, compared: ``attnlab finetune``)
* :mod:`~attnlab.tasks.speech` — an attention-based recognizer (listen-attend-spell or the
  speech Transformer) on the synthetic speech corpus or your WAV files (:class:`SpeechTask`)

The command line that drives them is :mod:`attnlab.cli`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from attnlab.tasks.algorithmic import AlgorithmicRecipe, AlgorithmicTask
from attnlab.tasks.base import (
    TASKS,
    EvaluateRequest,
    Task,
    register_task,
    task_class,
    task_for_checkpoint,
    train,
)
from attnlab.tasks.captioning import CaptioningTask, CaptionRecipe
from attnlab.tasks.classification import ClassificationRecipe, ClassificationTask, compare_transfer
from attnlab.tasks.language_model import LanguageModelTask, LMRecipe
from attnlab.tasks.recipe import ModelTable, Recipe, fit_warmup
from attnlab.tasks.speech import SpeechRecipe, SpeechTask
from attnlab.tasks.translation import TranslationRecipe, TranslationTask

__all__ = [
    "AlgorithmicRecipe",
    "AlgorithmicTask",
    "CaptionRecipe",
    "CaptioningTask",
    "ClassificationRecipe",
    "ClassificationTask",
    "TASKS",
    "EvaluateRequest",
    "LMRecipe",
    "LanguageModelTask",
    "ModelTable",
    "Recipe",
    "SpeechRecipe",
    "SpeechTask",
    "Task",
    "TranslationRecipe",
    "TranslationTask",
    "compare_transfer",
    "load_recipe",
    "register_task",
    "task_class",
    "task_for_checkpoint",
    "train",
]


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Read a TOML recipe and apply dotted ``key=value`` overrides (values are TOML literals).

    Unknown keys are rejected later, by name, when each table is mapped onto its dataclass.
    A run the overrides make no longer than its warmup gets a shorter warmup, with a note on
    stderr (:func:`~attnlab.tasks.recipe.fit_warmup`).
    """
    from attnlab.config import load_toml

    recipe = load_toml(path, overrides)
    if "task" not in recipe:
        raise ValueError(f"config {path} must name its task at the top level, e.g. task = \"translation\"")
    if (note := fit_warmup(recipe, overrides or [])) is not None:
        print(note, file=sys.stderr, flush=True)
    return recipe
