"""attnlab's encoder-decoder translator ↔ Hugging Face ``MarianMTModel`` and
``PegasusForConditionalGeneration`` folders, both ways.

The translator is the Transformer of Vaswani et al. 2017 (Ba (CSC413 Lecture 8), "Transformer
Machine Translation"). Two ``transformers`` classes are that model layer for layer — the same
attention, ``fc1``/``fc2`` feed-forward, LayerNorm (ε = 1e-5), biases, sinusoids counted from
position 0 and embeddings scaled by √d (``scale_embedding``) — and differ in where the norms go:

=========================  =================================  ==================================
attnlab option             ``MarianMTModel`` (Junczys-        ``PegasusForConditionalGeneration``
                           Dowmunt et al. 2018)               (Zhang et al. 2020)
=========================  =================================  ==================================
``norm_first``             ``False``: post-LN, no final norm  ``True``: pre-LN + a final
                                                              LayerNorm on each stack
``share_embeddings``       either                             ``True`` (one ``shared`` table)
``tie_output``             either (``tie_word_embeddings``)   either
``activation``             ``"relu"`` or ``"gelu"`` (exact)   the same
=========================  =================================  ==================================

The translator must have ``positional = "sinusoidal"``, ``norm = "layernorm"``, ``norm_eps =
1e-5`` and no grouped-query heads; anything else is refused in one line naming the option.
``bias = false`` exports as zero biases. ``transformers`` starts the decoder with
``decoder_start_token_id``: attnlab's ``<bos>``; ``<pad>`` and ``<bos>`` are never generated
(``suppress_tokens`` in ``generation_config.json``, as attnlab's search blocks them).

**One reordering.** attnlab's table interleaves ``PE(p, 2i) = sin``, ``PE(p, 2i+1) = cos``
(paper §3.5); Marian's and Pegasus' put the ``d/2`` sines first and the cosines after, with the
same frequencies. A Transformer is unchanged by a permutation of its ``d`` model dimensions
applied to every weight that reads or writes the residual stream (LayerNorm's mean and variance
do not see the order), so the export reorders those dimensions — even ones first, then odd:
:func:`model_order` — and the exported model adds exactly ``transformers``' own table.

>>> save_marian(model, "out/")             # then AutoModelForSeq2SeqLM.from_pretrained("out/")
>>> load_marian("out/")                    # an attnlab Transformer again
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from attnlab.checkpoint import tokenizer_config
from attnlab.interop.hf_folders import (
    BOS_ID,
    EOS_ID,
    read_folder,
    refuse_options,
    write_folder,
)
from attnlab.models import Transformer, TransformerConfig

ACTIVATIONS = ("relu", "gelu")
COMMON = {"positional": "sinusoidal", "norm": "layernorm", "norm_eps": 1e-5, "num_kv_heads": None,
          "activation": ACTIVATIONS}
MARIAN = {**COMMON, "norm_first": False}
"""The translator options ``MarianMTModel`` has a counterpart for, each with what it takes."""
PEGASUS = {**COMMON, "norm_first": True, "share_embeddings": True}
"""The same for ``PegasusForConditionalGeneration``."""
CLASSES = {"marian": "MarianMTModel", "pegasus": "PegasusForConditionalGeneration"}
TARGET_TOKENIZER = "target_tokenizer"
"""The subfolder holding the target side's tokenizer when the vocabularies are not joint."""

ATTENTION = ("in_proj", "out_proj")  # transformers' in_proj: its q_proj, k_proj and v_proj
ENCODER_LAYER = {"self_attn": "self_attn", "norm1": "self_attn_layer_norm", "ffn.w1": "fc1", "ffn.w2": "fc2",
                 "norm2": "final_layer_norm"}
DECODER_LAYER = {"self_attn": "self_attn", "norm1": "self_attn_layer_norm", "cross_attn": "encoder_attn",
                 "norm2": "encoder_attn_layer_norm", "ffn.w1": "fc1", "ffn.w2": "fc2",
                 "norm3": "final_layer_norm"}


def model_order(d: int) -> Tensor:
    """Dimension ``j`` of the exported residual stream is attnlab's dimension ``order[j]``: the
    even dimensions (the sines) first, then the odd ones (the cosines)."""
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])


def _stream_axis(name: str) -> int | None:
    """Which axis of attnlab's tensor ``name`` runs over the ``d`` residual dimensions."""
    if name.endswith(("in_proj.bias", "w1.bias")):
        return None  # per head or per hidden unit
    if name.endswith(("embed.weight", "in_proj.weight", "w1.weight", "output.weight")):
        return 1  # reads the stream
    return 0  # writes it (out_proj, w2) or normalizes it (norm γ, β)


def _reorder(tensors: dict[str, Tensor], order: Tensor) -> dict[str, Tensor]:
    """Every tensor with its residual-stream axis taken in ``order``."""
    out = {}
    for name, t in tensors.items():
        axis = _stream_axis(name)
        out[name] = t if axis is None else t.index_select(axis, order)
    return out


def _layer_names(c: TransformerConfig) -> list[tuple[str, str]]:
    """``(attnlab prefix, transformers prefix)`` of every sub-module with a weight and a bias."""
    pairs = []
    for side, count, table in (("encoder", c.num_encoder_layers, ENCODER_LAYER),
                               ("decoder", c.num_decoder_layers, DECODER_LAYER)):
        for i in range(count):
            ours, theirs = f"stack.{side}.layers.{i}.", f"model.{side}.layers.{i}."
            for name, hf in table.items():
                if name.endswith("attn"):
                    pairs += [(f"{ours}{name}.{a}", f"{theirs}{hf}.{a}") for a in ATTENTION]
                else:
                    pairs.append((ours + name, theirs + hf))
        if c.norm_first:
            pairs.append((f"stack.{side}.norm", f"model.{side}.layer_norm"))
    return pairs


def check_translator(config: TransformerConfig) -> str:
    """The ``model_type`` (``"marian"`` or ``"pegasus"``) that can hold ``config``; otherwise a
    one-line ``ValueError`` naming, for each class, the option it has no counterpart for."""
    refusals = []
    for model_type, required in (("marian", MARIAN), ("pegasus", PEGASUS)):
        try:
            refuse_options(config, required, CLASSES[model_type])
        except ValueError as err:
            refusals.append(str(err))
            continue
        return model_type
    raise ValueError("; ".join(refusals))


def hf_config(c: TransformerConfig, model_type: str, bos_id: int, eos_id: int) -> dict:
    """The ``config.json`` of ``model_type`` for the translator ``c``."""
    config = {
        "architectures": [CLASSES[model_type]], "model_type": model_type, "vocab_size": c.src_vocab_size,
        "d_model": c.d_model, "encoder_layers": c.num_encoder_layers, "decoder_layers": c.num_decoder_layers,
        "encoder_attention_heads": c.num_heads, "decoder_attention_heads": c.num_heads,
        "encoder_ffn_dim": c.ffn_dim, "decoder_ffn_dim": c.ffn_dim, "activation_function": c.activation,
        "dropout": c.dropout, "attention_dropout": c.attn_dropout, "activation_dropout": c.activation_dropout,
        "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "max_position_embeddings": c.max_len,
        "scale_embedding": True, "tie_word_embeddings": c.tie_output, "is_encoder_decoder": True,
        "pad_token_id": c.pad_id, "bos_token_id": bos_id, "eos_token_id": eos_id,
        "decoder_start_token_id": bos_id, "forced_eos_token_id": None,
    }
    if model_type == "marian":
        config |= {"decoder_vocab_size": c.tgt_vocab_size,
                   "share_encoder_decoder_embeddings": c.share_embeddings}
    return config


def generation_config(c: TransformerConfig, bos_id: int, eos_id: int) -> dict:
    """``generation_config.json``: greedy, started by ``<bos>``, never drawing ``<pad>`` or ``<bos>``."""
    return {"decoder_start_token_id": bos_id, "bos_token_id": bos_id, "eos_token_id": eos_id,
            "pad_token_id": c.pad_id, "forced_eos_token_id": None, "max_length": c.max_len,
            "num_beams": 1, "do_sample": False, "suppress_tokens": sorted({c.pad_id, bos_id} - {eos_id})}


def _weights(model: Transformer, model_type: str) -> dict[str, Tensor]:
    """The translator's tensors under ``transformers``' names, reordered (module docstring)."""
    c = model.config
    ours = _reorder(model.state_dict(), model_order(c.d_model))
    # every table written out (a copy each): tied ones are equal, and transformers ties them again
    out = {"model.encoder.embed_tokens.weight": ours["src_embed.weight"].clone(),
           "model.decoder.embed_tokens.weight": ours["tgt_embed.weight"].clone(),
           "lm_head.weight": ours["output.weight"].clone(),
           "final_logits_bias": torch.zeros(1, c.tgt_vocab_size)}
    if c.share_embeddings:
        out["model.shared.weight"] = ours["src_embed.weight"].clone()
    for a, b in _layer_names(c):
        if a.endswith("in_proj"):
            for kind in ("weight", "bias"):
                w = ours.get(f"{a}.{kind}", torch.zeros(3 * c.d_model))
                for part, t in zip(("q_proj", "k_proj", "v_proj"), w.chunk(3), strict=True):
                    out[f"{b[:-len('in_proj')]}{part}.{kind}"] = t
        else:
            out[f"{b}.weight"] = ours[f"{a}.weight"]
            out[f"{b}.bias"] = ours.get(f"{a}.bias", torch.zeros(ours[f"{a}.weight"].shape[0]))
    if model_type == "pegasus":  # Pegasus keeps its table in the file: transformers' own formula
        for side in ("encoder", "decoder"):
            out[f"model.{side}.embed_positions.weight"] = sinusoids(c.max_len, c.d_model)
    return out


def sinusoids(n: int, d: int) -> Tensor:
    """Marian's and Pegasus' position table ``(n, d)``: the sines of every frequency, then the
    cosines (attnlab's interleaved table, its columns in :func:`model_order`)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    angle = pos / torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)  # (n, ⌈d/2⌉)
    return torch.cat([torch.sin(angle), torch.cos(angle[:, : d // 2])], dim=1).float()  # (n, d)


def _tokenizer_files(tokenizer_json: str | None, target_tokenizer_json: str | None) -> dict[str, str]:
    if target_tokenizer_json is None:
        return {}
    config = json.dumps(tokenizer_config(target_tokenizer_json), indent=2) + "\n"
    return {f"{TARGET_TOKENIZER}/tokenizer.json": target_tokenizer_json,
            f"{TARGET_TOKENIZER}/tokenizer_config.json": config}


def save_marian(model: Transformer, directory: str | Path, *, tokenizer_json: str | None = None,
                target_tokenizer_json: str | None = None, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> Path:
    """Write the translator ``model`` as a ``MarianMTModel`` (post-LN) or
    ``PegasusForConditionalGeneration`` (pre-LN) folder, atomically; returns the folder.

    ``tokenizer_json``: the (source, or joint) Hugging Face ``tokenizer.json``, which
    ``AutoTokenizer`` loads as a ``PreTrainedTokenizerFast``; ``target_tokenizer_json``: the
    target side's when the vocabularies are not joint, in the subfolder ``target_tokenizer/``
    (``AutoTokenizer.from_pretrained(folder / "target_tokenizer")`` decodes the outputs).
    """
    model_type = check_translator(model.config)
    c = model.config
    files = {"generation_config.json": json.dumps(generation_config(c, bos_id, eos_id), indent=2) + "\n",
             **_tokenizer_files(tokenizer_json, target_tokenizer_json)}
    return write_folder(directory, _weights(model, model_type), hf_config(c, model_type, bos_id, eos_id),
                        tokenizer_json, files=files)


def _refuse_folder(file: Path, c: dict, weights: dict[str, Tensor]) -> None:
    """Refuse, in one line, a folder whose model attnlab's translator cannot be."""
    reasons = []
    if c.get("activation_function") not in ACTIVATIONS:
        reasons.append(f"activation_function {c.get('activation_function')!r} (attnlab takes relu or gelu)")
    if not c.get("scale_embedding", False):
        reasons.append("scale_embedding false (attnlab scales embeddings by √d)")
    for name in ("attention_heads", "ffn_dim"):
        if c[f"encoder_{name}"] != c[f"decoder_{name}"]:
            reasons.append(f"encoder_{name} {c[f'encoder_{name}']} ≠ decoder_{name} {c[f'decoder_{name}']}")
    if weights.get("final_logits_bias", torch.zeros(1)).abs().max() > 0:
        reasons.append("a non-zero final_logits_bias (attnlab's output projection has no bias)")
    d = c["d_model"]
    for side in ("encoder", "decoder"):
        table = weights.get(f"model.{side}.embed_positions.weight")
        if table is not None and not torch.allclose(table, sinusoids(table.shape[0], d), atol=1e-6):
            reasons.append(f"model.{side}.embed_positions is not the sinusoid table")
    if reasons:
        raise ValueError(f"{file}: attnlab's translator has no counterpart for {'; '.join(reasons)}")


def load_marian(directory: str | Path) -> Transformer:
    """A ``MarianMTModel`` or ``PegasusForConditionalGeneration`` folder as an attnlab
    :class:`~attnlab.models.Transformer` (the inverse of :func:`save_marian`)."""
    file = Path(directory) / "config.json"
    model_type = json.loads(file.read_text()).get("model_type") if file.is_file() else None
    c, theirs = read_folder(directory, model_type if model_type in CLASSES else "marian")
    _refuse_folder(file, c, theirs)
    embed = theirs.get("model.shared.weight")  # a tied table is saved once, as the shared one
    src = theirs.get("model.encoder.embed_tokens.weight", embed)
    tgt = theirs.get("model.decoder.embed_tokens.weight", embed)
    out = theirs.get("lm_head.weight", tgt)
    config = TransformerConfig(
        src_vocab_size=src.shape[0], tgt_vocab_size=tgt.shape[0], d_model=c["d_model"],
        num_heads=c["encoder_attention_heads"], num_encoder_layers=c["encoder_layers"],
        num_decoder_layers=c["decoder_layers"], d_ff=c["encoder_ffn_dim"], dropout=0.0,
        activation=c["activation_function"], norm_first=model_type == "pegasus", positional="sinusoidal",
        max_len=c["max_position_embeddings"], pad_id=c.get("pad_token_id", 0),
        share_embeddings=src.shape == tgt.shape and torch.equal(src, tgt), tie_output=torch.equal(out, tgt),
        bias=True)
    ours = {"src_embed.weight": src, "tgt_embed.weight": tgt, "output.weight": out}
    for a, b in _layer_names(config):
        if a.endswith("in_proj"):
            for kind in ("weight", "bias"):
                ours[f"{a}.{kind}"] = torch.cat([theirs[f"{b[:-len('in_proj')]}{p}.{kind}"]
                                                 for p in ("q_proj", "k_proj", "v_proj")])
        else:
            ours |= {f"{a}.{kind}": theirs[f"{b}.{kind}"] for kind in ("weight", "bias")}
    model = Transformer(config)
    model.load_state_dict(_reorder(ours, torch.argsort(model_order(config.d_model))))
    return model.eval()
