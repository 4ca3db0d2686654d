"""tiktoken as the encoder of a byte-level BPE whose merges are ranked in their learned order.

Hugging Face ``tokenizers`` encodes a word by applying the learned merges, the earliest first;
tiktoken (OpenAI's encoder, the one nanoGPT prepares with) merges the adjacent pair whose
concatenation has the lowest rank. Where every token but the 256 bytes is the result of one
merge, each ranked by its id and the ids growing with the merge order (as the BPE trainer
assigns them), both give the same ids: a pair tiktoken would join out of turn would have to be
one the trainer never saw adjacent — it had merged one of them with a neighbour first,
everywhere. :func:`tiktoken_twin` builds that encoder after checking every condition on the
tokenizer's own file (the model, GPT-2's pattern, no normalizer, the merge order), and returns
``None`` for any other tokenizer, which then encodes with ``tokenizers`` itself. Tests compare
the two on real and adversarial text. tiktoken is 4–5× faster a core on this machine
(docs/benchmarks.md, "Your own data").
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import tokenizers as hf

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}


def byte_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in of each byte (Hugging Face's ``ByteLevel`` alphabet) → the byte."""
    spans = ((ord("!"), ord("~")), (ord("¡"), ord("¬")), (ord("®"), ord("ÿ")))
    printable = [b for first, last in spans for b in range(first, last + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + i): b for i, b in enumerate(others)})
    return table


def _merges(model: dict[str, Any]) -> list[tuple[str, str]]:
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]


def _plain_byte_level(state: dict[str, Any]) -> bool:
    """GPT-2's byte-level BPE and nothing more: no normalizer, no dropout, no affixes."""
    pre, model = state.get("pre_tokenizer") or {}, state.get("model") or {}
    return (state.get("normalizer") is None and all(pre.get(k) == v for k, v in BYTE_LEVEL.items())
            and model.get("type") == "BPE" and not model.get("dropout") and not model.get("ignore_merges")
            and not model.get("continuing_subword_prefix") and not model.get("end_of_word_suffix")
            and not model.get("byte_fallback"))


def _ranks(state: dict[str, Any]) -> dict[bytes, int] | None:
    """Each token's bytes → its id, where the ids order the merges as they were learned."""
    model, alphabet = state["model"], byte_alphabet()
    added = {t["content"] for t in state.get("added_tokens", [])}
    vocab = {t: i for t, i in model["vocab"].items() if t not in added}
    if any(c not in alphabet for t in vocab for c in t) or not set(alphabet) <= vocab.keys():
        return None
    made, last = set(), -1
    for a, b in _merges(model):
        token = a + b
        if a not in vocab or b not in vocab or token not in vocab:
            return None
        if not vocab[token] > max(last, vocab[a], vocab[b]):
            return None  # merges out of id order: ranks would not reproduce them
        made.add(token)
        last = vocab[token]
    if set(vocab) - made - set(alphabet):
        return None  # a token no merge makes
    return {bytes(alphabet[c] for c in t): i for t, i in vocab.items()}


def tiktoken_twin(tokenizer: hf.Tokenizer) -> Any | None:
    """A ``tiktoken.Encoding`` giving ``tokenizer``'s ids for any text (specials never made:
    the text is encoded as ordinary text), or ``None`` where that cannot be guaranteed."""
    state = json.loads(tokenizer.to_str())
    if not _plain_byte_level(state):
        return None
    ranks = _ranks(state)
    if ranks is None:
        return None
    import tiktoken

    name = "attnlab-" + hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:16]
    # The specials are named (tiktoken scans for an empty set of them at every byte, 1.8x slower)
    # but never allowed: encode_ordinary and encode_to_numpy(..., disallowed_special=()) read
    # "<eos>" typed in the text as text, as the tokenizer does.
    specials = {t["content"]: t["id"] for t in state.get("added_tokens", [])}
    return tiktoken.Encoding(name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


def encode_on_cores(twin: Any, texts: Sequence[str]) -> list[np.ndarray]:
    """The ids of each of ``texts`` (int64 arrays) through the tiktoken ``twin``, one run of texts
    a core on a thread each (tiktoken lets go of the GIL)."""
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) or 1
    size = -(-len(texts) // cores)
    runs = [texts[i : i + size] for i in range(0, len(texts), size)]

    def encode_run(run: Sequence[str]) -> list[np.ndarray]:
        return [twin.encode_to_numpy(t, disallowed_special=()).astype(np.int64) for t in run]

    with ThreadPoolExecutor(cores) as pool:
        return [ids for done in pool.map(encode_run, runs) for ids in done]
