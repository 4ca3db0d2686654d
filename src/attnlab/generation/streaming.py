"""A KV cache that evicts: window attention and attention sinks (StreamingLLM).

Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks": a language model
reading past its cache keeps the keys and values of the last ``window`` tokens only. Evicting
the *first* tokens breaks it — most heads dump attention on the first token (an "attention
sink"), and without it the softmax puts that mass elsewhere — while keeping the first
``sinks`` tokens (4 in the paper) next to the window restores it. Positions are those *within
the cache* (Xiao et al. §3.2): after an eviction the kept keys move back, so the cache holds
positions ``0 .. len - 1`` and the next token sits at ``len``, never beyond what the model saw
in training.

:func:`evict` drops cache positions ``start .. start + count - 1`` from every layer's
:class:`~attnlab.attention.multihead.KVCache` ``(B, H_kv, n, d_h)``; with RoPE the later keys,
rotated at their old positions ``m``, are rotated on by ``−count`` (rotations compose:
``R_{m−count} = R_{−count} R_m``, :meth:`~attnlab.modules.rotary.RotaryEmbedding.shift`).
Distance biases (ALiBi, T5 buckets) and no positions need nothing more; absolute positions
(learned, sinusoidal) are inside the keys and cannot move: refused.

:func:`streaming_nll` reads a long text one token at a time through such a cache: ``sinks = 0``
is window attention, ``sinks > 0`` StreamingLLM, and a window as long as the text the full
context. Each query sees ``min(t + 1, sinks + window)`` keys: itself, the ``window − 1``
tokens before it and the first ``sinks``. This is a different rule from the decoding loops'
sliding window (:mod:`attnlab.generation.state`), which *re-encodes* the last tokens when the
window is full (Xiao et al.'s "sliding window with re-computation"): cheaper per step here, no
recomputation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.multihead import KVCache
from attnlab.generation.state import inference
from attnlab.modules.rotary import RotaryEmbedding
from attnlab.progress import progress_bar
from attnlab.validation import check_rank

__all__ = ["evict", "movable_positions", "streaming_nll"]

FIXED_POSITIONS = ("learned", "sinusoidal")


def movable_positions(model: nn.Module) -> RotaryEmbedding | None:
    """The rotary embedding a cache eviction must re-rotate by (``None``: the model's positions
    are distances, or none); ``ValueError`` for absolute positions, baked into the keys."""
    kind = getattr(getattr(model, "config", None), "positional", None)
    if kind in FIXED_POSITIONS:
        raise ValueError(f"a cache that evicts needs relative positions (rope, alibi, relative, none), "
                         f"but the model's positional is {kind!r}")
    return getattr(getattr(model, "pos", None), "rotary", None)


def evict(cache: list[KVCache], rotary: RotaryEmbedding | None, *, start: int, count: int) -> None:
    """Drop positions ``start .. start + count − 1`` of every layer's cache, in place; the later
    keys move back ``count`` positions (re-rotated when ``rotary`` is given)."""
    if count <= 0:
        return
    for i, layer in enumerate(cache):
        n = len(layer)
        if not 0 <= start <= start + count <= n:
            raise ValueError(f"cannot evict positions {start}..{start + count - 1} of a cache of {n}")
        k, v = layer.k, layer.v  # (B, H_kv, n, d_h)
        later = k[..., start + count :, :]
        if rotary is not None:
            later = rotary.shift(later, -count)
        cache[i] = KVCache(torch.cat([k[..., :start, :], later], dim=-2),
                           torch.cat([v[..., :start, :], v[..., start + count :, :]], dim=-2))


def streaming_nll(
    model: nn.Module, ids: Tensor, *, window: int, sinks: int = 0, progress: bool = False,
) -> Tensor:
    """Per-token negative log-likelihood ``(B, n − 1)`` (nats) of ``ids`` ``(B, n)`` read one token
    at a time with a cache of the first ``sinks`` and the last ``window`` tokens (module doc):
    entry ``t`` is ``−log p(ids[:, t + 1] | what the cache holds after token t)``."""
    check_rank("ids", ids, 2, "(B, n) token ids")
    if window < 1 or sinks < 0:
        raise ValueError(f"window must be >= 1 and sinks >= 0, got window={window}, sinks={sinks}")
    rotary = movable_positions(model)
    cache, n = model.new_cache(), ids.shape[1]
    losses = []
    with inference(model), progress_bar(n - 1, unit="token", enabled=progress, leave=False) as bar:
        for t in range(n - 1):
            if len(cache[0]) == sinks + window:  # full: the oldest token after the sinks goes
                evict(cache, rotary, start=sinks, count=1)
            logits = model(ids[:, t : t + 1], cache=cache, check=t == 0)[:, -1]  # (B, V)
            losses.append(F.cross_entropy(logits.float(), ids[:, t + 1], reduction="none"))  # (B,)
            bar.update()
    return torch.stack(losses, dim=1)  # (B, n - 1)
