"""attnlab's GPT ↔ Hugging Face Llama folders (``LlamaForCausalLM``), both ways.

The Llama family (Touvron et al. 2023; SmolLM2 among them) is a GPT with rotary positions,
RMSNorm before each sub-layer, a SwiGLU feed-forward, no biases and, often, grouped-query
attention: an attnlab GPT with ``positional = "rope"`` (its ``rope_base`` is Llama's
``rope_theta``), ``norm = "rmsnorm"``, ``norm_first = true``, ``bias = false``,
``activation = "swiglu"`` and any ``num_kv_heads``. Other choices are refused by name.

Two layouts differ. attnlab rotates the pairs ``(x_{2i}, x_{2i+1})`` of a head (Su et al.;
Meta's original code); Hugging Face's Llama rotates ``(x_i, x_{i+d_h/2})``. The same model in
both is the same weights with the rows of ``W_q`` and ``W_k`` of each head reordered (even rows
first, then odd: :func:`to_half_layout`), as ``transformers``' own conversion script does.
attnlab's SwiGLU ``w1`` stacks ``[W_gate; W_up]``: Llama's ``gate_proj`` and ``up_proj``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnlab.interop.hf_folders import BOS_ID, EOS_ID, PAD_ID, read_folder, refuse_options, write_folder
from attnlab.models import GPT, GPTConfig

REQUIRED = {"positional": "rope", "norm": "rmsnorm", "norm_first": True, "bias": False,
            "activation": "swiglu"}
"""The GPT options Llama has a counterpart for, each with the only value it takes."""


def _head_order(d: int, heads: int, half: bool) -> Tensor:
    """Row indices reordering each head's ``d / heads`` rows from the pairs layout to the halves
    layout (``half``) or back."""
    d_h = d // heads
    # row j of a head in the halves layout is row within[j] in the pairs layout
    within = torch.cat([torch.arange(0, d_h, 2), torch.arange(1, d_h, 2)])
    if not half:
        within = torch.argsort(within)
    return (torch.arange(heads)[:, None] * d_h + within).reshape(-1)


def to_half_layout(w: Tensor, heads: int) -> Tensor:
    """``W_q`` or ``W_k`` ``(heads · d_h, d)`` with each head's rows reordered for Llama's rotation."""
    return w[_head_order(w.shape[0], heads, half=True)]


def from_half_layout(w: Tensor, heads: int) -> Tensor:
    """The inverse of :func:`to_half_layout`."""
    return w[_head_order(w.shape[0], heads, half=False)]


def llama_config(c: GPTConfig) -> dict:
    """The ``config.json`` of ``LlamaForCausalLM`` for ``c``."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": c.ffn_dim, "num_hidden_layers": c.num_layers,
            "num_attention_heads": c.num_heads, "num_key_value_heads": c.num_kv_heads or c.num_heads,
            "head_dim": c.d_model // c.num_heads, "hidden_act": "silu",
            "max_position_embeddings": c.block_size, "rms_norm_eps": c.norm_eps,
            "rope_theta": c.rope_base,  # where transformers 4 reads it; 5 reads rope_parameters
            "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_base},
            "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": PAD_ID,
            "tie_word_embeddings": c.tie_output, "attention_bias": False, "mlp_bias": False}


def save_llama(model: GPT, directory: str | Path, *, tokenizer_json: str | None = None) -> Path:
    """Write ``model`` as a Hugging Face Llama folder (atomically); returns the folder."""
    c = model.config
    refuse_options(c, REQUIRED, "Llama")
    ours, kv = model.state_dict(), c.num_kv_heads or c.num_heads
    kv_dim = kv * (c.d_model // c.num_heads)
    out = {"model.embed_tokens.weight": ours["tok_embed.weight"],
           "model.norm.weight": ours["decoder.norm.weight"]}
    for i in range(c.num_layers):
        mine, theirs = f"decoder.layers.{i}.", f"model.layers.{i}."
        q, k, v = ours[mine + "self_attn.in_proj.weight"].split([c.d_model, kv_dim, kv_dim])
        gate, up = ours[mine + "ffn.w1.weight"].chunk(2)
        out |= {theirs + "self_attn.q_proj.weight": to_half_layout(q, c.num_heads),
                theirs + "self_attn.k_proj.weight": to_half_layout(k, kv),
                theirs + "self_attn.v_proj.weight": v,
                theirs + "self_attn.o_proj.weight": ours[mine + "self_attn.out_proj.weight"],
                theirs + "mlp.gate_proj.weight": gate, theirs + "mlp.up_proj.weight": up,
                theirs + "mlp.down_proj.weight": ours[mine + "ffn.w2.weight"],
                theirs + "input_layernorm.weight": ours[mine + "norm1.weight"],
                theirs + "post_attention_layernorm.weight": ours[mine + "norm2.weight"]}
    if not c.tie_output:
        out["lm_head.weight"] = ours["head.weight"]
    return write_folder(directory, out, llama_config(c), tokenizer_json)


def load_llama(directory: str | Path) -> GPT:
    """A Llama folder (``config.json`` + ``model.safetensors``) as an attnlab GPT."""
    return llama_from(*read_folder(directory, "llama"), Path(directory) / "config.json")


def llama_from(c: dict, theirs: dict[str, Tensor], where: Path) -> GPT:
    """An attnlab GPT from a Llama ``config.json`` ``c`` and its tensors by Hugging Face name
    (``where``: the file the config came from, for the errors)."""
    heads, d = c["num_attention_heads"], c["hidden_size"]
    kv = c.get("num_key_value_heads") or heads
    rope = c.get("rope_parameters") or {"rope_type": "default", "rope_theta": c.get("rope_theta", 10000.0)}
    found = {"head_dim": c.get("head_dim", d // heads), "hidden_act": c.get("hidden_act", "silu"),
             "rope_type": rope.get("rope_type", "default"), "attention_bias": c.get("attention_bias", False),
             "mlp_bias": c.get("mlp_bias", False)}
    takes = {"head_dim": d // heads, "hidden_act": "silu", "rope_type": "default", "attention_bias": False,
             "mlp_bias": False}
    for name, value in found.items():
        if value != takes[name]:
            raise ValueError(f"{where}: {name} = {value!r} has no counterpart in "
                             f"attnlab's GPT (it takes {takes[name]!r})")
    config = GPTConfig(vocab_size=c["vocab_size"], block_size=c["max_position_embeddings"], d_model=d,
                       num_heads=heads, num_kv_heads=None if kv == heads else kv,
                       num_layers=c["num_hidden_layers"], d_ff=c["intermediate_size"],
                       norm_eps=c.get("rms_norm_eps", 1e-6), rope_base=float(rope.get("rope_theta", 10000.0)),
                       tie_output=c.get("tie_word_embeddings", False), dropout=0.0, **REQUIRED)
    ours = {"tok_embed.weight": theirs["model.embed_tokens.weight"],
            "decoder.norm.weight": theirs["model.norm.weight"]}
    for i in range(config.num_layers):
        mine, t = f"decoder.layers.{i}.", f"model.layers.{i}."
        q = from_half_layout(theirs[t + "self_attn.q_proj.weight"], heads)
        k = from_half_layout(theirs[t + "self_attn.k_proj.weight"], kv)
        ours |= {mine + "self_attn.in_proj.weight": torch.cat([q, k, theirs[t + "self_attn.v_proj.weight"]]),
                 mine + "self_attn.out_proj.weight": theirs[t + "self_attn.o_proj.weight"],
                 mine + "ffn.w1.weight": torch.cat([theirs[t + "mlp.gate_proj.weight"],
                                                    theirs[t + "mlp.up_proj.weight"]]),
                 mine + "ffn.w2.weight": theirs[t + "mlp.down_proj.weight"],
                 mine + "norm1.weight": theirs[t + "input_layernorm.weight"],
                 mine + "norm2.weight": theirs[t + "post_attention_layernorm.weight"]}
    ours["head.weight"] = theirs.get("lm_head.weight", ours["tok_embed.weight"])
    model = GPT(config)
    model.load_state_dict(ours)
    return model
