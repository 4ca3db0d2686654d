"""What every attnlab model shares: config construction, checkpoints, parameter counts, caches
(a Transformer's :class:`~attnlab.modules.stacks.ModelCache` comes from its stack's
``new_cache``; a recurrent model's state is a :class:`StateCache`).

A model subclasses :class:`PretrainedModel`, sets ``model_type`` (written to
``config.json``) and ``config_class`` (its config dataclass), takes that config in its
constructor, and registers itself with :func:`register_model` where it is defined, naming the
task that trains it (``@register_model(task="translation")``). It then gets ``from_config``,
``save_pretrained``, ``from_pretrained`` and ``num_parameters``, :func:`load_pretrained` opens
its checkpoints by their ``model_type``, and :func:`task_models` lists it among its task's.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from attnlab.checkpoint import (
    CONFIG_NAME,
    ExtraFiles,
    load_config,
    load_into,
    load_state,
    save_pretrained,
)
from attnlab.config import upgrade
from attnlab.devices import resolve_device
from attnlab.memory import check_fits, leading_sizes, measure_model
from attnlab.modules.stacks import ModelCache  # noqa: F401  (attnlab.models.ModelCache)
from attnlab.validation import indefinite

MODEL_TYPES: dict[str, type[PretrainedModel]] = {}
"""Every registered model class by the ``model_type`` its ``config.json`` carries."""

MODEL_TASKS: dict[str, str] = {}
"""The task that trains each registered model type (a recipe's ``task = "..."``), for the
model types that declared one: what a recipe's ``[model] type`` may name and which task
``attnlab evaluate`` scores a checkpoint with."""

DEFAULT_MODELS: dict[str, str] = {}
"""Each task's default model type: what a recipe trains when its ``[model]`` names no ``type``."""

M = TypeVar("M", bound="type[PretrainedModel]")


def register_model(cls: M | None = None, *, task: str | None = None, default: bool = False) -> Any:
    """Class decorator: make ``cls`` loadable by its ``model_type`` (:func:`load_pretrained`).

    ``@register_model(task="translation")`` also declares the task that trains the model (the
    one source of which models a task's recipe may name and its pipeline runs);
    ``default=True`` makes it the model a recipe of that task trains when it names none. A
    model that no task trains (the BERT-style encoder) registers without one."""
    if cls is None:
        return lambda c: register_model(c, task=task, default=default)
    if not cls.model_type:
        raise ValueError(f"{cls.__name__} must set model_type to be registered")
    if MODEL_TYPES.get(cls.model_type, cls) is not cls:
        raise ValueError(
            f"model_type {cls.model_type!r} of {cls.__name__} is already registered by "
            f"{MODEL_TYPES[cls.model_type].__name__}"
        )
    if default and task is None:
        raise ValueError(f"{cls.__name__} is a default model of no task: give task=...")
    if default and DEFAULT_MODELS.get(task, cls.model_type) != cls.model_type:
        raise ValueError(f"task {task!r} has a default model already: {DEFAULT_MODELS[task]!r}")
    MODEL_TYPES[cls.model_type] = cls
    if task is not None:
        MODEL_TASKS[cls.model_type] = task
    if default:
        DEFAULT_MODELS[task] = cls.model_type
    return cls


def task_models(task: str) -> tuple[str, ...]:
    """The registered model types ``task`` trains: its default first, then the others by name."""
    default = DEFAULT_MODELS.get(task)
    others = sorted(t for t, owner in MODEL_TASKS.items() if owner == task and t != default)
    return (default, *others) if default is not None else tuple(others)


def load_pretrained(directory: str | Path, **kwargs: Any) -> PretrainedModel:
    """Load any attnlab checkpoint; the class comes from ``model_type`` in its ``config.json``."""
    model_type = load_config(directory).get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"checkpoint {directory} has model_type {model_type!r}; "
            f"expected one of {', '.join(MODEL_TYPES)}"
        )
    return MODEL_TYPES[model_type].from_pretrained(directory, **kwargs)


class PretrainedModel(nn.Module):
    """Base class: a model built from one config dataclass and saved as a checkpoint directory."""

    model_type: ClassVar[str] = ""
    config_class: ClassVar[type] = object
    renamed_weights: ClassVar[Mapping[str, str]] = {}  # old name prefix -> new (see load_into)
    config: Any

    @classmethod
    def from_config(cls, config: Any) -> PretrainedModel:
        """Build the model from its config dataclass (or a dict of its fields)."""
        if isinstance(config, Mapping):
            config = cls.config_class.from_dict(config)
        if not isinstance(config, cls.config_class):
            raise TypeError(
                f"config must be {indefinite(cls.config_class.__name__)} (or a dict), "
                f"got {type(config).__name__}"
            )
        return cls(config)

    def save_pretrained(self, directory: str | Path, *, extra: ExtraFiles | None = None) -> Path:
        """Write ``model.safetensors`` + ``config.json`` (+ ``extra`` files) atomically."""
        return save_pretrained(self, directory, extra=extra)

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, *, device: str | torch.device = "cpu"
    ) -> PretrainedModel:
        """Load a checkpoint written by :meth:`save_pretrained` onto ``device`` (``ValueError``
        when the machine has no such device, or not the memory for the model its
        ``config.json`` describes: counted before it is built); the model is put in eval mode."""
        device = resolve_device(device)
        config, state = load_state(directory)
        model_type = config.pop("model_type", None)
        if model_type != cls.model_type:
            raise ValueError(
                f"checkpoint {directory} has model_type {model_type!r} but {cls.__name__} "
                f"expects {cls.model_type!r}"
            )
        fields = upgrade(cls.config_class, config)
        try:
            parsed = cls.config_class.from_dict(fields)
        except ValueError as err:
            raise ValueError(f"checkpoint config {Path(directory) / CONFIG_NAME}: {err}") from None
        try:  # counted before it is built: a config.json may ask for terabytes
            size = measure_model(lambda: cls.from_config(parsed))
            check_fits([size.need(leading_sizes(parsed), training=False)])
        except ValueError as err:
            raise ValueError(f"checkpoint {directory} (config.json): {err}") from None
        model = cls.from_config(parsed)
        absent = [f.name for f in dataclasses.fields(parsed) if f.init and f.name not in fields]
        load_into(model, state, directory, absent=absent)
        return model.to(device).eval()

    def num_parameters(self, trainable_only: bool = False, exclude_embeddings: bool = False) -> int:
        """Number of parameters, tied ones counted once.

        ``exclude_embeddings`` leaves out every ``nn.Embedding`` (token, position, bias
        tables) — and so an output layer tied to one.
        """
        skip = set()
        if exclude_embeddings:
            skip = {id(m.weight) for m in self.modules() if isinstance(m, nn.Embedding)}
        return sum(
            p.numel()
            for p in self.parameters()
            if id(p) not in skip and (p.requires_grad or not trainable_only)
        )


def draws_attention(method: Callable[..., Any]) -> bool:
    """Whether a model's ``forward`` (decoder-only) or ``decode`` (encoder-decoder) can return
    its attention weights (takes ``return_weights``); an LSTM or Cho's encoder-decoder cannot."""
    return "return_weights" in inspect.signature(method).parameters


class StateCache(dict):
    """The decoding state of a recurrent model: named tensors, batch first (a decoder state,
    projected keys, the previous alignment, memory tapes).

    ``offset`` is the number of positions already decoded; :meth:`reorder` keeps batch rows
    ``index`` of every tensor (beam search), as :class:`~attnlab.modules.stacks.ModelCache`
    does for KV caches. ``weights`` keeps what a model's step reads that no batch row owns
    (its gathered weight views) across the calls of one decoding, so a one-token call does
    not gather them again.
    """

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0
        self.weights: Any = None

    def reorder(self, index: Tensor, *, static: bool = True) -> None:
        """Keep rows ``index`` of every tensor (``static`` is :class:`ModelCache`'s: a recurrent
        state names no static part, so all of it follows ``index``)."""
        for name, value in self.items():
            self[name] = value.index_select(0, index)
