"""Greedy decoding: each step takes the most probable next token, ``y_t = argmax p(y | y_<t, x)``.

One function serves both kinds of model. Encoder-decoder (:class:`~attnlab.models.Transformer`,
Ba (CSC413 Lecture 8) "Transformer Machine Translation"): ``greedy_search(model, src, max_new_tokens=...,
bos_id=..., eos_id=...)`` — the source is encoded once, each step feeds one token through the
decoder with the KV cache. Decoder-only (:class:`~attnlab.models.GPT`): ``greedy_search(model,
prompt=ids, max_new_tokens=...)``, with the sliding context window of
:mod:`attnlab.generation.state`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial

import torch
from torch import Tensor, nn

from attnlab.devices import model_device
from attnlab.generation.state import BeforeStep, check_count, inference, make_state


def stop_set(stop_tokens: int | Iterable[int] | None) -> set[int]:
    """``None``, one id or several ids → a set of ints (``ValueError`` for anything else)."""
    if stop_tokens is None:
        return set()
    if isinstance(stop_tokens, int) and not isinstance(stop_tokens, bool):
        return {stop_tokens}
    ids = set(stop_tokens)
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise ValueError(f"stop tokens must be int token ids, got {sorted(ids, key=str)!r}")
    return ids


OnToken = Callable[[int, int], None]  # (original row, new token id)


def decode_rows(
    state,
    choose: Callable[[Tensor], Tensor],
    max_new_tokens: int,
    stop: set[int],
    on_token: OnToken | None = None,
) -> list[list[int]]:
    """Run ``state`` for up to ``max_new_tokens`` steps, picking tokens with ``choose``.

    ``choose`` maps next-token logits ``(R, V)`` to token ids ``(R,)``. A row ends when it picks
    a token in ``stop`` (not included in its output) and leaves the batch. ``on_token(row,
    token)`` is called with each new token as it is chosen (streaming output). Returns the new
    tokens of each original row.
    """
    if not stop and on_token is None:  # no row can end early: no host sync until the end
        steps = []
        for _ in range(max_new_tokens):
            steps.append(choose(state.logits()))  # (R,)
            state.append(steps[-1])
        return torch.stack(steps, dim=1).tolist()  # (R, max_new_tokens)
    rows = list(range(len(state)))  # original row of each state row
    out: list[list[int]] = [[] for _ in range(len(state))]
    for _ in range(max_new_tokens):
        tokens = choose(state.logits())  # (R,)
        ids = tokens.tolist()  # the one host sync of a step
        stopped = [t in stop for t in ids]
        for row, token, done in zip(rows, ids, stopped, strict=True):
            if not done:
                out[row].append(token)
                if on_token is not None:
                    on_token(row, token)
        if all(stopped):
            break
        if any(stopped):
            kept = [i for i, done in enumerate(stopped) if not done]
            keep = torch.tensor(kept, device=tokens.device)  # (R',)
            rows, tokens = [rows[i] for i in kept], tokens[keep]
            state.select(keep)
        state.append(tokens)
    return out


def masked_argmax(logits: Tensor, blocked: Sequence[int] | Tensor) -> Tensor:
    """``argmax`` over the vocabulary of ``logits`` ``(R, V)``, never choosing a ``blocked`` id
    (a list, or the ids as a tensor on ``logits``' device, built once for a whole search)."""
    if len(blocked):
        if not isinstance(blocked, Tensor):
            blocked = torch.tensor(blocked, device=logits.device)
        logits = logits.index_fill(-1, blocked, float("-inf"))
    return logits.float().argmax(dim=-1)  # (R,); float32: CPU's bf16 argmax is slower than the cast


def greedy_search(
    model: nn.Module,
    src: Tensor | tuple[Tensor, ...] | None = None,
    *,
    prompt: Tensor | Sequence[int] | None = None,
    max_new_tokens: int,
    bos_id: int | None = None,
    eos_id: int | None = None,
    use_cache: bool = True,
    window_keep: int | None = None,
    before_step: BeforeStep | None = None,
) -> list[list[int]]:
    """Greedy decoding of a batch; returns the new token ids of each row.

    Args:
        model: an encoder-decoder model (``encode``/``decode``/``new_cache``, e.g.
            :class:`~attnlab.models.Transformer`) or a decoder-only one (``model(idx,
            cache=...)``, ``new_cache``, ``config.block_size``, e.g. :class:`~attnlab.models.GPT`).
        src: encoder-decoder only: what ``model.encode`` reads, batch first — source ids
            ``(B, S)`` right-padded with ``config.pad_id`` (translators), images ``(B, C, H, W)``
            (:class:`~attnlab.models.ShowAttendTell`); ``encode`` checks the layout.
        prompt: decoder-only only: ids ``(B, n)`` or ``(n,)`` or a list of ints, ``n >= 1``
            (rows of one batch share a length: there is no left padding).
        max_new_tokens: the most tokens generated per row, eos included (encoder-decoder with
            learned positions: at most ``config.max_len``).
        bos_id: encoder-decoder: the token that starts every target (required).
        eos_id: ends a row (required for encoder-decoder; optional for decoder-only).
        use_cache: feed one token a step through the KV cache (``False`` recomputes the whole
            prefix every step — same tokens, for testing and benchmarks).
        window_keep: decoder-only: tokens kept when the context window slides
            (default ``block_size // 2``; see :mod:`attnlab.generation.state`).
        before_step: called before every model step; what it raises ends the decoding there
            (``attnlab serve`` stops a search whose client left or whose time is up).

    Returns ``B`` lists of token ids: the generated tokens without ``bos_id``, the prompt or the
    final ``eos_id``; a row shorter than ``max_new_tokens`` (after the cap) ended with
    ``eos_id``. An encoder-decoder never generates the pad token or ``bos_id``. The model is run
    in eval mode without gradients (its mode is restored afterwards).
    """
    check_count("max_new_tokens", max_new_tokens)
    with inference(model, tokens_only=True):
        state, _ = make_state(
            model, src, prompt, bos_id=bos_id, eos_id=eos_id, use_cache=use_cache,
            window_keep=window_keep, before_step=before_step,
        )
        if state.limit is not None:
            max_new_tokens = min(max_new_tokens, state.limit)
        blocked = torch.tensor(state.blocked, dtype=torch.long, device=model_device(model))
        choose = partial(masked_argmax, blocked=blocked)
        return decode_rows(state, choose, max_new_tokens, stop_set(eos_id))
