"""A speech corpus: utterances (a WAV file and its transcript) in splits, read one way whether
eSpeak NG spoke them (:mod:`~attnlab.data.speech.synthetic`) or a person recorded them
(:mod:`~attnlab.data.speech.folder`).

An utterance's audio is read when asked for (:meth:`SpeechCorpus.audio`): a float32 waveform
``(samples,)`` at the corpus's sample rate (16,000 Hz unless chosen), so a corpus of thousands
of utterances holds only their paths and transcripts in memory. Transcripts are normalised by
:func:`normalize_transcript` for a character recognizer: lower case letters, apostrophes and
single spaces, the alphabet of Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based
Models for Speech Recognition" (their TIMIT phones aside) and of Hasegawa-Johnson's ECE 417
Lecture 21 listener.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnlab.data.speech.wav import read_wav
from attnlab.validation import check_choice

SPLITS = ("train", "valid", "test")
SAMPLE_RATE = 16000
_OUTSIDE = re.compile(r"[^a-z']+")


def normalize_transcript(text: str) -> str:
    """``text`` lower-cased, every run of characters other than ``a-z`` and ``'`` one space,
    stripped: ``"A man, in a T-shirt."`` → ``"a man in a t shirt"``."""
    return _OUTSIDE.sub(" ", text.lower()).strip()


@dataclass(frozen=True)
class Utterance:
    """One utterance: ``id``, its ``split``, the ``text`` spoken (normalised) and its WAV file
    ``path``; for a synthetic one also how eSpeak NG spoke it: ``voice`` (``en-us+f2``),
    ``rate`` (words a minute), ``pitch`` (0-99) and ``snr_db`` of the white noise added
    (``None``: none). A recording of your own has ``voice`` ``""`` and no rate or pitch."""

    id: str
    split: str
    text: str
    path: Path
    voice: str = ""
    rate: int = 0
    pitch: int = 0
    snr_db: float | None = None


@dataclass
class SpeechCorpus:
    """Utterances by split (``train``, ``valid``, ``test``: those present) and the
    ``sample_rate`` every waveform is read at."""

    splits: dict[str, list[Utterance]]
    sample_rate: int = SAMPLE_RATE
    info: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, split: str) -> list[Utterance]:
        check_choice("split", split, tuple(self.splits))
        return self.splits[split]

    def __iter__(self) -> Iterator[Utterance]:
        for utterances in self.splits.values():
            yield from utterances

    def __len__(self) -> int:
        return sum(len(u) for u in self.splits.values())

    def audio(self, utterance: Utterance) -> np.ndarray:
        """The waveform ``(samples,)`` float32 of ``utterance`` at :attr:`sample_rate`."""
        return read_wav(utterance.path, self.sample_rate)

    def texts(self, split: str) -> set[str]:
        """The distinct transcripts of ``split``."""
        return {u.text for u in self[split]}

    def voices(self, split: str) -> set[str]:
        """The distinct voices of ``split`` (``""`` for recordings of your own)."""
        return {u.voice for u in self[split]}

    def summary(self) -> str:
        """One line a split: its utterances, distinct texts and (synthetic) voices."""
        lines = []
        for split, utterances in self.splits.items():
            voices = {u.voice for u in utterances if u.voice}
            who = f", {len(voices)} voices" if voices else ""
            lines.append(f"{split}: {len(utterances)} utterances, {len({u.text for u in utterances})} "
                         f"texts{who}")
        return "\n".join(lines)
