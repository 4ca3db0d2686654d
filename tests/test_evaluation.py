"""BLEU / chrF agree with sacrebleu called directly; perplexity is exp of the mean NLL."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from attnlab.data import load_multi30k
from attnlab.evaluation import Score, bleu, chrf, perplexity
from repo_paths import SHARED_DATA

REAL_DATA = Path(os.environ["ATTNLAB_DATA"]) if os.environ.get("ATTNLAB_DATA") else SHARED_DATA
requires_data = pytest.mark.skipif(
    not os.environ.get("ATTNLAB_DATA") and not SHARED_DATA.is_dir(),
    reason="ATTNLAB_DATA is unset and ../shared/data is missing",
)

HYPS = ["A dog runs across the grass.", "Two men are talking, outside.", "a Girl in a red coat"]
REFS = ["A dog is running across the grass.", "Two men talk outside.", "A girl in a red coat."]
REFS2 = ["A dog runs on the lawn.", "Two men are talking outdoors.", "A girl wearing a red coat."]


def test_bleu_equals_sacrebleu():
    got = bleu(HYPS, REFS)
    expected = sacrebleu.corpus_bleu(HYPS, [REFS])
    assert isinstance(got, Score) and got.name == "BLEU"
    assert got.score == pytest.approx(expected.score, abs=1e-12)
    assert got.details == str(expected)
    for part in ("nrefs:1", "case:mixed", "tok:13a", f"version:{sacrebleu.__version__}"):
        assert part in got.signature
    assert got.signature in str(got)


def test_bleu_with_several_reference_streams():
    got = bleu(HYPS, [REFS, REFS2])
    assert got.score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS2]).score, abs=1e-12)
    assert "nrefs:2" in got.signature


def test_bleu_is_cased():
    assert bleu(["a dog runs ."], ["A dog runs ."]).score < 100.0
    assert bleu(["A dog runs."], ["A dog runs."]).score == pytest.approx(100.0)


def test_chrf_equals_sacrebleu():
    got = chrf(HYPS, REFS)
    assert got.score == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-12)
    assert got.name == "chrF" and "nc:6" in got.signature


@pytest.mark.parametrize("metric", [bleu, chrf])
def test_mismatched_lengths_are_rejected(metric):
    with pytest.raises(
        ValueError, match="references stream 0 has 2 sentences but hypotheses has 3"
    ):
        metric(HYPS, REFS[:2])
    with pytest.raises(ValueError, match="one string"):
        metric("A dog.", ["A dog."])


@requires_data
def test_bleu_on_real_references():
    pairs = load_multi30k("test_2016_flickr", "de", "en", data_dir=REAL_DATA)
    refs = [t for _, t in pairs]
    assert bleu(refs, refs).score == pytest.approx(100.0)
    copy_source = [s for s, _ in pairs]  # "translate" by copying the German
    expected = sacrebleu.corpus_bleu(copy_source, [refs]).score
    assert bleu(copy_source, refs).score == pytest.approx(expected, abs=1e-12)
    assert expected < 10.0


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    vocab = 37
    logits = torch.zeros(10, vocab, dtype=torch.float64)
    loss = F.cross_entropy(logits, torch.randint(vocab, (10,)))
    assert perplexity(loss) == pytest.approx(vocab, rel=1e-12)
    assert perplexity(0.0) == 1.0
    assert perplexity(2.5) == pytest.approx(math.exp(2.5))


def test_perplexity_edge_cases():
    assert perplexity(1e6) == math.inf
    with pytest.raises(ValueError, match="mean_nll must be"):
        perplexity(-0.1)
    with pytest.raises(ValueError, match="mean_nll must be"):
        perplexity(float("nan"))
