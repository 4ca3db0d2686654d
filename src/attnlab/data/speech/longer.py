"""Test utterances several times longer than the training ones, spoken by the test split's
held-out voices: the long-utterance test of Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015),
"Attention-Based Models for Speech Recognition" §3 (Hasegawa-Johnson, ECE 417 Lecture 21),
where content-only attention loses its place and location-aware attention does not.

For a synthetic corpus's config (:class:`~attnlab.data.speech.SyntheticSpeechConfig`),
:func:`longer_utterances` plans ``count`` utterances ``factor`` times the length of one:

* sentences (``"multi30k"`` or your own): ``factor`` distinct **test** sentences joined into
  one text, spoken without a pause (Chorowski et al. joined TIMIT utterances the same way);
* ``"digits"``: a fresh string of ``3·factor``-``8·factor`` digits (training draws 3-8),
  the repetitive case.

Each borrows voice, rate, pitch and noise level from a test utterance drawn at random, so the
voices are the test split's (never heard in training), with a noise seed of its own. Everything
is drawn from ``seed`` and ``factor``; the audio is cached like the corpus's own
(:func:`~attnlab.data.speech.synthetic.speak_plan`).
"""

from __future__ import annotations

import random
from dataclasses import asdict

from attnlab.data.corpora import PathLike
from attnlab.data.speech.corpus import SpeechCorpus
from attnlab.data.speech.synthetic import SyntheticSpeechConfig, digit_strings, plan_corpus, speak_plan
from attnlab.validation import check_positive


def plan_longer(config: SyntheticSpeechConfig, factor: int, count: int, *, seed: int = 0,
                data_dir: PathLike | None = None) -> list[dict]:
    """The ``count`` planned utterances (:func:`~attnlab.data.speech.plan_corpus`'s items) of
    :func:`longer_utterances`, no audio yet."""
    check_positive("factor", factor)
    check_positive("count", count)
    tests = plan_corpus(config, data_dir)["test"]
    if len(tests) < factor:
        raise ValueError(f"factor {factor} joins that many distinct test sentences; the corpus has "
                         f"{len(tests)} (sizes {config.sizes})")
    rng = random.Random(seed * 1_000_003 + factor)
    if config.text == "digits":
        texts = digit_strings(count, rng, 3 * factor, 8 * factor)
    else:
        sentences = [item["text"] for item in tests]
        texts = [" ".join(rng.sample(sentences, factor)) for _ in range(count)]
    return [{**rng.choice(tests), "text": text, "noise_seed": rng.getrandbits(32)} for text in texts]


def longer_utterances(config: SyntheticSpeechConfig, factor: int, count: int, *, seed: int = 0,
                      data_dir: PathLike | None = None, cache: PathLike | None = None,
                      progress: bool = False) -> SpeechCorpus:
    """A corpus whose ``test`` split holds ``count`` utterances ``factor`` times as long as one of
    ``config``'s, spoken by its test voices (see the module docstring)."""
    items = plan_longer(config, factor, count, seed=seed, data_dir=data_dir)
    info = {"config": asdict(config), "factor": factor, "seed": seed}
    return speak_plan({"test": items}, config.sample_rate, info, cache=cache, progress=progress)
