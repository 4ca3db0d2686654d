"""Hugging Face model folders (``config.json`` + ``model.safetensors`` + the tokenizer files
``AutoTokenizer`` reads), written atomically and read without unpickling: what every export and
import of :mod:`attnlab.interop` shares (:mod:`~attnlab.interop.gpt2`, :mod:`~attnlab.interop.llama`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from attnlab.atomic import atomic_directory
from attnlab.parsing import read_json

TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
                    "pad_token": "<pad>", "unk_token": "<unk>"}
"""``tokenizer_config.json``: attnlab's ``tokenizer.json`` read by ``transformers`` as it is."""


def refuse_options(config: Any, required: Mapping[str, Any], target: str) -> None:
    """Refuse, in one line naming the option, a config ``target`` has no counterpart for."""
    for name, value in required.items():
        if getattr(config, name) != value:
            raise ValueError(f"{target} has no counterpart for {name} = {getattr(config, name)!r} "
                             f"(it takes {name} = {value!r})")


def write_folder(directory: str | Path, tensors: Mapping[str, Tensor], config: Mapping[str, Any],
                 tokenizer_json: str | None = None) -> Path:
    """The folder ``directory`` (replaced as a whole, atomically): the weights, the config and,
    given, the tokenizer."""
    with atomic_directory(directory) as tmp:
        weights = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        save_file(weights, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(dict(config), indent=2) + "\n")
        if tokenizer_json is not None:
            (tmp / "tokenizer.json").write_text(tokenizer_json)
            (tmp / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")
    return Path(directory)


def read_folder(directory: str | Path, model_type: str) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``(config.json, weights in float32)`` of a folder whose model is ``model_type``."""
    directory = Path(directory)
    config = read_json(directory / "config.json", f"{model_type} config")
    if config.get("model_type") != model_type:
        raise ValueError(f"{directory / 'config.json'} is not a {model_type} config "
                         f"(model_type {config.get('model_type')!r})")
    path = directory / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (attnlab reads safetensors only, never a pickle)")
    return config, {k: v.to(torch.float32) for k, v in load_file(str(path)).items()}
