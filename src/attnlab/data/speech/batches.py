"""Batches of speech for a recognizer: padded log-mel features with their lengths, and the
character ids of the transcripts.

Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based Models for Speech
Recognition", and Chan, Jaitly, Le & Vinyals (2016), "Listen, Attend and Spell", read a
spectrogram and write characters (Hasegawa-Johnson, ECE 417 Lecture 21). A batch of ``B``
utterances:

    features  (B, F, D)   float, right-padded with zeros to the longest utterance's F frames
    lengths   (B,)        int64, the real frames of each (frame f of row b is real iff f < lengths[b])
    tgt_in    (B, T)      <bos> c_1 … c_n, right-padded with <pad>
    tgt_out   (B, T)      c_1 … c_n <eos>, right-padded with <pad>

:func:`utterance_features` turns a waveform into normalised log-mel features; :class:`SpeechSet`
keeps those of a split and draws batches, training ones of utterances of similar lengths
(sorted within pools of ``pool`` batches, the pools and the batches shuffled from a seed) with
SpecAugment's masks (:mod:`~attnlab.data.speech.specaugment`) drawn from the same seed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnlab.data.speech.corpus import SpeechCorpus, Utterance
from attnlab.data.speech.features import LogMel
from attnlab.data.speech.normalize import utterance_normalize
from attnlab.data.speech.specaugment import SpecAugment
from attnlab.data.tokenizers import AnyTokenizer


class SpeechBatch(NamedTuple):
    """``features (B, F, D)``, ``lengths (B,)``, ``tgt_in (B, T)``, ``tgt_out (B, T)`` (module doc)."""

    features: Tensor
    lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor


def utterance_features(waveform: np.ndarray | Tensor, front_end: LogMel) -> Tensor:
    """Log-mel features ``(F, n_mels)`` float32 of a waveform ``(T,)``, each channel at mean 0 and
    variance 1 over the utterance's frames."""
    x = torch.as_tensor(np.asarray(waveform, dtype=np.float32))
    return utterance_normalize(front_end(x))


def pad_features(features: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """``(features (B, F, D) zero-padded, lengths (B,))`` of ``B`` utterances ``(F_b, D)``."""
    if not features or any(f.dim() != 2 or f.shape[0] == 0 for f in features):
        shapes = [tuple(f.shape) for f in features]
        raise ValueError(f"pad_features needs utterances of (F >= 1, D) features, got {shapes[:5] or 'none'}")
    lengths = torch.tensor([f.shape[0] for f in features], dtype=torch.long)
    out = features[0].new_zeros(len(features), int(lengths.max()), features[0].shape[1])
    for row, f in enumerate(features):
        out[row, : f.shape[0]] = f
    return out, lengths


class SpeechSet:
    """The features ``(F, D)`` of a split's utterances, their transcripts and character ids."""

    def __init__(self, features: Sequence[Tensor], texts: Sequence[str], tokenizer: AnyTokenizer) -> None:
        if len(features) != len(texts):
            raise ValueError(f"features holds {len(features)} utterances but texts {len(texts)}")
        if not features:
            raise ValueError("a speech set needs at least one utterance, got none")
        self.features, self.texts = list(features), list(texts)
        self.ids = tokenizer.encode_batch(self.texts)
        self.pad_id, self.bos_id, self.eos_id = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id

    @classmethod
    def from_corpus(cls, corpus: SpeechCorpus, utterances: Sequence[Utterance], front_end: LogMel,
                    tokenizer: AnyTokenizer) -> SpeechSet:
        """The set of ``utterances`` of ``corpus``, their audio read and turned into features."""
        features = [utterance_features(corpus.audio(u), front_end) for u in utterances]
        return cls(features, [u.text for u in utterances], tokenizer)

    def __len__(self) -> int:
        return len(self.features)

    def frames(self) -> list[int]:
        return [f.shape[0] for f in self.features]

    def collate(self, rows: Sequence[int], augment: SpecAugment | None = None,
                generator: torch.Generator | None = None) -> SpeechBatch:
        """The batch of utterances ``rows``; ``augment`` masks each one's features (``generator``)."""
        feats = [self.features[i] for i in rows]
        if augment is not None and augment.enabled:
            feats = [augment(f, generator) for f in feats]
        features, lengths = pad_features(feats)
        longest = max(len(self.ids[i]) for i in rows) + 1
        tgt_in = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        tgt_out = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        for row, i in enumerate(rows):
            ids = self.ids[i]
            tgt_in[row, : len(ids) + 1] = torch.tensor([self.bos_id, *ids])
            tgt_out[row, : len(ids) + 1] = torch.tensor([*ids, self.eos_id])
        return SpeechBatch(features, lengths, tgt_in, tgt_out)

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                augment: SpecAugment | None = None, pool: int = 20) -> Iterator[SpeechBatch]:
        """Batches of ``batch_size`` in order, or (``shuffle``) of similar lengths in a seeded
        order, each utterance ``augment``-ed with masks drawn from ``seed`` (module doc)."""
        order = list(range(len(self)))
        generator = torch.Generator().manual_seed(seed)
        if shuffle:
            order = torch.randperm(len(self), generator=generator).tolist()
            frames = self.frames()
            width = batch_size * pool
            order = [i for s in range(0, len(order), width)
                     for i in sorted(order[s:s + width], key=frames.__getitem__)]
        groups = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
        if shuffle:
            groups = [groups[i] for i in torch.randperm(len(groups), generator=generator).tolist()]
        for rows in groups:
            yield self.collate(rows, augment, generator)
