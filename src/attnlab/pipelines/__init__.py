"""Pipelines: a model with its tokenizer(s) and decoding settings, and the calls a user makes.

One pipeline a model family, each read from a checkpoint directory with ``from_checkpoint``
and written back with ``save`` (:mod:`~attnlab.pipelines.base`):

* :class:`TranslationPipeline` — Transformer and RNN translators: ``translate``, ``attention``
  (the alignment), ``plot_attention``
* :class:`LanguageModelPipeline` — GPT, LSTM and LSTMN language models: ``generate`` (streamed,
  with each token's attention when asked), ``attention``, ``plot_attention``
* :class:`CaptioningPipeline` — Show, Attend and Tell: ``caption``, ``attention`` (a map a word),
  ``plot_attention``
* :class:`SpeechPipeline` — the recognizers (listen-attend-spell, speech Transformer):
  ``transcribe`` (WAV files or waveforms), ``attention`` (the alignment), ``plot_attention``
* :class:`EncoderPipeline` — the BERT-style encoder, from attnlab checkpoints or Hugging Face
  BERT directories (all-MiniLM-L6-v2): ``tokenize``, ``embed``, ``attention`` (every layer)

The tasks (their reports and ``evaluate``), the labs, the explorer and the command line all
go through these; a model never holds a tokenizer.
"""

from attnlab.pipelines.base import DecodingPipeline, Pipeline
from attnlab.pipelines.captioning import CaptioningPipeline, CaptionMaps
from attnlab.pipelines.decoding import DecodeConfig, saved_decoding, with_overrides
from attnlab.pipelines.encoder import EncodedSentence, EncoderPipeline, find_token
from attnlab.pipelines.language_model import LanguageModelPipeline, TokenAttention
from attnlab.pipelines.speech import SpeechAlignment, SpeechPipeline
from attnlab.pipelines.translation import Alignment, TranslationPipeline

__all__ = [
    "Alignment",
    "CaptionMaps",
    "CaptioningPipeline",
    "DecodeConfig",
    "DecodingPipeline",
    "EncodedSentence",
    "EncoderPipeline",
    "LanguageModelPipeline",
    "Pipeline",
    "SpeechAlignment",
    "SpeechPipeline",
    "TokenAttention",
    "TranslationPipeline",
    "find_token",
    "saved_decoding",
    "with_overrides",
]
