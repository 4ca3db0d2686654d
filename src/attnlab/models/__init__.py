"""Models over token ids, each built from one config dataclass and saved as a checkpoint.

* :class:`Transformer` — encoder-decoder (translation), :mod:`attnlab.models.transformer`
* :class:`GPT` — decoder-only language model, :mod:`attnlab.models.gpt`
* ``Encoder`` — BERT-style encoder, :mod:`attnlab.models.encoder`
* ``RNNSeq2Seq``, ``BahdanauSeq2Seq`` — recurrent baselines, :mod:`attnlab.models.rnn`
* ``GPTForSequenceClassification`` — GPT fine-tuned with a head, :mod:`attnlab.models.classifier`

Modules are imported on first use. :func:`load_pretrained` opens any checkpoint directory
by the ``model_type`` in its ``config.json``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from attnlab.checkpoint import load_config

_LAZY = {
    "Transformer": "attnlab.models.transformer",
    "GPT": "attnlab.models.gpt",
    "Encoder": "attnlab.models.encoder",
    "RNNSeq2Seq": "attnlab.models.rnn",
    "BahdanauSeq2Seq": "attnlab.models.rnn",
    "GPTForSequenceClassification": "attnlab.models.classifier",
    "PretrainedModel": "attnlab.models.base",
    "ModelCache": "attnlab.models.base",
}

MODEL_TYPES = {
    "transformer": "Transformer",
    "gpt": "GPT",
    "encoder": "Encoder",
    "gpt_classifier": "GPTForSequenceClassification",
}

__all__ = [*_LAZY, "MODEL_TYPES", "load_pretrained"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'attnlab.models' has no attribute {name!r}")


def load_pretrained(directory: str | Path, **kwargs: Any) -> Any:
    """Load any attnlab checkpoint; the class comes from ``model_type`` in its ``config.json``."""
    model_type = load_config(directory).get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"checkpoint {directory} has model_type {model_type!r}; "
            f"expected one of {', '.join(MODEL_TYPES)}"
        )
    return __getattr__(MODEL_TYPES[model_type]).from_pretrained(directory, **kwargs)
