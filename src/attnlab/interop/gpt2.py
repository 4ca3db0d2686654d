"""attnlab's GPT ↔ Hugging Face GPT-2 folders (``config.json`` + ``model.safetensors`` that
``transformers``' ``GPT2LMHeadModel.from_pretrained`` reads), both ways.

GPT-2 (Radford et al. 2019) is the GPT of Ba (CSC413 Lecture 8) with pre-LN blocks, learned
absolute positions, biases everywhere and a final LayerNorm: an attnlab GPT with
``positional = "learned"``, ``norm = "layernorm"``, ``norm_first = true`` and
``activation = "gelu"`` (exported as GPT-2's exact ``"gelu"``, not its tanh approximation)
maps onto it weight for weight; ``bias = false`` (the Shakespeare recipes') exports as zero
biases. Any other choice has no counterpart there and is refused, naming the option. GPT-2
stores its projections as ``Conv1D`` (``(in, out)``, the transpose of ``nn.Linear``); ``c_attn``
packs ``[W_q; W_k; W_v]`` as attnlab's ``in_proj`` does.

>>> save_gpt2(model, "out/")                     # then GPT2LMHeadModel.from_pretrained("out/")
>>> load_gpt2("out/")                            # an attnlab GPT again
"""

from __future__ import annotations

from pathlib import Path

import torch

from attnlab.interop.hf_folders import BOS_ID, EOS_ID, PAD_ID, read_folder, refuse_options, write_folder
from attnlab.models import GPT, GPTConfig

REQUIRED = {"positional": "learned", "norm": "layernorm", "norm_first": True, "activation": "gelu",
            "num_kv_heads": None}
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


def check_gpt2(config: GPTConfig) -> None:
    """Refuse, in one line naming the option, a GPT that GPT-2 cannot express."""
    refuse_options(config, REQUIRED, "GPT-2")


def gpt2_config(config: GPTConfig) -> dict:
    """The ``config.json`` of ``GPT2LMHeadModel`` for ``config``."""
    c = config
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c.vocab_size,
            "n_positions": c.block_size, "n_embd": c.d_model, "n_layer": c.num_layers, "n_head": c.num_heads,
            "n_inner": c.ffn_dim, "activation_function": "gelu", "layer_norm_epsilon": c.norm_eps,
            "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "attn_pdrop": c.attn_dropout,
            "tie_word_embeddings": c.tie_output, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
            "pad_token_id": PAD_ID}


def save_gpt2(model: GPT, directory: str | Path, *, tokenizer_json: str | None = None) -> Path:
    """Write ``model`` as a Hugging Face GPT-2 folder (atomically), with ``tokenizer_json`` (a
    Hugging Face ``tokenizer.json``) as the tokenizer ``AutoTokenizer`` loads; returns the folder."""
    check_gpt2(model.config)
    ours, out = model.state_dict(), {}

    def tensor(name: str):  # a bias a GPT without biases lacks: zeros, one per output of its weight
        found = ours.get(name)
        return torch.zeros(ours[name.removesuffix("bias") + "weight"].shape[0]) if found is None else found

    for name, theirs in TOP_MAP.items():
        out[theirs] = tensor(name)
    for i in range(model.config.num_layers):
        for name, (theirs, transposed) in LAYER_MAP.items():
            t = tensor(f"decoder.layers.{i}.{name}")
            out[f"transformer.h.{i}.{theirs}"] = t.T if transposed else t
    if not model.config.tie_output:
        out["lm_head.weight"] = ours["head.weight"]
    return write_folder(directory, out, gpt2_config(model.config), tokenizer_json)


def load_gpt2(directory: str | Path) -> GPT:
    """A GPT-2 folder (``config.json`` + ``model.safetensors``) as an attnlab GPT."""
    c, weights = read_folder(directory, "gpt2")
    file = Path(directory) / "config.json"
    activation = c.get("activation_function", "gelu_new")  # GPT-2's own default: gelu's tanh form
    if activation != "gelu":
        raise ValueError(f"{file}: activation_function {activation!r} has no counterpart in attnlab's GPT "
                         '(it takes "gelu")')
    d = c["n_embd"]
    config = GPTConfig(vocab_size=c["vocab_size"], block_size=c["n_positions"], d_model=d,
                       num_heads=c["n_head"], num_layers=c["n_layer"], d_ff=c.get("n_inner") or 4 * d,
                       norm_eps=c.get("layer_norm_epsilon", 1e-5),
                       tie_output=c.get("tie_word_embeddings", True), dropout=0.0, bias=True, **REQUIRED)
    named = ("transformer.", "lm_head.")  # a base GPT2Model's folder names its tensors without the prefix
    theirs = {k if k.startswith(named) else f"transformer.{k}": v for k, v in weights.items()}
    ours = {name: theirs[t] for name, t in TOP_MAP.items()}
    for i in range(config.num_layers):
        for name, (t, transposed) in LAYER_MAP.items():
            w = theirs[f"transformer.h.{i}.{t}"]
            ours[f"decoder.layers.{i}.{name}"] = w.T if transposed else w
    ours["head.weight"] = theirs.get("lm_head.weight", ours["tok_embed.weight"])
    model = GPT(config)
    model.load_state_dict(ours)
    return model
