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

The bookkeeping runs on tensors for all sentences at once (:func:`expand_beams`: one ``topk``
over each sentence's ``K · V`` extensions; the finished counts and best finished scores kept
per sentence as tensors), with one host transfer a step: which sentences stop. Finished
hypotheses are read back once, at the end. The ``K`` beams of a sentence start equal, so the
first step runs one row per sentence (one encoder memory and cross-attention projection per
source, not ``K``) and the rows are copied ``K`` times after it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.devices import model_device
from attnlab.generation.state import BeforeStep, check_count, inference, make_state
from attnlab.memory import Need, check_fits, sized

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


@dataclass(frozen=True)
class BeamStep:
    """The ``2K`` best one-token extensions of each of ``A`` sentences, best first."""

    log_p: Tensor  # (A, 2K) log p(y_1..t) of each extension
    parent: Tensor  # (A, 2K) the live beam (0 .. k-1) it extends
    token: Tensor  # (A, 2K) its new token
    ended: Tensor  # (A, K) bool: one of the first K ending in eos with a finite log-prob: finished
    pick: Tensor  # (A, K) columns of the K best extensions that do not end in eos: the new beam


def expand_beams(log_p: Tensor, step: Tensor, beam_size: int, eos_id: int | None) -> BeamStep:
    """Rank every one-token extension of ``A`` sentences' ``k`` live beams (module docstring).

    ``log_p`` ``(A, k)``: the beams' log-probabilities (``-inf``: an empty slot); ``step``
    ``(A·k, V)``: their next-token log-probabilities, sentence-major — overwritten with the
    extensions' ``log p(y_1..t) = log p(y_1..t-1) + log p(y_t | y_<t, x)``.
    """
    (A, k), V, K = log_p.shape, step.shape[-1], beam_size
    cand = step.view(A, k, V).add_(log_p.unsqueeze(-1)).view(A, k * V)  # (A, k·V)
    if k * V < 2 * K:  # fewer extensions than 2K (a tiny vocabulary): pad with impossible ones
        cand = F.pad(cand, (0, 2 * K - k * V), value=float("-inf"))
    top, flat = cand.topk(2 * K, dim=-1)  # (A, 2K) best first
    parent, token = (flat // V).clamp_(max=k - 1), flat % V  # (A, 2K)
    is_eos = token == (-1 if eos_id is None else eos_id)  # (A, 2K)
    ended = is_eos[:, :K] & top[:, :K].isfinite()  # (A, K)
    rank = torch.arange(2 * K, device=top.device) + 2 * K * is_eos  # (A, 2K): eos ones last
    return BeamStep(top, parent, token, ended, rank.argsort(dim=-1)[:, :K])


@dataclass
class _Search:
    """Settings, per-sentence finished counts and finished hypotheses of one :func:`beam_search`."""

    K: int  # beam size
    max_new: int
    alpha: float
    form: str
    n_best: int
    early_stop: bool
    eos_id: int | None
    count: Tensor  # (B,) hypotheses finished per sentence
    best: Tensor  # (B, n_best) their best scores, descending (-inf: none); early_stop=False
    records: list[tuple]  # finished hypotheses, read back by results()

    def lp(self, length: int) -> float:
        return length_penalty(length, self.alpha, self.form)

    def count_finished(self, live: Tensor, log_p: Tensor, ended: Tensor, length: int) -> None:
        """Sentences ``live`` ``(A,)`` finish the hypotheses ``ended`` ``(A, c)`` of log-probs
        ``log_p`` ``(A, c)`` and ``length`` tokens: update their counts and best scores."""
        self.count.index_add_(0, live, ended.sum(dim=1))
        if not self.early_stop:
            scores = log_p.to(self.best.dtype) / self.lp(length)  # (A, c)
            scores = scores.masked_fill(~ended, float("-inf"))
            merged = torch.cat([self.best[live], scores], dim=1)  # (A, n_best + c)
            self.best[live] = merged.topk(self.n_best, dim=1).values

    def record(self, live: Tensor, tokens: Tensor, rows: Tensor, log_p: Tensor, ended: Tensor,
               length: int, eos: bool) -> None:
        """Keep the hypotheses ``ended`` ``(A, c)``: tokens ``tokens[rows[a, j]]``, log-probs
        ``log_p[a, j]``, of sentence ``live[a]``; read back in :meth:`results`."""
        self.records.append((live, tokens, rows, log_p, ended, length, eos))

    def done(self, live: Tensor, best_live: Tensor, length: int) -> Tensor:
        """``(A,)`` bool: may sentences ``live`` stop after ``length`` tokens, their best live
        log-probs ``best_live`` ``(A,)``? (The module docstring's stopping rules.)"""
        count = self.count[live]  # (A,)
        if self.early_stop:
            stop = count >= self.K
        else:
            largest_lp = max(self.lp(length + 1), self.lp(self.max_new))  # lp is monotone in L
            nth = self.best[live, self.n_best - 1]  # (A,) the n_best-th best finished score
            stop = (count >= self.n_best) & (best_live.to(self.best.dtype) / largest_lp <= nth)
        return stop | ~best_live.isfinite()  # or no live hypothesis left

    def results(self, batch: int) -> list[list[Hypothesis]]:
        finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
        for live, tokens, rows, log_p, ended, length, eos in self.records:
            sentences = live.unsqueeze(1).expand_as(ended)[ended].tolist()
            ids, values = tokens[rows[ended]].tolist(), log_p[ended].tolist()
            for sentence, hyp_ids, value in zip(sentences, ids, values, strict=True):
                finished[sentence].append(Hypothesis(hyp_ids, value / self.lp(length), value, eos))
        return [sorted(f, key=lambda h: -h.score)[: self.n_best] for f in finished]


def beam_search(
    model: nn.Module,
    src: Tensor | tuple[Tensor, ...] | None = None,
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
    before_step: BeforeStep | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch; returns the ``n_best`` hypotheses of each row, best first.

    Args:
        model, src, prompt, bos_id, eos_id, use_cache, window_keep, before_step: as for
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
    with inference(model, tokens_only=True):  # ids and floats out: inference_mode
        state, batch = make_state(  # one row per source: the K beams start equal
            model, src, prompt, bos_id=bos_id, eos_id=eos_id, use_cache=use_cache,
            window_keep=window_keep, before_step=before_step,
        )
        if state.limit is not None:
            max_new_tokens = min(max_new_tokens, state.limit)
        device = model_device(model)
        search = _Search(
            beam_size, max_new_tokens, float(length_penalty), penalty_form, n_best, early_stop,
            eos_id, count=torch.zeros(batch, dtype=torch.long, device=device),
            best=torch.full((batch, n_best), float("-inf"), dtype=_score_dtype(device), device=device),
            records=[],
        )
        _run(state, search, batch)
        return search.results(batch)


def beam_need(rows: int, beam_size: int, vocab_size: int, steps: int, *, name: str = "beam_size") -> Need:
    """What beam search cannot do without (a lower bound, :mod:`attnlab.memory`): at the first
    step the ``2K`` best extensions of each of ``rows`` sentences with their float32 scores,
    flat indices, parents and tokens (28 bytes each); from the second step on every live
    hypothesis' next-token scores, ``(rows · K, V)`` float32. ``name`` is the beam's setting."""
    first = sized("the best extensions of the first step", {"sentences": rows, "2": 2, name: beam_size},
                  28, "entries of 28 bytes")
    if steps < 2:
        return first
    scores = sized("every hypothesis' next-token scores",
                   {"sentences": rows, name: beam_size, "vocabulary": vocab_size}, 4)
    return max(first, scores, key=lambda need: need.nbytes)


def _score_dtype(device: torch.device) -> torch.dtype:
    """Scores in float64, as Python's floats (exact stopping); MPS has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


def _run(state, search: _Search, batch: int) -> None:
    """The beam loop; ``state`` holds ``k`` rows per live sentence, sentence-major: ``k = 1``
    until the first step, ``K`` after it."""
    K, device = search.K, search.count.device
    live = torch.arange(batch, device=device)  # (A,) the sentence of each group of rows
    log_p = torch.zeros(batch, 1, device=device)  # (A, k): the K equal beams start as one
    tokens = torch.zeros(batch, 0, dtype=torch.long, device=device)  # (A·k, t)
    for t in range(search.max_new):
        (A, k), length = log_p.shape, t + 1
        step = torch.log_softmax(state.logits().float(), dim=-1)  # (A·k, V)
        if t == 0:  # before the beams are expanded: a beam of a billion is refused here
            check_fits([beam_need(A, K, step.shape[-1], search.max_new)], device)
        if state.blocked:
            step[:, list(state.blocked)] = float("-inf")  # never generate pad or bos
        ext = expand_beams(log_p, step, K, search.eos_id)
        ext_rows = torch.arange(A, device=device).unsqueeze(1) * k + ext.parent  # (A, 2K)
        search.count_finished(live, ext.log_p[:, :K], ext.ended, length)
        log_p, rows, tok = (x.gather(1, ext.pick) for x in (ext.log_p, ext_rows, ext.token))  # (A, K)
        if length == search.max_new:  # out of steps: the live hypotheses end unfinished
            search.record(live, tokens, ext_rows[:, :K], ext.log_p[:, :K], ext.ended, length, True)
            tokens = torch.cat([tokens[rows.view(-1)], tok.view(-1, 1)], dim=1)  # (A·K, T)
            last = torch.arange(A * K, device=device).view(A, K)
            search.record(live, tokens, last, log_p, log_p.isfinite(), length, False)
            return
        done = search.done(live, log_p.max(dim=1).values, length)  # (A,)
        *stop, any_ended = torch.cat([done, ext.ended.any().view(1)]).tolist()  # the host sync
        if any_ended:
            search.record(live, tokens, ext_rows[:, :K], ext.log_p[:, :K], ext.ended, length, True)
        if all(stop):
            return
        if any(stop):  # finished sentences leave the batch
            kept = torch.tensor([a for a, s in enumerate(stop) if not s], device=device)  # (A',)
            live, log_p, rows, tok = live[kept], log_p[kept], rows[kept], tok[kept]
        rows = rows.view(-1)  # (A'·K,) the state row each new hypothesis extends
        tokens = torch.cat([tokens[rows], tok.view(-1, 1)], dim=1)  # (A'·K, t + 1)
        # the KV cache follows the surviving hypotheses; while no sentence leaves, each row stays
        # on its own sentence's rows, whose memory and cross-attention keys/values are equal
        state.select(rows, same_sources=k == K and not any(stop))
        state.append(tok.view(-1))
