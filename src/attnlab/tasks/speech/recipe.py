"""The speech recognition recipe (the task is :mod:`attnlab.tasks.speech`; the shape of every
recipe: :mod:`attnlab.tasks.recipe`; Hasegawa-Johnson, ECE 417 Lecture 21; Chorowski et al.
2015, "Attention-Based Models for Speech Recognition").

    task = "speech"
    [data]   source ("synthetic" | "folder"); synthetic: text, sizes, held_out_variants,
             snr_db ([] = clean), corpus_seed; folder: folder (holding train/, valid/,
             test/); n_mels; batch_size; SpecAugment on training features: freq_masks,
             freq_width, time_masks, time_width, time_ratio; seed (batch order, masks)
    [model]  type = "listen_attend_spell" (default) or "speech_transformer", and its config's
             fields except the vocabulary sizes, pad_id, share_embeddings and n_mels
    [optim]  OptimConfig (Adam, warmup + cosine by default) and label_smoothing
    [train]  TrainConfig (max_steps bounds the run)
    [eval]   beam_size, length_penalty, max_len_a, max_len_b, batch_size (DecodeConfig),
             val_limit, sample_count, heatmap_index
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlab.data.sources import resolved
from attnlab.data.speech import SpecAugment, SyntheticSpeechConfig
from attnlab.data.speech.synthetic import TEXT_SOURCES
from attnlab.data.tokenizers import PAD_ID, SMALLEST_VOCABULARY
from attnlab.pipelines.decoding import DecodeConfig
from attnlab.tasks.recipe import ModelTable, Recipe
from attnlab.training import OptimConfig
from attnlab.validation import check_choice, check_positive, check_probability

SOURCES = ("synthetic", "folder")


@dataclass
class SpeechData:
    """``[data]``: the utterances, their features and the training batches.

    ``synthetic`` speaks ``sizes`` (train, valid, test) texts of ``text`` (``multi30k`` or
    ``digits``) in eSpeak NG voices, ``held_out_variants`` voice variants heard only in valid
    and as many only in test, white noise at ``snr_db`` (a range; ``[]``: clean), all drawn
    from ``corpus_seed`` (:func:`~attnlab.data.speech.synthetic_speech`); ``folder`` reads
    your WAV files (:func:`~attnlab.data.speech.speech_folder`; made absolute when read).
    Features: ``n_mels`` log-mel channels, 25 ms windows every 10 ms, normalised per
    utterance. Training batches of ``batch_size`` utterances get SpecAugment's masks
    (:class:`~attnlab.data.speech.SpecAugment`; 0 masks: none), drawn from ``seed``."""

    source: str = "synthetic"
    text: str = "multi30k"
    sizes: list[int] = field(default_factory=lambda: [1000, 100, 100])
    held_out_variants: int = 2
    snr_db: list[float] = field(default_factory=lambda: [15.0, 40.0])
    corpus_seed: int = 0
    folder: str = ""
    n_mels: int = 80
    batch_size: int = 16
    freq_masks: int = 2
    freq_width: int = 15
    time_masks: int = 2
    time_width: int = 40
    time_ratio: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("data.source", self.source, SOURCES)
        check_choice("data.text", self.text, TEXT_SOURCES)
        for name in ("n_mels", "batch_size"):
            check_positive(f"data.{name}", getattr(self, name))
        if len(self.snr_db) not in (0, 2):
            raise ValueError(f"data.snr_db must be [low, high] or [] (clean), got {self.snr_db}")
        if self.source == "folder" and not self.folder:
            raise ValueError('data.folder must name a folder when data.source = "folder"')
        if self.folder:
            self.folder = str(resolved(self.folder))
        self.synthetic().check()
        self.specaugment()

    def synthetic(self) -> SyntheticSpeechConfig:
        """The synthetic corpus of this table."""
        return SyntheticSpeechConfig(
            text=self.text, sizes=tuple(self.sizes), held_out_variants=self.held_out_variants,
            snr_db=tuple(self.snr_db) if self.snr_db else None, seed=self.corpus_seed,
        )

    def specaugment(self) -> SpecAugment:
        """The masks of the training features."""
        return SpecAugment(self.freq_masks, self.freq_width, self.time_masks, self.time_width,
                           self.time_ratio)


@dataclass
class SpeechOptim(OptimConfig):
    """``[optim]``: :class:`~attnlab.training.OptimConfig`, by default Adam at 1e-3 with a warmup
    of 200 steps and a cosine to 1e-4, plus the label smoothing ε of the character targets."""

    optimizer: str = "adam"
    lr: float = 1e-3
    schedule: str = "warmup_cosine"
    warmup: int = 200
    min_lr: float = 1e-4
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_probability("optim.label_smoothing", self.label_smoothing)


@dataclass
class SpeechEval(DecodeConfig):
    """``[eval]``: how valid and test are decoded (:class:`~attnlab.pipelines.DecodeConfig`: a
    transcript is at most ``max_len_a · frames + max_len_b`` characters) and reported: greedy
    CER on the first ``val_limit`` validation utterances at each evaluation (0 = all), the
    samples shown and the test utterance whose alignment is drawn."""

    beam_size: int = 4
    length_penalty: float = 1.0
    batch_size: int = 16
    max_len_a: float = 0.3
    max_len_b: int = 10
    val_limit: int = 100
    sample_count: int = 5
    heatmap_index: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("val_limit", "sample_count", "heatmap_index"):
            check_positive(f"eval.{name}", getattr(self, name), allow_zero=True)


@dataclass
class SpeechRecipe(Recipe):
    """A whole speech recognition recipe (see the module docstring)."""

    data: SpeechData
    model: ModelTable
    optim: SpeechOptim
    eval: SpeechEval

    task_name = "speech"

    @classmethod
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        return {"pad_id": PAD_ID, "share_embeddings": True, "n_mels": tables["data"].n_mels}

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The characters of the transcripts: at least the special tokens and one."""
        return {"src_vocab_size": SMALLEST_VOCABULARY, "tgt_vocab_size": SMALLEST_VOCABULARY}

    def check(self) -> None:
        if self.train.max_steps is None:
            raise ValueError("train.max_steps must be set: it bounds the run")
        check_choice("train.metric", self.train.metric, ("val_loss", "val_cer"))
