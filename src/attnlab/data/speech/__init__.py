"""Speech for the listener of Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based
Models for Speech Recognition" (Hasegawa-Johnson, ECE 417 Lecture 21): a corpus and its features.

* :mod:`~attnlab.data.speech.wav` — 16-bit PCM mono WAV read (``wave``), written atomically, resampled
* :mod:`~attnlab.data.speech.espeak` — eSpeak NG's voices (accent + variant), one utterance spoken
* :mod:`~attnlab.data.speech.corpus` — utterances in splits, transcripts normalised
* :mod:`~attnlab.data.speech.synthetic` — the seeded synthetic corpus: held-out voices and sentences, cached
* :mod:`~attnlab.data.speech.longer` — test utterances 2-4× the training length, by the test voices
* :mod:`~attnlab.data.speech.folder` — your own WAV files and transcripts, read the same way
* :mod:`~attnlab.data.speech.features` — log-mel spectrograms with ``torch.stft``, the mel filterbank
* :mod:`~attnlab.data.speech.normalize` — mean and variance normalisation, per utterance or global
* :mod:`~attnlab.data.speech.specaugment` — SpecAugment's seeded time and frequency masks
* :mod:`~attnlab.data.speech.batches` — padded features, lengths and character ids for a recognizer

Word and character error rates are :func:`attnlab.evaluation.wer` and :func:`attnlab.evaluation.cer`.
"""

from attnlab.data.speech.batches import SpeechBatch, SpeechSet, pad_features, utterance_features
from attnlab.data.speech.corpus import SAMPLE_RATE, SPLITS, SpeechCorpus, Utterance, normalize_transcript
from attnlab.data.speech.espeak import ACCENTS, INSTALL_COMMAND, VARIANTS
from attnlab.data.speech.features import LogMel, hz_to_mel, mel_filterbank, mel_to_hz
from attnlab.data.speech.folder import TRANSCRIPTS, read_speech_split, speech_folder
from attnlab.data.speech.longer import longer_utterances, plan_longer
from attnlab.data.speech.normalize import FeatureStats, utterance_normalize
from attnlab.data.speech.specaugment import SpecAugment
from attnlab.data.speech.synthetic import SyntheticSpeechConfig, plan_corpus, synthetic_speech
from attnlab.data.speech.wav import read_wav, resample, write_wav

__all__ = [
    "ACCENTS",
    "FeatureStats",
    "INSTALL_COMMAND",
    "LogMel",
    "SAMPLE_RATE",
    "SPLITS",
    "SpecAugment",
    "SpeechBatch",
    "SpeechCorpus",
    "SpeechSet",
    "SyntheticSpeechConfig",
    "TRANSCRIPTS",
    "Utterance",
    "VARIANTS",
    "hz_to_mel",
    "longer_utterances",
    "mel_filterbank",
    "mel_to_hz",
    "normalize_transcript",
    "pad_features",
    "plan_corpus",
    "plan_longer",
    "read_speech_split",
    "read_wav",
    "resample",
    "speech_folder",
    "synthetic_speech",
    "utterance_features",
    "utterance_normalize",
    "write_wav",
]
