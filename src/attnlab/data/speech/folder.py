"""Your own recordings: a folder of 16-bit PCM mono WAV files and their transcripts, read as a
:class:`~attnlab.data.speech.corpus.SpeechCorpus` like the synthetic corpus.

A folder's transcripts are either

* one ``transcripts.tsv``: a line an utterance, ``FILE<TAB>TRANSCRIPT``, ``FILE`` the WAV
  file's path relative to the folder (``clips/0001.wav``); blank lines are skipped; or
* a ``NAME.txt`` beside each ``NAME.wav`` (anywhere below the folder), holding its transcript
  (one small file each).

A folder with ``train/``, ``valid/`` or ``test/`` inside is read as those splits, each such a
folder; any other folder is one split, ``split`` (``"test"`` unless chosen: recordings of your
own are most often what a recognizer trained on the synthetic corpus is tested on).
Transcripts are normalised (:func:`~attnlab.data.speech.corpus.normalize_transcript`). Every
WAV header is checked as the folder is read: a file that is not 16-bit PCM mono is refused
naming the file; one at another sample rate is resampled when read.

    clips/
        transcripts.tsv        0001.wav<TAB>A dog runs across the grass.
        0001.wav
"""

from __future__ import annotations

from pathlib import Path

from attnlab.data.corpora import PathLike, numbered_lines
from attnlab.data.speech.corpus import SAMPLE_RATE, SPLITS, SpeechCorpus, Utterance, normalize_transcript
from attnlab.data.speech.wav import wav_rate

TRANSCRIPTS = "transcripts.tsv"


def _from_tsv(folder: Path) -> list[tuple[Path, str]]:
    table = folder / TRANSCRIPTS
    pairs = []
    for number, line in numbered_lines(table):
        if not line.strip():
            continue
        name, tab, text = line.rstrip("\r\n").partition("\t")
        if not tab:
            raise ValueError(f"{table}:{number}: expected FILE<TAB>TRANSCRIPT, got {line.strip()[:60]!r}")
        pairs.append((folder / name, text))
    return pairs


def _from_txt(folder: Path) -> list[tuple[Path, str]]:
    pairs = []
    for wav in sorted(folder.rglob("*.wav")):
        txt = wav.with_suffix(".txt")
        if not txt.is_file():
            raise FileNotFoundError(f"{wav} has no transcript: write it to {txt}, or list every file "
                                    f"in {folder / TRANSCRIPTS}")
        pairs.append((wav, txt.read_text(encoding="utf-8").strip()))
    return pairs


def read_speech_split(folder: PathLike, split: str = "test") -> list[Utterance]:
    """The utterances of one folder (``transcripts.tsv``, else a ``.txt`` beside each ``.wav``),
    named ``split``, every WAV header checked."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"speech folder {folder} not found")
    pairs = _from_tsv(folder) if (folder / TRANSCRIPTS).is_file() else _from_txt(folder)
    if not pairs:
        raise ValueError(f"{folder} holds no .wav files and no {TRANSCRIPTS}")
    utterances = []
    for path, text in pairs:
        wav_rate(path)  # refuses a missing file or another format, naming it
        utterances.append(Utterance(id=path.relative_to(folder).with_suffix("").as_posix(), split=split,
                                    text=normalize_transcript(text), path=path))
    return utterances


def speech_folder(folder: PathLike, *, split: str = "test", sample_rate: int = SAMPLE_RATE) -> SpeechCorpus:
    """The corpus of ``folder``: its ``train/``, ``valid/`` and ``test/`` folders where it has
    any, else the folder itself as split ``split``; audio read at ``sample_rate``."""
    folder = Path(folder).expanduser()
    present = [s for s in SPLITS if (folder / s).is_dir()]
    splits = ({s: read_speech_split(folder / s, s) for s in present} if present
              else {split: read_speech_split(folder, split)})
    return SpeechCorpus(splits, sample_rate, {"folder": str(folder)})
