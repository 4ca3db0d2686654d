"""The synthetic speech corpus: splits disjoint in texts and in voices, one seed one corpus,
the cache read without eSpeak NG, an interrupted synthesis resumed; and a folder of your own
WAV files read the same way. Tests that speak skip without eSpeak NG (``make data-speech``)."""

from __future__ import annotations

import os
import shutil
import wave
from pathlib import Path

import numpy as np
import pytest

from attnlab.data.speech import synthetic
from attnlab.data.speech.corpus import normalize_transcript
from attnlab.data.speech.espeak import ACCENTS, INSTALL_COMMAND, VARIANTS, speak, variant_of
from attnlab.data.speech.folder import speech_folder
from attnlab.data.speech.synthetic import SyntheticSpeechConfig, plan_corpus, synthetic_speech
from attnlab.data.speech.wav import write_wav
from repo_paths import SHARED_DATA

DATA = Path(os.environ.get("ATTNLAB_DATA") or SHARED_DATA)
MULTI30K = DATA / "multi30k" / "train.en.gz"
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason=f"espeak-ng is not installed: run `{INSTALL_COMMAND}` (as root)")
needs_multi30k = pytest.mark.skipif(not MULTI30K.is_file(), reason=f"{MULTI30K} not found (set ATTNLAB_DATA)")
SMALL = SyntheticSpeechConfig(text="digits", sizes=(4, 2, 2), seed=3)


def spoken_disjointly(plan: dict[str, list[dict]]) -> None:
    texts = {split: {u["text"] for u in items} for split, items in plan.items()}
    voices = {split: {u["voice"] for u in items} for split, items in plan.items()}
    variants = {split: {variant_of(v) for v in vs} for split, vs in voices.items()}
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        assert not texts[a] & texts[b], f"{a} and {b} share texts"
        assert not variants[a] & variants[b], f"{a} and {b} share voices"


@needs_multi30k
def test_multi30k_splits_share_no_sentence_and_no_voice():
    plan = plan_corpus(SyntheticSpeechConfig(sizes=(300, 50, 50), seed=1))
    assert [len(plan[s]) for s in ("train", "valid", "test")] == [300, 50, 50]
    spoken_disjointly(plan)
    for items in plan.values():
        for u in items:
            assert u["text"] == normalize_transcript(u["text"]) and u["text"]
            assert 130 <= u["rate"] <= 200 and 30 <= u["pitch"] <= 70 and 15 <= u["snr_db"] <= 40


def test_digit_and_own_sentence_splits_share_no_text_and_no_voice():
    spoken_disjointly(plan_corpus(SyntheticSpeechConfig(text="digits", sizes=(200, 30, 30), seed=5)))
    own = tuple(f"Sentence number {w}." for w in ("one", "two", "three", "four", "five", "six", "seven"))
    plan = plan_corpus(SyntheticSpeechConfig(text=own, sizes=(3, 2, 2), held_out_variants=1, seed=2))
    spoken_disjointly(plan)
    spoken = sorted(u["text"] for items in plan.values() for u in items)
    assert spoken == sorted(map(normalize_transcript, own))


def test_one_seed_gives_one_plan_and_another_seed_another():
    config = SyntheticSpeechConfig(text="digits", sizes=(50, 10, 10), seed=7)
    assert plan_corpus(config) == plan_corpus(config)
    other = SyntheticSpeechConfig(text="digits", sizes=(50, 10, 10), seed=8)
    assert plan_corpus(config) != plan_corpus(other)


@pytest.mark.parametrize("field,value,message", [
    ("sizes", (0, 0, 0), "sizes must be"), ("held_out_variants", 6, "held_out_variants must be 1-5"),
    ("rate", (60, 100), "rate must be a range"), ("text", "timit", "text"),
])
def test_a_bad_config_is_refused_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        plan_corpus(SyntheticSpeechConfig(**{field: value}))


def test_too_few_sentences_are_refused_saying_how_many():
    with pytest.raises(ValueError, match="need 7 distinct sentences; the text source has 2"):
        plan_corpus(SyntheticSpeechConfig(text=("a b", "c d", "A B!"), sizes=(3, 2, 2), held_out_variants=1))


@needs_espeak
def test_a_faster_rate_speaks_the_same_text_in_fewer_samples():
    slow, rate = speak("a dog runs across the grass", "en+m3", 120, 50)
    fast, _ = speak("a dog runs across the grass", "en+m3", 240, 50)
    assert rate == 22050 and len(fast) < 0.8 * len(slow)
    assert np.sqrt(np.mean(slow**2)) > 0.01  # not silence


@needs_espeak
def test_every_accent_and_every_variant_is_a_voice_of_its_own():
    """An unknown accent fails; an unknown variant falls back silently to the bare accent
    (``en-us+zz`` sounds as ``en-us``), so each variant must sound unlike the bare accent and
    unlike the others, and each accent unlike the others."""
    voices = [f"{accent}+m3" for accent in ACCENTS] + [f"en-us+{v}" for v in VARIANTS if v != "m3"]
    sounds = {speak("seven", voice, 175, 50)[0].tobytes() for voice in [*voices, "en-us"]}
    assert len(sounds) == len(ACCENTS) + len(VARIANTS)


@needs_espeak
def test_one_seed_one_corpus_and_the_cache_is_read_without_espeak(tmp_path, monkeypatch):
    first = synthetic_speech(SMALL, cache=tmp_path / "a")
    again = synthetic_speech(SMALL, cache=tmp_path / "b")  # a fresh cache: spoken anew
    assert first.info["synthesized"] == again.info["synthesized"] == 8
    for u, v in zip(first, again, strict=True):
        assert (u.text, u.voice) == (v.text, v.voice)
        assert u.path.read_bytes() == v.path.read_bytes()
        with wave.open(str(u.path)) as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)

    def no_espeak(*args, **kwargs):
        raise AssertionError("eSpeak NG was called for a cached corpus")

    monkeypatch.setattr(synthetic, "speak", no_espeak)
    cached = synthetic_speech(SMALL, cache=tmp_path / "a")
    assert cached.info["synthesized"] == 0
    assert [u.path for u in cached] == [u.path for u in first]
    np.testing.assert_array_equal(cached.audio(cached["test"][0]), first.audio(first["test"][0]))


@needs_espeak
def test_an_interrupted_synthesis_leaves_whole_files_and_resumes(tmp_path, monkeypatch):
    calls = []

    def interrupted(*args, **kwargs):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(args)
        return speak(*args, **kwargs)

    monkeypatch.setattr(synthetic, "speak", interrupted)
    with pytest.raises(KeyboardInterrupt):
        synthetic_speech(SMALL, cache=tmp_path)
    written = sorted(tmp_path.rglob("*.wav"))
    assert len(written) == 3 and not [p for p in tmp_path.rglob(".*") if p.is_file()]
    monkeypatch.setattr(synthetic, "speak", speak)
    resumed = synthetic_speech(SMALL, cache=tmp_path)
    assert resumed.info["synthesized"] == 5
    assert sorted(tmp_path.rglob("*.wav")) == sorted(u.path for u in resumed)


@needs_espeak
def test_noise_follows_its_signal_to_noise_ratio(tmp_path):
    clean_config = SyntheticSpeechConfig(text="digits", sizes=(1, 1, 1), snr_db=None, seed=4)
    noisy_config = SyntheticSpeechConfig(text="digits", sizes=(1, 1, 1), snr_db=(20.0, 20.0), seed=4)
    clean = synthetic_speech(clean_config, cache=tmp_path)
    noisy = synthetic_speech(noisy_config, cache=tmp_path)
    x, y = clean.audio(clean["train"][0]), noisy.audio(noisy["train"][0])
    snr = 10 * np.log10(np.mean(x.astype(np.float64) ** 2) / np.mean((y - x).astype(np.float64) ** 2))
    assert abs(snr - 20.0) < 0.5


def write_folder(root: Path, layout: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    clips = {"a": rng.uniform(-0.5, 0.5, 800), "sub/b": rng.uniform(-0.5, 0.5, 1600)}
    for name, x in clips.items():
        write_wav(root / f"{name}.wav", x, 16000)
        if layout == "txt":
            (root / f"{name}.txt").write_text(f"Clip {name[-1].upper()}, spoken.\n")
    if layout == "tsv":
        lines = [f"{n}.wav\tClip {n[-1].upper()}, spoken.\n" for n in clips]
        (root / "transcripts.tsv").write_text("".join(lines))
    return clips


@pytest.mark.parametrize("layout", ["tsv", "txt"])
def test_a_folder_of_your_own_reads_like_the_synthetic_corpus(tmp_path, layout):
    clips = write_folder(tmp_path, layout)
    corpus = speech_folder(tmp_path)
    assert list(corpus.splits) == ["test"]
    assert {u.id: u.text for u in corpus} == {"a": "clip a spoken", "sub/b": "clip b spoken"}
    for u in corpus:
        assert np.abs(corpus.audio(u) - clips[u.id]).max() <= 0.5 / 32768 + 1e-7


def test_a_folder_with_split_folders_reads_them_as_splits(tmp_path):
    write_folder(tmp_path / "train", "txt")
    write_folder(tmp_path / "valid", "tsv")
    corpus = speech_folder(tmp_path)
    assert list(corpus.splits) == ["train", "valid"] and len(corpus) == 4


def test_a_folder_names_its_bad_file(tmp_path):
    write_wav(tmp_path / "a.wav", np.zeros(10), 16000)
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'a.wav'} has no transcript"):
        speech_folder(tmp_path)
    (tmp_path / "transcripts.tsv").write_text("a.wav\thello\nmissing.wav\tthere\n")
    with pytest.raises(FileNotFoundError, match="missing.wav not found"):
        speech_folder(tmp_path)
    (tmp_path / "transcripts.tsv").write_text("a.wav hello\n")
    with pytest.raises(ValueError, match=r"transcripts.tsv:1: expected FILE<TAB>TRANSCRIPT"):
        speech_folder(tmp_path)
