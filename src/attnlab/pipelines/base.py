"""The pipeline seam: one model with its tokenizer(s) and decoding settings.

A checkpoint directory holds the model (``model.safetensors`` + ``config.json``), its tokenizer
file(s) and, when a task trained it, the ``recipe.json`` whose ``[eval]`` table holds the
decoding settings (:mod:`attnlab.checkpoint`). :meth:`Pipeline.from_checkpoint` reads the three
and refuses, in one line, a checkpoint of a model the pipeline does not run;
:meth:`Pipeline.save` writes them back. A subclass per model family adds the calls a user makes
(``translate``, ``generate``, ``caption``, ``embed``) and ``attention``, the weights a picture or
a view draws. Models never hold tokenizers: the pipeline does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from attnlab.checkpoint import RECIPE_FILE, load_config, saved_recipe_or_empty
from attnlab.devices import model_device
from attnlab.models import load_pretrained
from attnlab.pipelines.decoding import DecodeConfig, saved_decoding, with_overrides

__all__ = ["DecodingPipeline", "Pipeline"]

P = TypeVar("P", bound="Pipeline")


class Pipeline:
    """A model, its tokenizer(s) and its checkpoint's recipe (``{}`` when it has none).

    A subclass names the ``model_types`` it runs — the registered models of its task,
    ``models.task_models("translation")``, as each model declared at registration —
    ``family`` (its refusals' words: ``"a translation model"``), and reads and writes its
    tokenizer files (:meth:`from_files`, :meth:`tokenizer_files`).
    """

    model_types: ClassVar[tuple[str, ...]] = ()
    family: ClassVar[str] = ""

    model: nn.Module
    recipe: dict[str, Any]

    @classmethod
    def check_checkpoint(cls, checkpoint: str | Path, taker: str | None = None) -> None:
        """Refuse, in one line, a checkpoint whose model this pipeline does not run, naming its
        model type and the ones ``taker`` (a command: ``translate``, ``serve --translator``)
        takes."""
        model_type = load_config(checkpoint).get("model_type")
        if model_type not in cls.model_types:
            types = ", ".join(cls.model_types)
            why = f"{taker} takes {types} checkpoints" if taker else f"{cls.family} is one of {types}"
            raise ValueError(f"checkpoint {checkpoint} has model_type {model_type!r}; {why}")

    @classmethod
    def from_checkpoint(cls: type[P], checkpoint: str | Path, *, device: str | torch.device = "cpu") -> P:
        """The pipeline of a checkpoint directory, its model on ``device`` (see the module
        docstring); ``ValueError`` for a model of another family, ``FileNotFoundError`` for a
        missing file, each naming it."""
        cls.check_checkpoint(checkpoint)
        model = load_pretrained(checkpoint, device=device)
        return cls.from_files(model, Path(checkpoint), saved_recipe_or_empty(checkpoint))

    @classmethod
    def from_files(cls: type[P], model: nn.Module, checkpoint: Path, recipe: dict[str, Any]) -> P:
        """The pipeline of ``model`` with the tokenizer file(s) of ``checkpoint``."""
        raise NotImplementedError

    def tokenizer_files(self) -> dict[str, str]:
        """The tokenizer files a checkpoint of this pipeline holds, name → text."""
        raise NotImplementedError

    def save(self, directory: str | Path) -> Path:
        """Write the model, its tokenizer files and the recipe (when there is one) into the
        checkpoint directory ``directory``, atomically; :meth:`from_checkpoint` reads it back."""
        files = {name: text.encode() for name, text in self.tokenizer_files().items()}
        if self.recipe:
            files[RECIPE_FILE] = (json.dumps(self.recipe, indent=2, ensure_ascii=False) + "\n").encode()
        return self.model.save_pretrained(directory, extra=files)

    @property
    def device(self) -> torch.device:
        """Where the model's parameters are (its inputs are moved there)."""
        return model_device(self.model)


class DecodingPipeline(Pipeline):
    """A pipeline that decodes with beam search or greedily (a translator, a captioner): its
    :class:`~attnlab.pipelines.decoding.DecodeConfig`, by default the ``[eval]`` table of its
    ``recipe`` over the family's ``default_decoding``."""

    default_decoding: ClassVar[DecodeConfig] = DecodeConfig()
    decoding: DecodeConfig

    def __init__(self, *, decoding: DecodeConfig | None = None, recipe: dict[str, Any] | None = None) -> None:
        self.recipe = recipe or {}
        self.decoding = decoding or saved_decoding(self.recipe, self.default_decoding)

    def settings(self, **overrides: Any) -> DecodeConfig:
        """This pipeline's decoding settings with the ``overrides`` that are not ``None`` (a
        command line's ``--beam`` and so on)."""
        return with_overrides(self.decoding, **overrides)
