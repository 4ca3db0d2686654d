"""Word and character error rates: hand-counted cases, the edit distance's properties, and
jiwer's numbers on random sentences (jiwer comes with ``make data-speech``)."""

from __future__ import annotations

import random

import pytest

from attnlab.evaluation import cer, edit_distance, wer

WORDS = "a the dog cat runs sits on mat grass".split()


@pytest.mark.parametrize("reference,hypothesis,distance", [
    ("", "", 0), ("abc", "", 3), ("", "ab", 2), ("kitten", "sitting", 3),
    ("flaw", "lawn", 2), ("intention", "execution", 5), ("abc", "abc", 0)])
def test_edit_distance_by_hand(reference, hypothesis, distance):
    assert edit_distance(reference, hypothesis) == distance
    assert edit_distance(hypothesis, reference) == distance  # symmetric


def test_word_and_character_rates_by_hand():
    score = wer(["a dog runs", "the cat"], ["the dog runs fast", "the cat"])
    assert (score.errors, score.length) == (2, 6)  # a→the substituted, fast deleted
    assert str(score) == "WER = 33.33 % (2 errors / 6 words)"
    char = cer(["a dg"], [" a dog "])  # ends stripped, the inner space counted
    assert (char.errors, char.length, char.rate) == (1, 5, 0.2)
    assert wer(["one two three"], ["one"]).rate == 2.0  # insertions can take a rate past 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="got one string"):
        wer("a dog", "a dog")
    with pytest.raises(ValueError, match="references has 1 sentences but hypotheses has 2"):
        cer(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="at least one word"):
        wer(["a"], [" "])


def test_the_triangle_inequality_holds():
    rng = random.Random(1)
    for _ in range(200):
        a, b, c = (rng.choices(WORDS, k=rng.randint(0, 6)) for _ in range(3))
        assert edit_distance(a, c) <= edit_distance(a, b) + edit_distance(b, c)


def test_rates_equal_jiwers():
    jiwer = pytest.importorskip("jiwer", reason="jiwer is not installed: run `make data-speech`")
    rng = random.Random(0)
    for _ in range(100):
        refs = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(4)]
        hyps = [" ".join(rng.choices(WORDS, k=rng.randint(0, 9))) for _ in range(4)]
        assert wer(hyps, refs).rate == pytest.approx(jiwer.wer(refs, hyps), abs=1e-12)
        assert cer(hyps, refs).rate == pytest.approx(jiwer.cer(refs, hyps), abs=1e-12)
