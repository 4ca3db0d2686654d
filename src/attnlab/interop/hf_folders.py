"""Hugging Face model folders (``config.json`` + ``model.safetensors`` + the tokenizer files
``AutoTokenizer`` reads), written atomically and read without unpickling: what every export and
import of :mod:`attnlab.interop` shares (:mod:`~attnlab.interop.gpt2`, :mod:`~attnlab.interop.llama`,
:mod:`~attnlab.interop.marian`).

attnlab's byte-level BPE and word tokenizers are Hugging Face ``tokenizer.json`` files already;
a character tokenizer is written as one (:func:`char_tokenizer_json`). ``tokenizer_config.json``
(:func:`attnlab.checkpoint.tokenizer_config`) names ``PreTrainedTokenizerFast`` and the special tokens,
and sets ``split_special_tokens`` so that ``"<eos>"`` typed in a text is text, as it is for attnlab."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from attnlab.atomic import atomic_directory
from attnlab.checkpoint import tokenizer_config
from attnlab.parsing import read_json

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
"""The ids of ``<pad>``, ``<bos>`` and ``<eos>`` in attnlab's tokenizers (``data.tokenizers.SPECIAL_TOKENS``):
what an exported ``config.json`` names (``transformers``' own defaults, GPT-2's 50256, are out of range)."""
def char_tokenizer_json(itos: Sequence[str], specials: Sequence[str]) -> str:
    """A character tokenizer (its id → symbol list: the ``specials``, then one character each)
    as a Hugging Face ``tokenizer.json``: BPE without merges, so every character is its own
    token, and a decoder that joins them. A character outside the vocabulary becomes
    ``<unk>`` there (attnlab's refuses the text)."""
    from tokenizers import Tokenizer, decoders, models

    unk = "<unk>" if "<unk>" in specials else None
    tok = Tokenizer(models.BPE(vocab={s: i for i, s in enumerate(itos)}, merges=[], unk_token=unk))
    tok.add_special_tokens(list(specials))
    tok.decoder = decoders.Fuse()
    return tok.to_str(pretty=True)


def refuse_options(config: Any, required: Mapping[str, Any], target: str) -> None:
    """Refuse, in one line naming the option, a config ``target`` has no counterpart for; a tuple in
    ``required`` is the values it takes."""
    for name, value in required.items():
        allowed = value if isinstance(value, tuple) else (value,)
        if getattr(config, name) not in allowed:
            takes = " or ".join(f"{name} = {v!r}" for v in allowed)
            raise ValueError(f"{target} has no counterpart for {name} = {getattr(config, name)!r} "
                             f"(it takes {takes})")


def write_folder(directory: str | Path, tensors: Mapping[str, Tensor], config: Mapping[str, Any],
                 tokenizer_json: str | None = None, *, files: Mapping[str, str] | None = None) -> Path:
    """The folder ``directory`` (replaced as a whole, atomically): the weights, the config, given,
    the tokenizer and ``files`` (more text files, by their path in the folder)."""
    with atomic_directory(directory) as tmp:
        weights = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        save_file(weights, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(dict(config), indent=2) + "\n")
        if tokenizer_json is not None:
            (tmp / "tokenizer.json").write_text(tokenizer_json)
            settings = json.dumps(tokenizer_config(tokenizer_json), indent=2) + "\n"
            (tmp / "tokenizer_config.json").write_text(settings)
        for name, text in (files or {}).items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)
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
