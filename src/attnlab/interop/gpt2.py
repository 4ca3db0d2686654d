"""attnlab's GPT ↔ Hugging Face GPT-2 folders (``config.json`` + ``model.safetensors`` that
``transformers``' ``GPT2LMHeadModel.from_pretrained`` reads), both ways.

GPT-2 (Radford et al. 2019) is the GPT of Ba (CSC413 Lecture 8) with pre-LN blocks, learned
absolute positions, biases everywhere and a final LayerNorm: an attnlab GPT with
``positional = "learned"``, ``norm = "layernorm"``, ``norm_first = true``, ``bias = true`` and
``activation = "gelu"`` (exported as GPT-2's exact ``"gelu"``, not its tanh approximation)
maps onto it weight for weight. Any other choice has no counterpart there and is refused,
naming the option. GPT-2 stores its projections as ``Conv1D`` (``(in, out)``, the transpose of
``nn.Linear``); ``c_attn`` packs ``[W_q; W_k; W_v]`` as attnlab's ``in_proj`` does.

>>> save_gpt2(model, "out/")                     # then GPT2LMHeadModel.from_pretrained("out/")
>>> load_gpt2("out/")                            # an attnlab GPT again
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from attnlab.atomic import atomic_directory
from attnlab.models import GPT, GPTConfig
from attnlab.parsing import read_json

REQUIRED = {"positional": "learned", "norm": "layernorm", "norm_first": True, "bias": True,
            "activation": "gelu", "num_kv_heads": None}
"""The GPT options GPT-2 has a counterpart for, each with the only value it takes."""
LAYER_MAP = {  # attnlab name in a block -> (GPT-2 name in a block, transposed: a Conv1D)
    "norm1.weight": ("ln_1.weight", False),
    "norm1.bias": ("ln_1.bias", False),
    "self_attn.in_proj.weight": ("attn.c_attn.weight", True),
    "self_attn.in_proj.bias": ("attn.c_attn.bias", False),
    "self_attn.out_proj.weight": ("attn.c_proj.weight", True),
    "self_attn.out_proj.bias": ("attn.c_proj.bias", False),
    "norm2.weight": ("ln_2.weight", False),
    "norm2.bias": ("ln_2.bias", False),
    "ffn.w1.weight": ("mlp.c_fc.weight", True),
    "ffn.w1.bias": ("mlp.c_fc.bias", False),
    "ffn.w2.weight": ("mlp.c_proj.weight", True),
    "ffn.w2.bias": ("mlp.c_proj.bias", False),
}
TOP_MAP = {
    "tok_embed.weight": "transformer.wte.weight",
    "pos.absolute.embedding.weight": "transformer.wpe.weight",
    "decoder.norm.weight": "transformer.ln_f.weight",
    "decoder.norm.bias": "transformer.ln_f.bias",
}


TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
                    "pad_token": "<pad>", "unk_token": "<unk>"}
"""``tokenizer_config.json``: attnlab's ``tokenizer.json`` read by ``transformers`` as it is."""


def check_gpt2(config: GPTConfig) -> None:
    """Refuse, in one line naming the option, a GPT that GPT-2 cannot express."""
    for name, value in REQUIRED.items():
        if getattr(config, name) != value:
            raise ValueError(f"GPT-2 has no counterpart for {name} = {getattr(config, name)!r} "
                             f"(it takes {name} = {value!r})")


def gpt2_config(config: GPTConfig) -> dict:
    """The ``config.json`` of ``GPT2LMHeadModel`` for ``config``."""
    c = config
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c.vocab_size,
            "n_positions": c.block_size, "n_embd": c.d_model, "n_layer": c.num_layers, "n_head": c.num_heads,
            "n_inner": c.ffn_dim, "activation_function": "gelu", "layer_norm_epsilon": c.norm_eps,
            "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "attn_pdrop": c.attn_dropout,
            "tie_word_embeddings": c.tie_output}


def save_gpt2(model: GPT, directory: str | Path, *, tokenizer_json: str | None = None) -> Path:
    """Write ``model`` as a Hugging Face GPT-2 folder (atomically), with ``tokenizer_json`` (a
    Hugging Face ``tokenizer.json``) as the tokenizer ``AutoTokenizer`` loads; returns the folder."""
    check_gpt2(model.config)
    ours, out = model.state_dict(), {}
    for name, theirs in TOP_MAP.items():
        out[theirs] = ours[name]
    for i in range(model.config.num_layers):
        for name, (theirs, transposed) in LAYER_MAP.items():
            t = ours[f"decoder.layers.{i}.{name}"]
            out[f"transformer.h.{i}.{theirs}"] = t.T if transposed else t
    if not model.config.tie_output:
        out["lm_head.weight"] = ours["head.weight"]
    with atomic_directory(directory) as tmp:
        tensors = {k: v.detach().contiguous().cpu() for k, v in out.items()}
        save_file(tensors, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(gpt2_config(model.config), indent=2) + "\n")
        if tokenizer_json is not None:
            (tmp / "tokenizer.json").write_text(tokenizer_json)
            (tmp / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")
    return Path(directory)


def load_gpt2(directory: str | Path) -> GPT:
    """A GPT-2 folder (``config.json`` + ``model.safetensors``) as an attnlab GPT."""
    directory = Path(directory)
    file = directory / "config.json"
    c = read_json(file, "GPT-2 config")
    if c.get("model_type") != "gpt2":
        raise ValueError(f"{file} is not a GPT-2 config (model_type {c.get('model_type')!r})")
    activation = c.get("activation_function", "gelu_new")  # GPT-2's own default: gelu's tanh form
    if activation != "gelu":
        raise ValueError(f"{file}: activation_function {activation!r} has no counterpart in attnlab's GPT "
                         '(it takes "gelu")')
    d = c["n_embd"]
    config = GPTConfig(vocab_size=c["vocab_size"], block_size=c["n_positions"], d_model=d,
                       num_heads=c["n_head"], num_layers=c["n_layer"], d_ff=c.get("n_inner") or 4 * d,
                       norm_eps=c.get("layer_norm_epsilon", 1e-5),
                       tie_output=c.get("tie_word_embeddings", True), dropout=0.0, **REQUIRED)
    theirs = _weights(directory)
    ours = {name: theirs[t] for name, t in TOP_MAP.items()}
    for i in range(config.num_layers):
        for name, (t, transposed) in LAYER_MAP.items():
            w = theirs[f"transformer.h.{i}.{t}"]
            ours[f"decoder.layers.{i}.{name}"] = w.T if transposed else w
    ours["head.weight"] = theirs.get("lm_head.weight", ours["tok_embed.weight"])
    model = GPT(config)
    model.load_state_dict(ours)
    return model


def _weights(directory: Path) -> dict[str, Tensor]:
    """The folder's tensors, named as ``GPT2LMHeadModel`` names them (``transformer.`` prefixed)."""
    path = directory / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (attnlab reads safetensors only, never a pickle)")
    weights = load_file(str(path))
    return {k if k.startswith(("transformer.", "lm_head.")) else f"transformer.{k}": v.to(torch.float32)
            for k, v in weights.items()}
