"""Sampling from a decoder-only language model (Ba (CSC413 Lecture 8) "Transformer Language Pre-training":
the generated samples of Radford et al. 2019), with temperature, top-k and nucleus (top-p).

Each step turns the next-token logits ``z`` ``(R, V)`` into a distribution and draws from it:

1. temperature ``T``: ``p ∝ exp(z / T)``; ``T = 0`` means greedy (``argmax z``, no draw);
2. top-k (Fan et al. 2018): keep the ``k`` largest logits (:func:`top_k_filter`);
3. top-p (Holtzman et al. 2020): keep the smallest set of most probable tokens whose
   probability mass is ``≥ p`` (:func:`top_p_filter`), computed after 1 and 2;
4. draw one token from the softmax of what is kept (``torch.multinomial``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

from attnlab.devices import model_device
from attnlab.generation.greedy import OnToken, decode_rows, stop_set
from attnlab.generation.state import (
    BeforeStep,
    DecoderOnlyState,
    as_prompt,
    check_count,
    inference,
    is_encoder_decoder,
)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row (last dim), set the others to ``-inf``.

    ``logits`` ``(..., V)``; ``k >= V`` keeps everything. Exactly ``k`` survive per row (ties at
    the boundary are broken by ``torch.topk``).
    """
    check_count("top_k", k)
    if k >= logits.shape[-1]:
        return logits
    index = logits.topk(k, dim=-1).indices  # (..., k)
    return torch.full_like(logits, float("-inf")).scatter(-1, index, logits.gather(-1, index))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filtering: keep the smallest set of most probable tokens with mass ``≥ p``.

    ``logits`` ``(..., V)``, ``0 < p <= 1``. Tokens are sorted by probability; token ``i`` is
    kept when the mass of the tokens before it is still ``< p``, so the most probable token is
    always kept and ``p = 1`` keeps everything. The rest are set to ``-inf``.
    """
    if not (isinstance(p, (int, float)) and 0.0 < p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1], got {p!r}")
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V)
    probs = sorted_logits.softmax(dim=-1)  # (..., V)
    before = probs.cumsum(dim=-1) - probs  # (..., V) mass of the more probable tokens
    drop_sorted = before >= p  # (..., V)
    drop_sorted[..., 0] = False  # the most probable token, even for a p below float32's range
    drop = torch.empty_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocab order
    return logits.masked_fill(drop, float("-inf"))


def check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if (
        not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        check_count("top_k", top_k)
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


def sample_next(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One token per row from next-token ``logits`` ``(R, V)`` (steps 1-4 of the module doc)."""
    if temperature == 0:  # in float32: CPU's bf16 argmax ran 5x slower than the cast and argmax
        return logits.float().argmax(dim=-1)  # (R,)
    logits = logits.float()
    temperature = max(temperature, torch.finfo(logits.dtype).tiny)  # below it: 0 in float32, 0 / 0
    logits = (
        logits - logits.amax(dim=-1, keepdim=True)
    ) / temperature  # (R, V), max 0: no inf - inf
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)  # (R,)


def sample(
    model: nn.Module,
    prompt: Tensor | Sequence[int],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    stop_tokens: int | Iterable[int] | None = None,
    window_keep: int | None = None,
    on_token: OnToken | None = None,
    before_step: BeforeStep | None = None,
) -> list[list[int]]:
    """Sample up to ``max_new_tokens`` tokens after ``prompt`` from a decoder-only model.

    Args:
        model: a decoder-only model (``model(idx, cache=...)``, ``new_cache``,
            ``config.block_size``), e.g. :class:`~attnlab.models.GPT`.
        prompt: ids ``(B, n)`` or ``(n,)``, or a list of ints; ``n >= 1``.
        max_new_tokens: ``>= 1``.
        temperature: ``>= 0``; 0 is greedy decoding, < 1 sharpens, > 1 flattens.
        top_k: keep only the ``top_k`` most probable tokens (``None``: all).
        top_p: nucleus mass in ``(0, 1]`` (``None`` or 1: all).
        seed: draws come from a ``torch.Generator`` seeded with it (reproducible); ``None``
            uses torch's global generator (so ``torch.manual_seed`` applies).
        use_cache: feed one token a step through the KV cache; ``False`` recomputes the context
            every step and draws exactly the same tokens (same seed).
        stop_tokens: one id or several; a row ends at the first one it draws.
        window_keep: tokens kept when the context outgrows ``block_size`` (default
            ``block_size // 2``; the sliding window of :mod:`attnlab.generation.state`).
        on_token: called as ``on_token(row, token)`` with each token as it is drawn, to stream
            the output.
        before_step: called before every model step; what it raises ends the sampling there.

    Returns ``B`` lists of new token ids (the prompt and the stop token not included).
    Rows share one generator, so a row's draws depend on the batch it is in.
    """
    if is_encoder_decoder(model):
        raise ValueError(
            f"sample is for decoder-only models; {type(model).__name__} is encoder-decoder"
        )
    check_count("max_new_tokens", max_new_tokens)
    check_sampling(temperature, top_k, top_p)
    stop = stop_set(stop_tokens)
    device = model_device(model)
    generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    with inference(model, tokens_only=True):
        ids = as_prompt(prompt, device, getattr(getattr(model, "config", None), "vocab_size", None))
        state = DecoderOnlyState(
            model, ids, use_cache=use_cache, window_keep=window_keep, before_step=before_step
        )

        def choose(logits: Tensor) -> Tensor:
            return sample_next(
                logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator
            )

        return decode_rows(state, choose, max_new_tokens, stop, on_token)
