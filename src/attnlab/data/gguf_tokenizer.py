"""The tokenizer a GGUF file (llama.cpp's format) stores in its metadata, as attnlab's
:class:`~attnlab.data.tokenizers.Tokenizer` over a Hugging Face ``tokenizers`` object.

A Llama-family GGUF file such as SmolLM2-135M-Instruct's holds byte-level BPE
(``tokenizer.ggml.model = "gpt2"``; Sennrich et al. 2016, over bytes as in GPT-2): its tokens in
id order (``tokenizer.ggml.tokens``), its merges in rank order (``tokenizer.ggml.merges``, "a b"),
each token's type (a *control* token such as ``<|im_start|>`` is special: one id, never split),
the ids of the pad, begin, end and unknown roles, and an Instruct model's chat template.
SmolLM2 also splits digits one by one; its vocabulary holds no token of two digits, so the GPT-2
split gives the same ids.

>>> tokenizer = load_gguf_tokenizer("SmolLM2-135M-Instruct.Q4_1.gguf")
>>> tokenizer.encode("The capital of France is")
[504, 3575, 282, 4649, 314]
"""

from __future__ import annotations

from pathlib import Path

import tokenizers as hf
from tokenizers import decoders, models, pre_tokenizers

from attnlab.data.tokenizers import Tokenizer
from attnlab.parsing import gguf_array, gguf_value, read_gguf

__all__ = ["load_gguf_tokenizer"]

CONTROL = 3  # llama.cpp's token type of a control token
ROLE_KEYS = ("padding", "bos", "eos", "unknown")  # tokenizer.ggml.<key>_token_id, in attnlab's role order
CHAT_TEMPLATE = "tokenizer.chat_template"


def load_gguf_tokenizer(path: str | Path) -> Tokenizer:
    """The byte-level BPE tokenizer stored in the GGUF file ``path`` (module docstring)."""
    path = Path(path)
    reader = read_gguf(path)
    kind = gguf_value(reader, "tokenizer.ggml.model", path)
    if kind != "gpt2":
        raise ValueError(f"{path}: tokenizer.ggml.model is {kind!r}; attnlab reads byte-level BPE ('gpt2')")
    tokens = gguf_array(reader, "tokenizer.ggml.tokens", path)
    merges = [tuple(m.split(" ", 1)) for m in gguf_array(reader, "tokenizer.ggml.merges", path)]
    tok = hf.Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    kinds = gguf_array(reader, "tokenizer.ggml.token_type", path)
    tok.add_special_tokens([hf.AddedToken(t, special=True, normalized=False)
                            for t, k in zip(tokens, kinds, strict=True) if k == CONTROL])
    roles = [tokens[gguf_value(reader, f"tokenizer.ggml.{key}_token_id", path)] for key in ROLE_KEYS]
    template = gguf_value(reader, CHAT_TEMPLATE, path) if CHAT_TEMPLATE in reader.fields else None
    return Tokenizer(tok, roles=roles, chat_template=template)
