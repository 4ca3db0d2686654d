"""Audio in, text out: a recognizer with its character tokenizer, decoding through
:mod:`attnlab.generation` (padded features and their lengths take the place of a source
sentence), and where it listened.

Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based Models for Speech
Recognition"; Chan, Jaitly, Le & Vinyals (2016), "Listen, Attend and Spell"; Hasegawa-Johnson,
ECE 417 Lecture 21. :meth:`SpeechPipeline.transcribe` reads WAV files (or waveforms), computes
each utterance's normalised log-mel features (:func:`~attnlab.data.speech.utterance_features`,
the training run's front end) and beam-decodes them (or greedily); a transcript is at most
``max_len_a · F + max_len_b`` characters for ``F`` frames. :meth:`SpeechPipeline.attention`
reads back, with teacher forcing on a transcript, the alignment that wrote each character.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab.data.speech import SAMPLE_RATE, LogMel, pad_features, read_wav, utterance_features
from attnlab.data.tokenizers import TOKENIZER_FILE, AnyTokenizer, load_tokenizer
from attnlab.generation.state import inference
from attnlab.models import task_models
from attnlab.models.base import draws_attention
from attnlab.pipelines.base import DecodingPipeline
from attnlab.pipelines.decoding import DecodeConfig, search
from attnlab.progress import progress_bar

__all__ = ["SpeechAlignment", "SpeechPipeline"]


class SpeechAlignment(NamedTuple):
    """The alignment that wrote a transcript (:meth:`SpeechPipeline.attention`)."""

    characters: list[str]  # T: the transcript's characters and <eos>
    weights: Tensor  # (T, S): row t the attention over the encoder's keys that wrote character t


class SpeechPipeline(DecodingPipeline):
    """A recognizer (:class:`~attnlab.models.ListenAttendSpell`,
    :class:`~attnlab.models.SpeechTransformer`), its character tokenizer and its
    :class:`DecodeConfig` (the checkpoint's ``[eval]``)."""

    model_types = task_models("speech")
    family = "a speech recognizer"
    default_decoding = DecodeConfig(beam_size=4, length_penalty=1.0, batch_size=16, max_len_a=0.3,
                                    max_len_b=10)

    def __init__(self, model: nn.Module, tokenizer: AnyTokenizer, *, decoding: DecodeConfig | None = None,
                 recipe: dict[str, Any] | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.front_end = LogMel(sample_rate=SAMPLE_RATE, n_mels=model.config.n_mels)
        super().__init__(decoding=decoding, recipe=recipe)

    @classmethod
    def from_files(cls, model: nn.Module, checkpoint: Path, recipe: dict[str, Any]) -> SpeechPipeline:
        return cls(model, load_tokenizer(checkpoint), recipe=recipe)

    def tokenizer_files(self) -> dict[str, str]:
        return {TOKENIZER_FILE: self.tokenizer.to_json()}

    def features(self, audio: Sequence[str | Path | Any]) -> list[Tensor]:
        """Normalised log-mel features ``(F, n_mels)`` of each WAV file path or waveform ``(T,)``
        (a path is read at 16 kHz, resampled when it is not)."""
        return [utterance_features(read_wav(a, SAMPLE_RATE) if isinstance(a, str | Path) else a,
                                   self.front_end) for a in audio]

    def transcribe_ids(self, features: Sequence[Tensor], decoding: DecodeConfig | None = None, *,
                       progress: bool = False) -> list[list[int]]:
        """Character ids (no bos / eos) of each utterance's ``features`` ``(F, n_mels)`` with
        ``decoding`` (default: the pipeline's own), ``batch_size`` at a time."""
        decoding = decoding or self.decoding
        ends = dict(bos_id=self.tokenizer.bos_id, eos_id=self.tokenizer.eos_id)
        out: list[list[int]] = []
        with progress_bar(len(features), unit="utt", desc="decoding", enabled=progress, leave=False) as bar:
            for start in range(0, len(features), decoding.batch_size):
                padded, lengths = pad_features(features[start:start + decoding.batch_size])
                limit = decoding.limit(int(lengths.max()))
                out += search(self.model, (padded.to(self.device), lengths.to(self.device)), decoding,
                              limit, **ends)
                bar.update(len(lengths))
        return out

    def transcribe(self, audio: Sequence[str | Path | Any],
                   decoding: DecodeConfig | None = None) -> list[str]:
        """The transcript of each WAV file or waveform (:meth:`features`, :meth:`transcribe_ids`)."""
        ids = self.transcribe_ids(self.features(audio), decoding)
        return [self.tokenizer.decode(i) for i in ids]

    @property
    def draws_attention(self) -> bool:
        return draws_attention(self.model.decode)

    def attention(self, features: Tensor, ids: Sequence[int], *, layer: int = -1) -> SpeechAlignment:
        """The characters of transcript ``ids`` with its end token, and the cross-attention that
        wrote each ``(T, S)`` (teacher forcing; a Transformer's decoder layer ``layer``, its
        heads' mean)."""
        tgt_in = torch.tensor([[self.tokenizer.bos_id, *ids]], device=self.device)  # (1, T)
        with inference(self.model):
            memory, mask = self.model.encode(features.unsqueeze(0).to(self.device))  # (1, S, d)
            _, weights = self.model.decode(tgt_in, memory, mask, return_weights=True)  # [(1, H, T, S)]
        characters = [*self.tokenizer.token_strings(list(ids)), "<eos>"]
        return SpeechAlignment(characters, weights[layer][0].float().mean(0).cpu())

    def plot_attention(self, features: Tensor, ids: Sequence[int], path: str | Path) -> Path:
        """:meth:`attention` drawn over the spectrogram by
        :func:`attnlab.visualize.plot_speech_alignment` into ``path``."""
        from attnlab.visualize import plot_speech_alignment

        found = self.attention(features, ids)
        score = getattr(self.model.config, "score", None)
        kind = self.model.model_type + (f" ({score} score)" if score else "")
        text = self.tokenizer.decode(list(ids))
        title = f"{kind}: {text if len(text) <= 60 else text[:59] + '…'!r}"
        return plot_speech_alignment(features, found.weights, found.characters, path,
                                     reduction=self.model.reduction, title=title)
