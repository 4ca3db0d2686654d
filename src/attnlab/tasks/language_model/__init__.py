"""The language-model task (tinyshakespeare; Ba (CSC413 Lecture 8), "Transformer Language
Pre-training"): :mod:`.task` trains, samples and scores; :mod:`.recipe` maps its TOML tables onto
dataclasses."""

from attnlab.tasks.language_model.recipe import LMData, LMEval, LMOptim, LMRecipe
from attnlab.tasks.language_model.task import LanguageModelTask, full_val_loss, lm_loss, split_text

__all__ = [
    "LMData",
    "LMEval",
    "LMOptim",
    "LMRecipe",
    "LanguageModelTask",
    "full_val_loss",
    "lm_loss",
    "split_text",
]
