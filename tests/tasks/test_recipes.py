"""A recipe's result must not depend on the machine's speed (issue 14, item 12): every shipped
recipe is bounded by steps, its schedule ends where its training ends, and its header says how
many steps it runs. Wall time (``max_time_s``) is only a safety net that warns when it fires."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab.tasks import TASKS, load_recipe
from repo_paths import CONFIGS

RECIPES = sorted(p for p in CONFIGS.glob("*.toml") if "\ntask =" in "\n" + p.read_text())


def header(path: Path) -> str:
    """The comment block a recipe starts with."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def test_the_shipped_recipes_are_found():
    assert {p.stem for p in RECIPES} >= {"multi30k_de_en", "multi30k_en_de", "multi30k_demo",
                                          "shakespeare_char", "shakespeare_bpe", "shakespeare_nanogpt_cpu",
                                          "shakespeare_vs_kjv"}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_is_bounded_by_steps_with_a_schedule_that_ends_there(path):
    raw = load_recipe(path)
    recipe = TASKS[raw["task"]].recipe_class.from_dict(raw)
    steps = recipe.train.max_steps
    assert steps is not None and 1 <= steps <= 30_000, f"{path.name}: train.max_steps={steps}"
    assert recipe.optim.schedule != "noam", f"{path.name}: the noam schedule never ends"
    if recipe.optim.schedule == "warmup_cosine":
        assert recipe.optim.decay_steps in (None, steps), f"{path.name}: the cosine ends elsewhere"
    assert f"{steps:,}" in header(path), f"{path.name}: the header does not state its {steps:,} steps"
