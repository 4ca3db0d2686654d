"""Long test utterances (Chorowski et al. 2015's long-utterance test): each joins ``factor``
distinct test sentences (or draws a digit string ``factor`` times as long), is spoken by a
test voice only, and is one plan for one seed. Speaking them skips without eSpeak NG
(``make data-speech``)."""

from __future__ import annotations

import shutil

import pytest

from attnlab.data.speech import longer_utterances, plan_corpus, plan_longer
from attnlab.data.speech.espeak import INSTALL_COMMAND, variant_of
from attnlab.data.speech.synthetic import SyntheticSpeechConfig

OWN = SyntheticSpeechConfig(text=tuple(f"sentence number {w}" for w in "abcdefghijklmnop"),
                            sizes=(8, 4, 4), held_out_variants=1, seed=4)
DIGITS = SyntheticSpeechConfig(text="digits", sizes=(20, 5, 5), seed=1)


@pytest.mark.parametrize("factor", [1, 2, 3])
def test_sentences_joined_are_distinct_test_sentences_spoken_by_test_voices(factor):
    plan = plan_corpus(OWN)
    tests, trained = {u["text"] for u in plan["test"]}, {u["text"] for u in plan["train"]}
    test_variants = {variant_of(u["voice"]) for u in plan["test"]}
    items = plan_longer(OWN, factor, 12, seed=7)
    assert len(items) == 12
    for item in items:
        parts = [" ".join(item["text"].split()[i:i + 3]) for i in range(0, 3 * factor, 3)]
        assert len(item["text"].split()) == 3 * factor and len(set(parts)) == factor
        assert set(parts) <= tests and not set(parts) & trained
        assert variant_of(item["voice"]) in test_variants


def test_digit_strings_scale_with_the_factor_and_one_seed_is_one_plan():
    items = plan_longer(DIGITS, 3, 30, seed=2)
    assert all(9 <= len(u["text"].split()) <= 24 for u in items)
    assert max(len(u["text"].split()) for u in items) > 8  # longer than any training string
    assert items == plan_longer(DIGITS, 3, 30, seed=2)
    assert items != plan_longer(DIGITS, 3, 30, seed=3)
    assert len({u["noise_seed"] for u in items}) == 30


def test_bad_requests_are_named():
    with pytest.raises(ValueError, match="factor 5 joins"):
        plan_longer(OWN, 5, 3)
    with pytest.raises(ValueError, match="count must be > 0"):
        plan_longer(OWN, 2, 0)


@pytest.mark.skipif(shutil.which("espeak-ng") is None,
                    reason=f"espeak-ng is not installed: run `{INSTALL_COMMAND}` (as root)")
def test_spoken_longer_utterances_last_longer(tmp_path):
    short = longer_utterances(DIGITS, 1, 3, seed=5, cache=tmp_path)
    long = longer_utterances(DIGITS, 4, 3, seed=5, cache=tmp_path)
    assert [u.text for u in long["test"]] == [u["text"] for u in plan_longer(DIGITS, 4, 3, seed=5)]
    seconds = [sum(len(c.audio(u)) for u in c["test"]) / c.sample_rate for c in (short, long)]
    words = [sum(len(u.text.split()) for u in c["test"]) for c in (short, long)]
    assert seconds[1] / seconds[0] == pytest.approx(words[1] / words[0], rel=0.35)
