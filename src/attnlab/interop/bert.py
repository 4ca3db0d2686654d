"""Hugging Face BERT directories → :class:`~attnlab.models.Encoder` (the model; its tokenizer is
the pipeline's, :class:`attnlab.pipelines.EncoderPipeline`, which reads the same directory).

>>> from attnlab.interop.bert import load_bert
>>> load_bert("path/to/all-MiniLM-L6-v2").config.d_model
384
>>> from attnlab.pipelines import EncoderPipeline
>>> EncoderPipeline.from_checkpoint("path/to/all-MiniLM-L6-v2").embed(["A man is playing a guitar."]).shape
torch.Size([1, 384])

Reads, and never unpickles:

* ``config.json`` — a ``BertModel`` config (absolute positions, ``gelu`` or ``relu``);
* ``model.safetensors`` — the weights (``pytorch_model.bin`` is refused: it is a pickle);
* sentence-transformers files when present: ``modules.json`` (a Transformer, a Pooling and
  an optional Normalize module), the pooling's ``config.json`` and
  ``sentence_bert_config.json`` (``max_seq_length``, ``do_lower_case``). Without them the
  sentence embedding is the mean of the token states, truncated at the tokenizer's
  ``model_max_length`` (capped by ``max_position_embeddings``), as sentence-transformers does.

Weight names map explicitly (:data:`LAYER_MAP`): the separate ``query``/``key``/``value``
matrices are stacked into attnlab's packed ``in_proj`` (rows ``[W_q; W_k; W_v]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from attnlab.checkpoint import load_into
from attnlab.interop.hf_folders import refuse_options, write_folder
from attnlab.models.encoder import Encoder, EncoderConfig
from attnlab.parsing import read_json

EMBEDDING_MAP = {
    "embeddings.word_embeddings.weight": "token_embedding.weight",
    "embeddings.token_type_embeddings.weight": "type_embedding.weight",
    "embeddings.position_embeddings.weight": "positions.absolute.embedding.weight",
    "embeddings.LayerNorm.weight": "embed_norm.weight",
    "embeddings.LayerNorm.bias": "embed_norm.bias",
    "pooler.dense.weight": "pooler.0.weight",
    "pooler.dense.bias": "pooler.0.bias",
}
"""Hugging Face name → attnlab name outside the layers."""

LAYER_MAP = {
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "ffn.w1",
    "output.dense": "ffn.w2",
    "output.LayerNorm": "norm2",
}
"""``encoder.layer.{i}.<HF>`` → ``encoder.layers.{i}.<attnlab>`` (``.weight`` and ``.bias``);
``attention.self.{query,key,value}`` are stacked into ``self_attn.in_proj``."""

REQUIRED_KEYS = (
    "vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
)
IGNORED_PREFIXES = ("embeddings.position_ids", "cls.")  # a buffer; pre-training heads
ACTIVATIONS = {"gelu": "gelu", "relu": "relu"}  # HF "gelu" is the exact erf form
POOLING_KEYS = {  # sentence-transformers pooling flags → attnlab pooling modes
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": None,
    "pooling_mode_weightedmean_tokens": None,
    "pooling_mode_lasttoken": None,
}


def load_bert(path: str | Path) -> Encoder:
    """An :class:`Encoder` with the weights and sentence-embedding settings of the Hugging Face
    BERT directory ``path`` (see module docstring). The model is in eval mode.

    Raises:
        FileNotFoundError: ``path``, its ``config.json`` or ``model.safetensors`` is missing.
        ValueError: a config attnlab's encoder cannot reproduce (non-BERT model type,
            non-absolute positions, another activation, a decoder, unsupported pooling or
            sentence-transformers modules), or weights that do not match the config.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"BERT directory {path} does not exist")
    hf = read_json(_require(path, "config.json"), "BERT file")
    state = _read_weights(path)
    has_pooler = any(_strip(k).startswith("pooler.") for k in state)
    config = bert_config(hf, pooler=has_pooler, **sentence_settings(path, hf))
    encoder = Encoder(config)
    load_into(encoder, convert_state_dict(state, config.num_layers), path)
    return encoder.eval()


def bert_config(hf: dict[str, Any], **overrides: Any) -> EncoderConfig:
    """Map a Hugging Face ``BertConfig`` dict onto :class:`EncoderConfig` (``overrides`` win)."""
    model_type = hf.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"config.json model_type must be 'bert', got {model_type!r}")
    position = hf.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ValueError(
            "config.json position_embedding_type must be 'absolute' (learned positions), "
            f"got {position!r}"
        )
    act = hf.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise ValueError(
            f"config.json hidden_act must be one of {', '.join(ACTIVATIONS)}, got {act!r}"
        )
    for flag in ("is_decoder", "add_cross_attention"):
        if hf.get(flag):
            raise ValueError(
                f"config.json {flag} must be false (attnlab's Encoder is bidirectional), got true"
            )
    missing = [k for k in REQUIRED_KEYS if k not in hf]
    if missing:
        raise ValueError(f"config.json is missing BERT key(s): {', '.join(missing)}")
    fields = dict(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], num_heads=hf["num_attention_heads"],
        num_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"],
        type_vocab_size=hf.get("type_vocab_size", 2), dropout=hf.get("hidden_dropout_prob", 0.1),
        attn_dropout=hf.get("attention_probs_dropout_prob", 0.1), activation=ACTIVATIONS[act],
        norm_eps=hf.get("layer_norm_eps", 1e-12), max_len=hf.get("max_position_embeddings", 512),
        pad_id=hf.get("pad_token_id") or 0,
    )
    return EncoderConfig(**{**fields, **overrides})


def sentence_settings(path: Path, hf: dict[str, Any]) -> dict[str, Any]:
    """``pooling``, ``normalize``, ``max_seq_length`` and ``lowercase`` for :class:`EncoderConfig`
    from the sentence-transformers files in ``path`` (defaults when there are none)."""
    settings: dict[str, Any] = {"pooling": "mean", "normalize": False}
    modules_file = path / "modules.json"
    for module in read_json(modules_file, "BERT file", top=list) if modules_file.is_file() else []:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind == "Pooling":
            settings["pooling"] = _pooling_mode(path / module.get("path", "") / "config.json")
        elif kind == "Normalize":
            settings["normalize"] = True
        elif kind != "Transformer":
            raise ValueError(
                f"{modules_file}: sentence-transformers module {module.get('type')!r} "
                "is not supported (only Transformer, Pooling and Normalize)"
            )
    st_file = path / "sentence_bert_config.json"
    st = read_json(st_file, "BERT file") if st_file.is_file() else {}
    max_len = hf.get("max_position_embeddings", 512)
    limit = st.get("max_seq_length") or _tokenizer_max_length(path)
    settings["max_seq_length"] = min(limit, max_len) if limit else None
    settings["lowercase"] = bool(st.get("do_lower_case", False))
    return settings


def _pooling_mode(file: Path) -> str:
    config = read_json(_require(file.parent, file.name), "BERT file")
    if "pooling_mode" in config:  # newer sentence-transformers format
        modes = config["pooling_mode"]
        modes = [modes] if isinstance(modes, str) else list(modes)
    else:
        modes = [key for key in POOLING_KEYS if config.get(key)]
        modes = [POOLING_KEYS[key] or key for key in modes]
    if len(modes) != 1 or modes[0] not in ("mean", "cls", "max"):
        raise ValueError(f"{file}: pooling must be exactly one of mean, cls, max; got {modes}")
    return modes[0]


def _tokenizer_max_length(path: Path) -> int | None:
    file = path / "tokenizer_config.json"
    value = read_json(file, "BERT file").get("model_max_length") if file.is_file() else None
    return value if isinstance(value, int) and value < 1_000_000 else None


def convert_state_dict(hf_state: dict[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """Rename a Hugging Face ``BertModel`` state dict to :class:`Encoder`'s names.

    An optional ``bert.`` prefix (``BertFor...`` checkpoints) is dropped, as are the
    ``position_ids`` buffer and ``cls.*`` pre-training heads. Any other unknown name raises.
    """
    hf_state = {_strip(k): v for k, v in hf_state.items()}
    hf_state = {k: v for k, v in hf_state.items() if not k.startswith(IGNORED_PREFIXES)}
    ours: dict[str, Tensor] = {}
    for hf_name, name in EMBEDDING_MAP.items():
        if hf_name in hf_state:
            ours[name] = hf_state.pop(hf_name)
    for i in range(num_layers):
        src, dst = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            qkv = (f"{src}attention.self.{p}.{kind}" for p in ("query", "key", "value"))
            parts = [hf_state.pop(name, None) for name in qkv]
            if all(p is not None for p in parts):
                ours[f"{dst}self_attn.in_proj.{kind}"] = torch.cat(parts)  # (3d, d) / (3d,)
            for hf_name, name in LAYER_MAP.items():
                if f"{src}{hf_name}.{kind}" in hf_state:
                    ours[f"{dst}{name}.{kind}"] = hf_state.pop(f"{src}{hf_name}.{kind}")
    if hf_state:
        raise ValueError(f"BERT weights have names attnlab cannot map: {sorted(hf_state)[:8]}")
    return ours


REQUIRED = {"positional": "learned", "norm": "layernorm", "norm_first": False, "bias": True,
            "num_kv_heads": None}
"""The Encoder options BERT has a counterpart for, each with the only value it takes (and an
activation of :data:`ACTIVATIONS`)."""


def save_bert(encoder: Encoder, directory: str | Path, *, tokenizer_json: str | None = None) -> Path:
    """Write ``encoder`` as a Hugging Face ``BertModel`` folder (atomically): the inverse of
    :func:`load_bert`; ``in_proj`` is split back into ``query``, ``key`` and ``value``."""
    c = encoder.config
    refuse_options(c, REQUIRED, "BertModel")
    if c.activation not in ACTIVATIONS:
        raise ValueError(f"BertModel has no counterpart for activation = {c.activation!r} "
                         f"(it takes one of {', '.join(ACTIVATIONS)})")
    ours = encoder.state_dict()
    out = {hf: ours[name] for hf, name in EMBEDDING_MAP.items() if name in ours}
    for i in range(c.num_layers):
        src, dst = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            for part, t in zip(("query", "key", "value"), ours[f"{dst}self_attn.in_proj.{kind}"].chunk(3),
                               strict=True):
                out[f"{src}attention.self.{part}.{kind}"] = t
            out |= {f"{src}{hf}.{kind}": ours[f"{dst}{name}.{kind}"] for hf, name in LAYER_MAP.items()}
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": c.vocab_size,
              "hidden_size": c.d_model, "num_attention_heads": c.num_heads,
              "num_hidden_layers": c.num_layers, "intermediate_size": c.ffn_dim, "hidden_act": c.activation,
              "max_position_embeddings": c.max_len, "type_vocab_size": c.type_vocab_size,
              "layer_norm_eps": c.norm_eps, "pad_token_id": c.pad_id, "hidden_dropout_prob": c.dropout,
              "attention_probs_dropout_prob": c.attn_dropout, "position_embedding_type": "absolute"}
    return write_folder(directory, out, config, tokenizer_json)


def _strip(name: str) -> str:
    return name.removeprefix("bert.")


def _require(path: Path, name: str) -> Path:
    file = path / name
    if not file.is_file():
        raise FileNotFoundError(f"BERT directory {path} has no {name}")
    return file


def _read_weights(path: Path) -> dict[str, Tensor]:
    file = path / "model.safetensors"
    if not file.is_file():
        pickled = [p.name for p in path.glob("*.bin")]
        hint = f" ({', '.join(pickled)} is a pickle, which attnlab never loads)" if pickled else ""
        raise FileNotFoundError(f"BERT directory {path} has no model.safetensors{hint}")
    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{file} is corrupt or not safetensors: {err}") from err
