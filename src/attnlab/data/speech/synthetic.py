"""The synthetic speech corpus: sentences spoken by eSpeak NG in seeded voices, with held-out
voices and held-out sentences, cached on disk.

Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based Models for Speech
Recognition", trained on TIMIT's read sentences; Hasegawa-Johnson's ECE 417 Lecture 21 builds
the same listener. No recorded corpus can be had here, so the sentences are spoken by
:mod:`~attnlab.data.speech.espeak`. Everything is drawn from ``seed`` (:func:`plan_corpus`):

* **texts** — ``"multi30k"``: the English captions of Multi30k's training file (those of
  letters, spaces and punctuation only, no digits: 28,653 distinct once normalised); ``"digits"``:
  distinct strings of 3-8 digits spoken as words (``"three one four"``), the repetitive case;
  or a list of your own sentences. The distinct texts are shuffled and cut into test, valid and
  train, so **no test or valid sentence is ever a training sentence**;
* **voices** — the 12 eSpeak NG variants are shuffled; ``held_out_variants`` of them speak only
  the test split and as many only the valid split, the rest only train; each utterance draws
  an accent (:data:`~attnlab.data.speech.espeak.ACCENTS`) and a variant of its split, so **no
  test voice is ever a training voice**;
* **per utterance** — a rate (words a minute) and a pitch drawn uniformly from ``rate`` and
  ``pitch``, and white Gaussian noise at a signal-to-noise ratio drawn from ``snr_db``
  (``None``: none), ``noise = N(0, 1) · rms(x) / 10^(snr/20)``, from its own noise seed.

Audio is resampled from eSpeak NG's 22,050 Hz to ``sample_rate`` and written as 16-bit PCM
WAV, one file an utterance, under ``<cache>/speech/`` (``$ATTNLAB_CACHE``, else
``~/.cache/attnlab/prepared``), named by the hash of what decides its samples (text, voice,
rate, pitch, noise and rate): written atomically, so Ctrl-C loses nothing and a re-run
synthesizes only the files still missing; a corpus whose files are all there is read without
eSpeak NG. A progress bar counts the utterances synthesized.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from attnlab.data.corpora import PathLike, read_lines
from attnlab.data.multi30k import multi30k_file
from attnlab.data.prepared import cache_dir
from attnlab.data.speech.corpus import SAMPLE_RATE, SPLITS, SpeechCorpus, Utterance, normalize_transcript
from attnlab.data.speech.espeak import ACCENTS, VARIANTS, speak, voice_name
from attnlab.data.speech.wav import resample, write_wav
from attnlab.progress import progress_bar
from attnlab.validation import check_choice

TEXT_SOURCES = ("multi30k", "digits")
FORMAT = "attnlab.speech/1"  # part of every file's hash: a change of the recipe makes new files
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_SPOKEN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ '.,;:!?\"-")


@dataclass(frozen=True)
class SyntheticSpeechConfig:
    """What decides a synthetic corpus: the ``text`` source, ``sizes`` (train, valid, test
    utterances, one text each), ``held_out_variants`` (variants kept for valid and for test
    each), the ``rate`` and ``pitch`` ranges, ``snr_db`` (a range, or ``None``: clean),
    ``sample_rate`` and ``seed``."""

    text: str | tuple[str, ...] = "multi30k"
    sizes: tuple[int, int, int] = (1000, 100, 100)
    held_out_variants: int = 2
    rate: tuple[int, int] = (130, 200)
    pitch: tuple[int, int] = (30, 70)
    snr_db: tuple[float, float] | None = (15.0, 40.0)
    sample_rate: int = SAMPLE_RATE
    seed: int = 0

    def check(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if isinstance(self.text, str):
            check_choice("text", self.text, TEXT_SOURCES)
        if len(self.sizes) != 3 or min(self.sizes) < 0 or sum(self.sizes) == 0:
            raise ValueError(f"sizes must be three counts (train, valid, test) >= 0, not all 0, "
                             f"got {self.sizes}")
        if not 1 <= self.held_out_variants <= (len(VARIANTS) - 1) // 2:
            raise ValueError(f"held_out_variants must be 1-{(len(VARIANTS) - 1) // 2} (of {len(VARIANTS)} "
                             f"variants, some left for training), got {self.held_out_variants}")
        for name, (low, high), (least, most) in (("rate", self.rate, (80, 450)),
                                                 ("pitch", self.pitch, (0, 99))):
            if not least <= low <= high <= most:
                raise ValueError(f"{name} must be a range (low, high) within {least}-{most}, "
                                 f"got {(low, high)}")
        if self.snr_db is not None and not self.snr_db[0] <= self.snr_db[1]:
            raise ValueError(f"snr_db must be a range (low, high) or None, got {self.snr_db}")
        if self.sample_rate < 8000:
            raise ValueError(f"sample_rate must be >= 8000 Hz, got {self.sample_rate}")


def multi30k_sentences(data_dir: PathLike | None = None) -> list[str]:
    """Multi30k's English training captions that eSpeak NG speaks as written (letters, spaces
    and punctuation: no digits, no other scripts)."""
    return [line for line in read_lines(multi30k_file("train", "en", data_dir)) if set(line) <= _SPOKEN]


def digit_strings(count: int, rng: random.Random, shortest: int = 3, longest: int = 8) -> list[str]:
    """``count`` distinct digit strings of ``shortest``-``longest`` digits, as spoken words."""
    possible = sum(10**length for length in range(shortest, longest + 1))
    if count > possible // 2:  # drawing nearly all of them would take ever longer
        raise ValueError(f"cannot draw {count} distinct strings of {shortest}-{longest} digits "
                         f"(at most {possible // 2:,}: half of the {possible:,} there are)")
    seen: dict[str, None] = {}
    while len(seen) < count:
        digits = rng.choices(DIGIT_WORDS, k=rng.randint(shortest, longest))
        seen.setdefault(" ".join(digits))
    return list(seen)


def _texts(config: SyntheticSpeechConfig, rng: random.Random, data_dir: PathLike | None) -> list[str]:
    """The distinct normalised texts to cut into splits, in a seeded order."""
    if config.text == "digits":
        return digit_strings(sum(config.sizes), rng)
    raw = multi30k_sentences(data_dir) if config.text == "multi30k" else list(config.text)
    texts = list(dict.fromkeys(t for t in map(normalize_transcript, raw) if t))
    if len(texts) < sum(config.sizes):
        raise ValueError(f"sizes {config.sizes} need {sum(config.sizes)} distinct sentences; "
                         f"the text source has {len(texts)}")
    return rng.sample(texts, sum(config.sizes))


def plan_corpus(config: SyntheticSpeechConfig, data_dir: PathLike | None = None) -> dict[str, list[dict]]:
    """Every utterance of the corpus as drawn from ``config.seed``: for each split, dicts of
    ``text``, ``voice``, ``rate``, ``pitch``, ``snr_db`` and ``noise_seed`` (no audio yet)."""
    config.check()
    rng = random.Random(config.seed)
    texts = _texts(config, rng, data_dir)
    variants = list(VARIANTS)
    rng.shuffle(variants)
    held = config.held_out_variants
    split_variants = {"test": variants[:held], "valid": variants[held:2 * held], "train": variants[2 * held:]}
    train, valid, test = config.sizes
    split_texts = {"test": texts[:test], "valid": texts[test:test + valid], "train": texts[test + valid:]}
    plan: dict[str, list[dict]] = {}
    for split in SPLITS:
        plan[split] = [{
            "text": text,
            "voice": voice_name(rng.choice(ACCENTS), rng.choice(split_variants[split])),
            "rate": rng.randint(*config.rate),
            "pitch": rng.randint(*config.pitch),
            "snr_db": None if config.snr_db is None else round(rng.uniform(*config.snr_db), 2),
            "noise_seed": rng.getrandbits(32),
        } for text in split_texts[split]]
    return plan


def utterance_file(item: dict, sample_rate: int, cache: Path) -> Path:
    """Where the WAV file of planned utterance ``item`` lives: named by the hash of what
    decides its samples."""
    key = json.dumps({"format": FORMAT, "sample_rate": sample_rate, **item}, sort_keys=True)
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    return cache / "speech" / digest[:2] / f"{digest}.wav"


def synthesize(item: dict, sample_rate: int) -> np.ndarray:
    """The waveform ``(samples,)`` float32 of planned utterance ``item`` at ``sample_rate``:
    eSpeak NG's samples resampled, plus the item's white noise."""
    samples, rate = speak(item["text"], item["voice"], item["rate"], item["pitch"])
    x = resample(samples, rate, sample_rate).astype(np.float64)
    if item["snr_db"] is not None and len(x):
        rms = float(np.sqrt(np.mean(x**2)))
        noise = np.random.default_rng(item["noise_seed"]).standard_normal(len(x))
        x = x + noise * rms / 10 ** (item["snr_db"] / 20)
    return np.clip(x, -1.0, 1.0 - 1 / 32768).astype(np.float32)


def synthetic_speech(config: SyntheticSpeechConfig | None = None, *, data_dir: PathLike | None = None,
                     cache: PathLike | None = None, progress: bool = False) -> SpeechCorpus:
    """The synthetic corpus of ``config`` (default: :class:`SyntheticSpeechConfig`'s), its
    missing WAV files synthesized into ``cache`` (default ``$ATTNLAB_CACHE``) first, with a
    progress bar when ``progress``. Multi30k's captions come from ``data_dir``."""
    config = config or SyntheticSpeechConfig()
    return speak_plan(plan_corpus(config, data_dir), config.sample_rate, {"config": asdict(config)},
                      cache=cache, progress=progress)


def speak_plan(plan: dict[str, list[dict]], sample_rate: int, info: dict, *, cache: PathLike | None = None,
               progress: bool = False) -> SpeechCorpus:
    """The corpus of planned utterances ``plan`` (split → items of :func:`plan_corpus`), the
    WAV files missing from ``cache`` synthesized first; ``info`` joins the corpus's own."""
    root = cache_dir(cache)
    files = {(split, i): utterance_file(item, sample_rate, root)
             for split, items in plan.items() for i, item in enumerate(items)}
    missing = [key for key, path in files.items() if not path.is_file()]
    with progress_bar(len(missing), unit="utt", enabled=progress and bool(missing), desc="speaking") as bar:
        for split, i in missing:
            write_wav(files[split, i], synthesize(plan[split][i], sample_rate), sample_rate)
            bar.update(1)
    splits = {split: [Utterance(id=f"{split}-{i:05d}", split=split, path=files[split, i],
                                text=item["text"], voice=item["voice"], rate=item["rate"],
                                pitch=item["pitch"], snr_db=item["snr_db"])
                      for i, item in enumerate(items)] for split, items in plan.items()}
    info = {**info, "synthesized": len(missing), "cache": str(root / "speech")}
    return SpeechCorpus(splits, sample_rate, info)
