"""The classification task (GPT-1-style transfer; Ba (CSC413 Lecture 8), "Transformer Language
Pre-training"): :mod:`.task` trains and scores a GPT classifier on Shakespeare lines against King
James verses (the preset) or on your own labelled text (:mod:`.corpus`), its body from a
pretrained checkpoint (``[model] init_from``) or from scratch; :mod:`.recipe` maps its TOML
tables onto dataclasses; :mod:`.transfer` trains both and compares them (``attnlab finetune``)."""

from attnlab.tasks.classification.recipe import (
    ClassificationData,
    ClassificationEval,
    ClassificationOptim,
    ClassificationRecipe,
)
from attnlab.tasks.classification.task import ClassificationTask, accuracy, batch_stream, split_scores
from attnlab.tasks.classification.transfer import ARMS, arm_recipes, compare_transfer

__all__ = [
    "ARMS",
    "ClassificationData",
    "ClassificationEval",
    "ClassificationOptim",
    "ClassificationRecipe",
    "ClassificationTask",
    "accuracy",
    "arm_recipes",
    "batch_stream",
    "compare_transfer",
    "split_scores",
]
