"""The translation task (Multi30k; Ba (CSC413 Lecture 8), "Transformer Machine Translation"):
:mod:`.task` trains, decodes and scores; :mod:`.recipe` maps its TOML tables onto dataclasses."""

from attnlab.tasks.translation.recipe import (
    TranslationData,
    TranslationEval,
    TranslationOptim,
    TranslationRecipe,
)
from attnlab.tasks.translation.task import TranslationTask, score

__all__ = [
    "TranslationData",
    "TranslationEval",
    "TranslationOptim",
    "TranslationRecipe",
    "TranslationTask",
    "score",
]
