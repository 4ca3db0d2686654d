"""Tasks: the glue that turns a TOML recipe into data, a model, a training run and decoding.

A recipe names its task at the top level (``task = "translation"`` or
``task = "language_model"``); :func:`load_recipe` reads it and :func:`task_module` finds the
module that implements it. Each task module provides:

* ``train(recipe: dict, *, run_dir, resume, data_dir) -> Path`` — train, return the run dir;
* ``evaluate(checkpoint, args) -> dict`` — score a checkpoint of that task's model type.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

TASKS = {"translation": "attnlab.tasks.translation", "language_model": "attnlab.tasks.language_model"}
MODEL_TYPE_TASKS = {"transformer": "translation", "gpt": "language_model"}


def task_module(task: str) -> ModuleType:
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    return importlib.import_module(TASKS[task])


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Read a TOML recipe and apply dotted ``key=value`` overrides (values are TOML literals).

    Unknown keys are rejected later, by name, when each table is mapped onto its dataclass.
    """
    from attnlab.config import load_toml

    recipe = load_toml(path, overrides)
    if "task" not in recipe:
        raise ValueError(f"config {path} must name its task at the top level, e.g. task = \"translation\"")
    return recipe
