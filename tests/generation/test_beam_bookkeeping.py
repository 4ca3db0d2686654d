"""Beam search's vectorised bookkeeping against a plain per-sentence loop: :func:`expand_beams`
on random log-probabilities, and whole searches (counts, stopping rules, sentences leaving the
batch, the finished hypotheses read back) on a stub translator whose next-token logits are
random but fixed by the source and the prefix."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor, nn

from attnlab.generation import beam_search
from attnlab.generation.beam import expand_beams, length_penalty

PAD, BOS, EOS, V = 0, 1, 2, 12


def loop_expand(log_p: Tensor, step: Tensor, K: int, eos_id: int | None):
    """Per sentence, every extension ranked by log-prob: the eos ones among the first ``K``
    finish; the ``K`` best others live. Returns ``(finished, live)`` lists of
    ``(parent, token, log_p)`` per sentence, finite log-probs only."""
    A, k = log_p.shape
    finished, live = [], []
    for a in range(A):
        scores = log_p[a].unsqueeze(-1) + step.view(A, k, -1)[a]  # (k, V) float32, as beam.py
        cands = [(float(scores[b, v]), b, v) for b in range(k) for v in range(scores.shape[1])]
        cands.sort(key=lambda c: -c[0])
        ends = [(b, v, s) for s, b, v in cands[:K] if v == eos_id and math.isfinite(s)]
        others = [(b, v, s) for s, b, v in cands if v != eos_id][:K]
        finished.append(ends)
        live.append([c for c in others if math.isfinite(c[2])])
    return finished, live


@pytest.mark.parametrize(
    "A, k, K, vocab, eos_id",
    [(5, 1, 3, 12, 2), (5, 3, 3, 12, 2), (4, 4, 4, 6, 5), (3, 1, 4, 5, 2), (4, 2, 2, 7, None)],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expand_beams_matches_a_loop(A, k, K, vocab, eos_id, seed):
    """Random log-probs with empty beam slots and blocked tokens (``-inf``), a boosted eos;
    (3, 1, 4, 5) has fewer extensions (5) than 2K = 8, so the candidates are padded."""
    g = torch.Generator().manual_seed(seed)
    log_p = -3 * torch.rand(A, k, generator=g)  # (A, k)
    log_p[torch.rand(A, k, generator=g) < 0.2] = float("-inf")  # empty slots
    log_p[:, 0] = -torch.rand(A, generator=g)  # at least one live beam per sentence
    logits = 2 * torch.randn(A * k, vocab, generator=g)
    if eos_id is not None:
        logits[:, eos_id] += 2.0
    step = torch.log_softmax(logits, dim=-1)
    step[:, 0] = float("-inf")  # a blocked token
    finished, live = loop_expand(log_p, step, K, eos_id)
    ext = expand_beams(log_p, step.clone(), K, eos_id)
    assert ext.log_p.shape == ext.parent.shape == ext.token.shape == (A, 2 * K)
    assert ext.ended.shape == ext.pick.shape == (A, K)
    for a in range(A):
        ends = [(int(ext.parent[a, j]), int(ext.token[a, j]), float(ext.log_p[a, j]))
                for j in range(K) if ext.ended[a, j]]
        picks = [(int(ext.parent[a, j]), int(ext.token[a, j]), float(ext.log_p[a, j]))
                 for j in ext.pick[a].tolist()]
        assert ends == finished[a]
        assert [c for c in picks if math.isfinite(c[2])] == live[a]
        assert all(0 <= p < k and t != eos_id for p, t, _ in picks)
    assert ext.ended.any() or eos_id is None  # the boosted eos finishes some hypotheses


class RandomTranslator(nn.Module):
    """Encoder-decoder stub: the next-token logits are a random vector seeded by (source,
    target prefix), eos boosted by ``eos_bias`` per target token, so sentences end at varied
    steps. ``calls`` records the rows of each :meth:`decode` call (no KV cache: pass
    ``use_cache=False``)."""

    def __init__(self, eos_bias: float) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1), requires_grad=False)  # the device
        self.config = SimpleNamespace(pad_id=PAD, positional="sinusoidal", max_len=64)
        self.eos_bias, self.calls = eos_bias, []

    def next_logits(self, source: tuple[int, ...], prefix: tuple[int, ...]) -> Tensor:
        g = torch.Generator().manual_seed(hash((source, prefix)) % 2**31)
        logits = 3 * torch.randn(V, generator=g)  # (V,)
        logits[EOS] += self.eos_bias * len(prefix)
        return logits

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        return src.float().unsqueeze(-1), src != PAD  # memory (B, S, 1): the ids themselves

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None) -> Tensor:
        self.calls.append(tgt.shape[0])
        if src_mask is None:  # no source is padded
            src_mask = torch.ones(memory.shape[:2], dtype=torch.bool)
        sources = [tuple(m[mask].long().tolist()) for m, mask in zip(memory[..., 0], src_mask, strict=True)]
        rows = [self.next_logits(s, tuple(t)) for s, t in zip(sources, tgt.tolist(), strict=True)]
        return torch.stack(rows).unsqueeze(1)  # (R, 1, V): the last position's logits


def loop_beam(model: RandomTranslator, source: tuple[int, ...], K: int, max_new: int,
              alpha: float, early_stop: bool, n_best: int) -> list[tuple[list[int], float, bool]]:
    """Textbook beam search of one sentence, scores added in float32 as the model's are: the
    2K best extensions a step; eos among the first K finishes, the K best others live. Stops
    after K finished (early_stop) or at max_new (what early_stop=False must equal); at max_new
    the live ones end unfinished even if the K-th finished in that last step (as beam.py)."""
    live, finished = [([], torch.tensor(0.0))], []
    for t in range(max_new):
        cands = []
        for tokens, score in live:
            logp = torch.log_softmax(model.next_logits(source, (BOS, *tokens)), dim=-1)
            logp[[PAD, BOS]] = float("-inf")
            cands += [(score + logp[v], tokens, v) for v in range(V)]
        cands = sorted(cands, key=lambda c: -float(c[0]))[: 2 * K]
        live = []
        for rank, (score, tokens, v) in enumerate(cands):
            if v == EOS and rank < K:
                finished.append((tokens, float(score), True, t + 1))
            elif v != EOS and len(live) < K:
                live.append((tokens + [v], score))
        if early_stop and len(finished) >= K and t + 1 < max_new:
            break
    else:
        finished += [(tokens, float(score), False, max_new) for tokens, score in live]
    ranked = sorted(finished, key=lambda f: -f[1] / length_penalty(f[3], alpha))
    return [(tokens, log_p, done) for tokens, log_p, done, _ in ranked[:n_best]]


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize(
    "K, n_best, alpha, eos_bias", [(3, 3, 0.6, 0.8), (4, 2, 1.5, 0.5), (2, 1, 0.0, 1.2), (3, 1, 3.0, 0.5)]
)
def test_search_matches_a_loop_on_random_logits(early_stop, K, n_best, alpha, eos_bias):
    """Sentences stop at different steps; α = 3 favours long outputs so much that the exact
    stopping rule (early_stop=False) must look ahead to max_new's length penalty."""
    model, max_new = RandomTranslator(eos_bias), 7
    g = torch.Generator().manual_seed(K)
    src = torch.randint(3, V, (7, 5), generator=g)
    for i, n in enumerate([5, 2, 4, 1, 3, 5, 2]):
        src[i, n:] = PAD
    hyps = beam_search(model, src, beam_size=K, n_best=n_best, max_new_tokens=max_new, bos_id=BOS,
                       eos_id=EOS, length_penalty=alpha, early_stop=early_stop, use_cache=False)
    for row, found in zip(src, hyps, strict=True):
        expected = loop_beam(model, tuple(row[row != PAD].tolist()), K, max_new, alpha, early_stop, n_best)
        assert [(h.tokens, h.finished) for h in found] == [(e[0], e[2]) for e in expected]
        assert [h.log_prob for h in found] == pytest.approx([e[1] for e in expected], rel=1e-6)
    assert len(set(model.calls)) > 2  # sentences left the batch at different steps


def test_first_step_runs_one_row_per_sentence():
    """The K beams start equal: the first decoder call sees one row per source, later ones K."""
    model = RandomTranslator(eos_bias=0.0)
    src = torch.randint(3, V, (4, 3), generator=torch.Generator().manual_seed(0))
    beam_search(model, src, beam_size=3, max_new_tokens=4, bos_id=BOS, eos_id=EOS, use_cache=False)
    assert model.calls[0] == 4 and model.calls[1] == 12
