"""Pipelines: a model with its tokenizer(s) and decoding settings, and the calls a user makes.

One pipeline a model family, each read from a checkpoint directory with ``from_checkpoint``
and written back with ``save`` (:mod:`~attnlab.pipelines.base`):

* :class:`TranslationPipeline` — Transformer and RNN translators: ``translate``, ``attention``
  (the alignment), ``plot_attention``
* :class:`LanguageModelPipeline` — GPT, LSTM and LSTMN language models: ``generate`` (streamed,
  with each token's attention when asked), ``attention``, ``plot_attention``
* :class:`CaptioningPipeline` — Show, Attend and Tell: ``caption``, ``attention`` (a map a word),
  ``plot_attention``

The tasks (their reports and ``evaluate``), the labs, the explorer and the command line all
go through these; a model never holds a tokenizer.
"""

from attnlab.pipelines.base import DecodingPipeline, Pipeline
from attnlab.pipelines.captioning import CaptioningPipeline, CaptionMaps
from attnlab.pipelines.decoding import DecodeConfig, saved_decoding, with_overrides
from attnlab.pipelines.language_model import LanguageModelPipeline, TokenAttention
from attnlab.pipelines.translation import Alignment, TranslationPipeline

__all__ = [
    "Alignment",
    "CaptionMaps",
    "CaptioningPipeline",
    "DecodeConfig",
    "DecodingPipeline",
    "LanguageModelPipeline",
    "Pipeline",
    "TokenAttention",
    "TranslationPipeline",
    "saved_decoding",
    "with_overrides",
]
