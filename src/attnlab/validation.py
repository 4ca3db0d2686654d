"""Argument checking shared by every module.

Every error names the argument, what was expected and what was given, e.g.
``mask has shape (2, 7) but keys have length 9``. Checks raise ``ValueError`` (or
``TypeError`` for a wrong type), never a bare assertion. They run at the public entry points
(docs/design.md, "Validate once"); a module calling its own parts passes them ``check=False``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch
from torch import Tensor


def shape_str(shape: Sequence[int]) -> str:
    """Format a shape as ``(2, 7)``."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def indefinite(noun: str) -> str:
    """``noun`` with its article, for messages: ``an attention_seq2seq``, ``a transformer``."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def plural(noun: str) -> str:
    """``noun``'s plural in English's regular way: ``key`` → ``keys``, ``query`` → ``queries``."""
    return noun[:-1] + "ies" if re.search(r"[^aeiou]y$", noun) else noun + "s"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless one: ``1 thread``, ``2 threads`` (``plural`` where
    adding an s is wrong: ``counted(n, "batch", "batches")``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def check_tensor(name: str, x: object) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def check_rank(name: str, x: Tensor, ranks: int | Sequence[int], what: str = "") -> None:
    """Raise unless ``x.dim()`` is one of ``ranks``; ``what`` describes the layout."""
    check_tensor(name, x)
    allowed = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if x.dim() not in allowed:
        want = " or ".join(str(r) for r in allowed)
        layout = f" {what}" if what else ""
        raise ValueError(
            f"{name} must have {want} dimensions{layout}, got shape {shape_str(x.shape)} "
            f"({x.dim()} dimensions)"
        )


def check_width(name: str, x: Tensor, d: int) -> None:
    """``x`` is a tensor whose last dimension is ``d`` (the width a layer expects)."""
    check_tensor(name, x)
    if x.dim() == 0 or x.shape[-1] != d:
        width = "a scalar" if x.dim() == 0 else f"width {x.shape[-1]}"
        raise ValueError(f"{name} has {width} but the layer expects width {d} (last dimension)")


def check_choice(name: str, value: object, choices: Sequence[object]) -> None:
    """``value`` is one of ``choices``: ``norm must be one of layernorm, rmsnorm, got 'batch'``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")


def check_kv_heads(num_heads: int, num_kv_heads: int | None) -> int:
    """The key/value heads: ``num_kv_heads`` (positive, dividing ``num_heads``), or ``num_heads``
    when it is ``None``."""
    if num_kv_heads is None:
        return num_heads
    check_positive("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_kv_heads must divide num_heads, got num_heads={num_heads} and "
                         f"num_kv_heads={num_kv_heads}")
    return num_kv_heads


def check_heads(d_model: int, num_heads: int) -> None:
    """``num_heads`` positive and dividing ``d_model`` (each head has ``d_model / num_heads``)."""
    check_positive("d_model", d_model)
    check_positive("num_heads", num_heads)
    if d_model % num_heads != 0:
        raise ValueError(
            f"num_heads must divide d_model, got d_model={d_model} and num_heads={num_heads} "
            f"(d_model % num_heads = {d_model % num_heads})"
        )


def check_floating(name: str, x: Tensor) -> None:
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_positive(name: str, value: float | int, *, allow_zero: bool = False) -> None:
    """``value > 0`` (``>= 0`` with ``allow_zero``) and finite: no nan, no inf."""
    ok = value >= 0 if allow_zero else value > 0
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value}" if ok else
                         f"{name} must be {bound}, got {value}")


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")


def check_token_ids(name: str, ids: Tensor, vocab_size: int) -> None:
    """Token ids must be integers in ``[0, vocab_size)``."""
    check_tensor(name, ids)
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.numel() == 0 or torch.compiler.is_compiling():
        return  # the range check reads values: under torch.compile it would break the graph
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        raise ValueError(f"{name} must be token ids >= 0, got a minimum of {lo}")
    if hi >= vocab_size:
        raise ValueError(f"{name} must be token ids < vocab_size={vocab_size}, got a maximum of {hi}")


def check_ids(name: str, ids: Tensor, vocab_size: int) -> None:
    """A batch of token ids ``(B, n)``, integers in ``[0, vocab_size)``."""
    check_rank(name, ids, 2, "(B, n) token ids")
    check_token_ids(name, ids, vocab_size)


def check_sequence(x: Tensor, width: int) -> None:
    """A batch of vector sequences ``(B, T, width)`` with ``T >= 1`` (the NTM's tasks)."""
    check_rank("x", x, 3, "(B, T, input_dim)")
    if x.shape[-1] != width:
        raise ValueError(
            f"x has input width {x.shape[-1]} (shape {shape_str(x.shape)}) but input_dim is {width}"
        )
    if x.shape[1] == 0:
        raise ValueError(f"x has shape {shape_str(x.shape)}: a zero-length sequence has nothing to run")


def check_vocabularies(config: object) -> None:
    """The vocabulary fields an encoder-decoder config shares: ``tgt_vocab_size=None`` becomes
    the source's size; both sizes positive; ``share_embeddings`` needs one vocabulary; the
    ``pad_id`` is a token of both. ``ValueError`` names the bad value."""
    if config.tgt_vocab_size is None:
        config.tgt_vocab_size = config.src_vocab_size
    for name in ("src_vocab_size", "tgt_vocab_size"):
        check_positive(name, getattr(config, name))
    if config.share_embeddings and config.src_vocab_size != config.tgt_vocab_size:
        raise ValueError(
            f"share_embeddings needs one vocabulary, got src_vocab_size={config.src_vocab_size} "
            f"and tgt_vocab_size={config.tgt_vocab_size}"
        )
    if not 0 <= config.pad_id < min(config.src_vocab_size, config.tgt_vocab_size):
        raise ValueError(f"pad_id must be a token id in both vocabularies, got {config.pad_id}")
