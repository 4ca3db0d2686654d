"""Beam search: exhaustive optimum on tiny models, beam 1 = greedy, independence from batch and
padding, scores recomputed by teacher forcing, and bad input."""

from __future__ import annotations

import itertools

import pytest
import torch

from attnlab.generation import beam_search, greedy_search
from generation_toys import BOS, EOS, PAD, VOCAB, tiny_gpt, toy_translator

CONTENT = list(range(3, VOCAB))  # what the translator may emit besides eos (pad, bos blocked)


def lp(length, alpha, form):
    return ((5 + length) / 6) ** alpha if form == "gnmt" else length**alpha


def teacher_forced_log_probs(score_fn, outputs):
    """Summed log-probabilities of each output (a list of target ids, eos included if any).

    ``score_fn(targets (N, L)) -> log-probs (N, L, V)`` for targets of one length."""
    result = {}
    for length in {len(o) for o in outputs}:
        group = [o for o in outputs if len(o) == length]
        targets = torch.tensor(group)  # (N, L)
        with torch.no_grad():
            logp = (
                score_fn(targets).double().gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            )  # (N, L)
        result.update(zip(map(tuple, group), logp.sum(-1).tolist(), strict=True))
    return result


def translator_scorer(model, src_row):
    src = src_row[src_row != PAD].unsqueeze(0)  # (1, S')

    def score(targets):
        tgt_in = torch.cat([torch.full((len(targets), 1), BOS), targets[:, :-1]], dim=1)  # (N, L)
        return model(src.expand(len(targets), -1), tgt_in).log_softmax(-1)

    return score


def gpt_scorer(model, prompt):
    def score(targets):
        idx = torch.cat([torch.tensor([prompt]).expand(len(targets), -1), targets], dim=1)
        return model(idx[:, :-1]).log_softmax(-1)[:, len(prompt) - 1 :]

    return score


def exhaustive(score_fn, tokens, max_new, alpha, form):
    """Every output: ``y + [eos]`` with ``len(y) < max_new``, or ``y`` of ``max_new`` tokens
    without eos; ranked by log p / lp(length). Returns [(tokens without eos, score)], best first."""
    outputs = [
        (list(y) + [EOS], list(y))
        for n in range(max_new)
        for y in itertools.product(tokens, repeat=n)
    ]
    outputs += [(list(y), list(y)) for y in itertools.product(tokens, repeat=max_new)]
    logp = teacher_forced_log_probs(score_fn, [o for o, _ in outputs])
    ranked = [(shown, logp[tuple(o)] / lp(len(o), alpha, form)) for o, shown in outputs]
    return sorted(ranked, key=lambda r: -r[1])


@pytest.mark.parametrize("early_stop", [False, True])
@pytest.mark.parametrize(
    "alpha, form", [(0.0, "gnmt"), (0.6, "gnmt"), (2.0, "gnmt"), (1.0, "simple")]
)
def test_wide_beam_finds_the_exhaustive_optimum_translator(translator, alpha, form, early_stop):
    max_new, c = 3, len(CONTENT)
    src = torch.tensor([[4, 7, 0, 0], [9, 3, 5, 8]])
    wide = c ** (max_new - 1) * (c + 1)  # every candidate of the last step fits in the beam
    hyps = beam_search(
        translator,
        src,
        beam_size=wide,
        max_new_tokens=max_new,
        bos_id=BOS,
        eos_id=EOS,
        length_penalty=alpha,
        penalty_form=form,
        n_best=5,
        early_stop=early_stop,
    )
    for row, found in zip(src, hyps, strict=True):
        best = exhaustive(translator_scorer(translator, row), CONTENT, max_new, alpha, form)[:5]
        assert [h.tokens for h in found] == [b[0] for b in best]
        torch.testing.assert_close(
            [h.score for h in found], [b[1] for b in best], rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_finds_the_exhaustive_optimum_gpt(alpha):
    model, prompt, max_new = tiny_gpt(vocab_size=6, sharpen=8.0), [3, 4, 5], 3
    non_eos = [t for t in range(6) if t != EOS]
    wide = len(non_eos) ** (max_new - 1) * (len(non_eos) + 1)
    (found,) = beam_search(
        model,
        prompt=prompt,
        beam_size=wide,
        max_new_tokens=max_new,
        eos_id=EOS,
        length_penalty=alpha,
        n_best=4,
        early_stop=False,
    )
    best = exhaustive(gpt_scorer(model, prompt), non_eos, max_new, alpha, "gnmt")[:4]
    assert [h.tokens for h in found] == [b[0] for b in best]
    torch.testing.assert_close([h.score for h in found], [b[1] for b in best], rtol=1e-5, atol=1e-5)


def test_scores_are_the_models_log_probs(translator, batch):
    """Every returned hypothesis: log_prob = teacher-forced sum, score = log_prob / lp(L)."""
    hyps = beam_search(
        translator,
        batch,
        beam_size=4,
        n_best=4,
        max_new_tokens=9,
        bos_id=BOS,
        eos_id=EOS,
        length_penalty=0.6,
    )
    for row, found in zip(batch, hyps, strict=True):
        assert len(found) == 4 and len({tuple(h.tokens) for h in found}) == 4
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
        outputs = [h.tokens + [EOS] * h.finished for h in found]
        logp = teacher_forced_log_probs(translator_scorer(translator, row), outputs)
        for h, o in zip(found, outputs, strict=True):
            assert h.log_prob == pytest.approx(logp[tuple(o)], abs=1e-4)
            assert h.score == pytest.approx(h.log_prob / lp(len(o), 0.6, "gnmt"), rel=1e-9)
            assert h.finished or len(h.tokens) == 9


def reference_beam(model, src_row, beam, max_new, alpha, early_stop, n_best):
    """Textbook beam search on one unpadded sentence: full forward per hypothesis, no cache,
    no batching. Per step: the 2K best extensions; eos among the first K finishes; the K best
    others live on. Stops after K finished (early_stop) or at max_new."""
    src = src_row[src_row != PAD].unsqueeze(0)  # (1, S')
    live, finished = [([], 0.0)], []
    for t in range(max_new):
        candidates = []
        for tokens, score in live:
            with torch.no_grad():
                logp = model(src, torch.tensor([[BOS] + tokens]))[0, -1].log_softmax(-1)  # (V,)
            logp[[PAD, BOS]] = float("-inf")
            candidates += [(score + float(logp[v]), tokens, v) for v in range(VOCAB)]
        candidates = sorted(candidates, key=lambda c: -c[0])[: 2 * beam]
        live = []
        for rank, (score, tokens, v) in enumerate(candidates):
            if v == EOS and rank < beam:
                finished.append((tokens, score / lp(t + 1, alpha, "gnmt")))
            elif v != EOS and len(live) < beam:
                live.append((tokens + [v], score))
        if early_stop and len(finished) >= beam:
            break
    else:
        finished += [(tokens, score / lp(max_new, alpha, "gnmt")) for tokens, score in live]
    return sorted(finished, key=lambda f: -f[1])[:n_best]


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_matches_textbook_beam_search(translator, batch, alpha, early_stop):
    """A narrow beam against :func:`reference_beam`; with early_stop=False both run to the end
    conceptually, so the exact stopping bound must not change the outcome."""
    hyps = beam_search(
        translator,
        batch,
        beam_size=3,
        n_best=3,
        max_new_tokens=8,
        bos_id=BOS,
        eos_id=EOS,
        length_penalty=alpha,
        early_stop=early_stop,
    )
    for row, found in zip(batch, hyps, strict=True):
        expected = reference_beam(translator, row, 3, 8, alpha, early_stop, 3)
        assert [h.tokens for h in found] == [e[0] for e in expected]
        torch.testing.assert_close(
            [h.score for h in found], [e[1] for e in expected], rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_beam_one_is_greedy(translator, batch, alpha):
    hyps = beam_search(
        translator,
        batch,
        beam_size=1,
        max_new_tokens=9,
        bos_id=BOS,
        eos_id=EOS,
        length_penalty=alpha,
    )
    greedy = greedy_search(translator, batch, max_new_tokens=9, bos_id=BOS, eos_id=EOS)
    assert [h[0].tokens for h in hyps] == greedy


def test_beam_one_is_greedy_gpt():
    model = tiny_gpt(block_size=8, sharpen=8.0)
    prompt = torch.tensor([[3, 1, 4], [1, 5, 9]])
    hyps = beam_search(model, prompt=prompt, beam_size=1, max_new_tokens=20, eos_id=7)
    assert [h[0].tokens for h in hyps] == greedy_search(
        model, prompt=prompt, max_new_tokens=20, eos_id=7
    )


@pytest.mark.parametrize("early_stop", [True, False])
def test_results_do_not_depend_on_batch_or_padding(translator, batch, early_stop):
    kwargs = dict(
        beam_size=4, n_best=3, max_new_tokens=9, bos_id=BOS, eos_id=EOS, early_stop=early_stop
    )
    together = beam_search(translator, batch, **kwargs)
    reversed_order = beam_search(translator, batch.flip(0), **kwargs)[::-1]
    for i, row in enumerate(batch):
        alone = beam_search(translator, row[row != PAD].unsqueeze(0), **kwargs)[0]
        padded = beam_search(
            translator, torch.cat([row, torch.zeros(3, dtype=torch.long)]).unsqueeze(0), **kwargs
        )[0]
        for other in (alone, padded, reversed_order[i]):
            assert [h.tokens for h in other] == [h.tokens for h in together[i]]
            torch.testing.assert_close(
                [h.score for h in other], [h.score for h in together[i]], rtol=1e-5, atol=1e-5
            )
    lengths = {len(h[0].tokens) for h in together}
    assert len(lengths) > 1  # sentences finished at different steps (rows left the batch)


def test_cache_and_recomputation_agree(translator, batch):
    kwargs = dict(beam_size=3, n_best=2, max_new_tokens=9, bos_id=BOS, eos_id=EOS)
    cached, recomputed = (
        beam_search(translator, batch, **kwargs),
        beam_search(translator, batch, use_cache=False, **kwargs),
    )
    assert [[h.tokens for h in r] for r in cached] == [[h.tokens for h in r] for r in recomputed]


def test_exact_stopping_never_scores_worse(translator, batch):
    """early_stop=False keeps searching after beam_size finished, so its best can only improve."""
    kwargs = dict(beam_size=2, max_new_tokens=9, bos_id=BOS, eos_id=EOS, length_penalty=1.0)
    early = beam_search(translator, batch, early_stop=True, **kwargs)
    exact = beam_search(translator, batch, early_stop=False, **kwargs)
    assert all(x[0].score >= e[0].score - 1e-6 for x, e in zip(exact, early, strict=True))


def test_learned_positions_cap_the_output(batch):
    model = toy_translator(steps=0, positional="learned", max_len=6)
    hyps = beam_search(model, batch, beam_size=3, max_new_tokens=40, bos_id=BOS, eos_id=EOS)
    assert all(len(h[0].tokens) <= 6 for h in hyps)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(beam_size=0), "beam_size must be > 0, got 0"),
        (dict(n_best=3, beam_size=2), "n_best must be <= beam_size=2, got 3"),
        (dict(max_new_tokens=0), "max_new_tokens must be > 0, got 0"),
        (dict(penalty_form="wu"), "penalty_form must be one of gnmt, simple, got 'wu'"),
        (dict(length_penalty=float("inf")), "length_penalty must be a finite number"),
        (dict(bos_id=None), "needs bos_id and eos_id"),
    ],
)
def test_bad_arguments(translator, batch, kwargs, message):
    kwargs = {"max_new_tokens": 5, "bos_id": BOS, "eos_id": EOS, **kwargs}
    with pytest.raises(ValueError, match=message):
        beam_search(translator, batch, **kwargs)
