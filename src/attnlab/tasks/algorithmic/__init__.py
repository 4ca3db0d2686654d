"""The Neural Turing Machine's algorithmic tasks (Graves, Wayne & Danihelka 2014, §4): :mod:`.task`
trains and scores an NTM or its LSTM baseline; :mod:`.recipe` maps its TOML tables onto
dataclasses."""

from attnlab.tasks.algorithmic.recipe import (
    AlgorithmicData,
    AlgorithmicEval,
    AlgorithmicOptim,
    AlgorithmicRecipe,
)
from attnlab.tasks.algorithmic.task import (
    AlgorithmicTask,
    bit_errors,
    draw_memory_access,
    fixed_episodes,
    score_lengths,
    sequence_cost,
    train_episodes,
)

__all__ = [
    "AlgorithmicData",
    "AlgorithmicEval",
    "AlgorithmicOptim",
    "AlgorithmicRecipe",
    "AlgorithmicTask",
    "bit_errors",
    "draw_memory_access",
    "fixed_episodes",
    "score_lengths",
    "sequence_cost",
    "train_episodes",
]
