"""Batched beam search with a length penalty (Wu et al. 2016, GNMT §7; Vaswani et al. 2017 §6.1
decode with beam 4 and α = 0.6), for the translator of Ba (CSC413 Lecture 8) "Transformer
Machine Translation".

Each sentence keeps ``K = beam_size`` live hypotheses. A step scores every one-token extension,
``log p(y_1..t) = log p(y_1..t-1) + log p(y_t | y_<t, x)``, over all ``K · V`` of them and keeps
the ``2K`` best: an extension ending in ``eos_id`` that ranks among the first ``K`` is finished;
the ``K`` best that do not end in eos become the new beam (the KV cache is reordered to match).
A hypothesis of ``L`` tokens (eos counted) is ranked by

    score = log p(y) / lp(L),   lp(L) = ((5 + L) / 6) ** α   ("gnmt", the default)
                                lp(L) = L ** α               ("simple": α = 1 is the mean log-prob)

α = 0 ranks by log-probability alone; larger α favours longer outputs. Hypotheses still live
after ``max_new_tokens`` steps are finished unfinished (``Hypothesis.finished = False``).

Stopping (per sentence): ``early_stop=True`` (the default, as fairseq and Hugging Face's
``early_stopping=True``) stops once ``K`` hypotheses have finished. ``early_stop=False`` goes on
until no live hypothesis can still reach the ``n_best``-th finished score: log-probabilities
only fall, so a live one can reach at most ``log p / max lp(L')`` over its possible final
lengths ``L'`` — an exact bound, so the result is that of running to ``max_new_tokens``.

Sentences are independent: each has its own top-k, finished list and stopping decision, and a
finished sentence leaves the batch, so results do not depend on the batch or on source padding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.generation.state import check_count, inference, make_state

PENALTY_FORMS = ("gnmt", "simple")


@dataclass(frozen=True)
class Hypothesis:
    """One output: tokens without ``bos_id``/``eos_id``; ``score = log_prob / lp(length)``."""

    tokens: list[int]
    score: float
    log_prob: float
    finished: bool  # ended with eos (False: cut at max_new_tokens)


def length_penalty(length: int, alpha: float, form: str = "gnmt") -> float:
    """``lp(L)``: ``((5 + L) / 6) ** alpha`` (``"gnmt"``) or ``L ** alpha`` (``"simple"``)."""
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if form == "simple":
        return float(length) ** alpha
    raise ValueError(f"penalty_form must be one of {', '.join(PENALTY_FORMS)}, got {form!r}")


@dataclass
class _Search:
    """Settings and finished hypotheses of one :func:`beam_search` call."""

    K: int  # beam size
    max_new: int
    alpha: float
    form: str
    n_best: int
    early_stop: bool
    eos_id: int | None
    finished: list[list[Hypothesis]]  # per sentence

    def lp(self, length: int) -> float:
        return length_penalty(length, self.alpha, self.form)

    def finish(self, sentence: int, tokens: Tensor, log_p: float, length: int, eos: bool) -> None:
        if math.isfinite(log_p):
            hypothesis = Hypothesis(tokens.tolist(), log_p / self.lp(length), log_p, eos)
            self.finished[sentence].append(hypothesis)

    def done(self, sentence: int, best_live: float, length: int) -> bool:
        """May ``sentence`` stop after ``length`` tokens, its best live log-prob ``best_live``?"""
        finished = self.finished[sentence]
        if not math.isfinite(best_live):  # no live hypothesis left
            return True
        if self.early_stop:
            return len(finished) >= self.K
        if len(finished) < self.n_best:
            return False
        nth = sorted((h.score for h in finished), reverse=True)[self.n_best - 1]
        largest_lp = max(self.lp(length + 1), self.lp(self.max_new))  # lp is monotone in L
        return best_live / largest_lp <= nth

    def results(self) -> list[list[Hypothesis]]:
        return [sorted(f, key=lambda h: -h.score)[: self.n_best] for f in self.finished]


def beam_search(
    model: nn.Module,
    src: Tensor | None = None,
    *,
    prompt: Tensor | Sequence[int] | None = None,
    beam_size: int = 5,
    max_new_tokens: int,
    length_penalty: float = 0.6,
    penalty_form: str = "gnmt",
    n_best: int = 1,
    bos_id: int | None = None,
    eos_id: int | None = None,
    early_stop: bool = True,
    use_cache: bool = True,
    window_keep: int | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch; returns the ``n_best`` hypotheses of each row, best first.

    Args:
        model, src, prompt, bos_id, eos_id, use_cache, window_keep: as for
            :func:`~attnlab.generation.greedy_search` (encoder-decoder: ``src`` — ids ``(B, S)``
            or images ``(B, C, H, W)`` — with ``bos_id`` and ``eos_id``; decoder-only:
            ``prompt``, ``eos_id`` optional).
        beam_size: ``K >= 1`` live hypotheses per row; ``K = 1`` is greedy search.
        max_new_tokens: the longest output, eos counted (learned positions: ``<= max_len``).
        length_penalty: ``α`` of the length penalty (module docstring); 0 disables it.
        penalty_form: ``"gnmt"`` — ``((5 + L) / 6) ** α`` — or ``"simple"`` — ``L ** α``.
        n_best: hypotheses returned per row, ``1 <= n_best <= beam_size``.
        early_stop: stop a row once ``beam_size`` hypotheses finished (``True``), or only when
            no live hypothesis can still enter the ``n_best`` (``False``, exact).

    Returns ``B`` lists of :class:`Hypothesis` (tokens without ``bos_id``/``eos_id``, ``score``,
    ``log_prob`` — the model's summed log-probabilities, eos included — and ``finished``).
    """
    check_count("beam_size", beam_size)
    check_count("max_new_tokens", max_new_tokens)
    check_count("n_best", n_best)
    if n_best > beam_size:
        raise ValueError(f"n_best must be <= beam_size={beam_size}, got {n_best}")
    if not isinstance(length_penalty, (int, float)) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if penalty_form not in PENALTY_FORMS:
        raise ValueError(
            f"penalty_form must be one of {', '.join(PENALTY_FORMS)}, got {penalty_form!r}"
        )
    with inference(model):
        state, batch = make_state(
            model,
            src,
            prompt,
            bos_id=bos_id,
            eos_id=eos_id,
            use_cache=use_cache,
            window_keep=window_keep,
            repeat=beam_size,
        )
        if state.limit is not None:
            max_new_tokens = min(max_new_tokens, state.limit)
        search = _Search(
            beam_size, max_new_tokens, float(length_penalty), penalty_form, n_best, early_stop,
            eos_id, finished=[[] for _ in range(batch)],
        )
        _run(state, search, batch)
        return search.results()


def _run(state, search: _Search, batch: int) -> None:
    """The beam loop; ``state`` holds ``K`` rows per live sentence, sentence-major."""
    K, device = search.K, state.tokens.device
    live = torch.arange(batch)  # (A,) the sentence of each group of K rows
    log_p = torch.full((batch, K), float("-inf"), device=device)  # (A, K)
    log_p[:, 0] = 0.0  # the K beams start equal: expand only the first
    tokens = torch.zeros(batch * K, 0, dtype=torch.long, device=device)  # (A·K, t)
    for t in range(search.max_new):
        log_p, parent, tok = _expand(state, search, live, log_p, tokens, t + 1)  # (A, K) each
        rows = (torch.arange(len(live), device=device).unsqueeze(1) * K + parent).view(-1)  # (A·K,)
        tokens = torch.cat([tokens[rows], tok.view(-1, 1)], dim=1)  # (A·K, t + 1)
        if t + 1 == search.max_new:  # out of steps: the live hypotheses end unfinished
            for i, sentence in enumerate(live.repeat_interleave(K).tolist()):
                search.finish(sentence, tokens[i], float(log_p.view(-1)[i]), t + 1, False)
            return
        best = log_p.max(dim=1).values.tolist()  # (A,)
        keep = [not search.done(s, b, t + 1) for s, b in zip(live.tolist(), best, strict=True)]
        if not any(keep):
            return
        kept = torch.tensor(keep).nonzero().squeeze(1)  # (A',) finished sentences leave
        live, log_p, tok = live[kept], log_p[kept.to(device)], tok[kept.to(device)]  # (A', K)
        rows = rows.view(-1, K)[kept.to(device)].view(-1)  # (A'·K,)
        tokens = tokens.view(-1, K, t + 1)[kept.to(device)].view(-1, t + 1)  # (A'·K, t + 1)
        state.select(rows)  # the KV cache follows the surviving hypotheses
        state.append(tok.view(-1))


def _expand(
    state, search: _Search, live: Tensor, log_p: Tensor, tokens: Tensor, length: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Score every one-token extension, finish those ending in eos among the top ``K``, and
    return the ``K`` best others: log-probs, parent beams and tokens, each ``(A, K)``."""
    K, (A, _) = search.K, log_p.shape
    step = torch.log_softmax(state.logits().float(), dim=-1)  # (A·K, V)
    if state.blocked:
        step[:, list(state.blocked)] = float("-inf")  # never generate pad or bos
    V = step.shape[-1]
    cand = (log_p.unsqueeze(-1) + step.view(A, K, V)).view(A, K * V)  # (A, K·V)
    top, flat = cand.topk(min(2 * K, K * V), dim=-1)  # (A, C) best first
    parent, tok = flat // V, flat % V  # (A, C)
    is_eos = tok == (-1 if search.eos_id is None else search.eos_id)  # (A, C)
    for a, j in (is_eos[:, :K] & top[:, :K].isfinite()).nonzero().tolist():
        search.finish(int(live[a]), tokens[a * K + parent[a, j]], float(top[a, j]), length, True)
    rank = torch.arange(top.shape[1], device=top.device) + top.shape[1] * is_eos  # (A, C)
    pick = rank.argsort(dim=-1)[:, :K]  # (A, K) the K best that do not end in eos
    return top.gather(1, pick), parent.gather(1, pick), tok.gather(1, pick)
