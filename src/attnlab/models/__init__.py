"""Models over token ids (and images): one model a file, each with its config beside it, each
registered by the ``model_type`` its checkpoints carry.

* :class:`Transformer`, :class:`TransformerConfig` — encoder-decoder (translation)
* :class:`GPT`, :class:`GPTConfig` — decoder-only language model
* :class:`Encoder`, :class:`EncoderConfig` — BERT-style encoder (sentence embeddings)
* :class:`RNNSeq2Seq`, :class:`AttentionSeq2Seq` (and configs) — RNN encoder-decoders: Cho
  et al. 2014's fixed context, Bahdanau / Luong / location-aware attention
* :class:`LSTMLM`, :class:`LSTMN` (and configs) — recurrent language models: the LSTM
  baseline and Cheng et al. 2016's LSTMN (intra-attention over its own past states)
* :class:`NTM`, :class:`NTMConfig` — Graves et al. 2014's Neural Turing Machine: an LSTM
  controller with read and write heads addressing an N x M memory; :class:`SequenceLSTM`
  (and config), the plain LSTM it is compared with on the same tasks
* :class:`GPTForSequenceClassification`, :class:`GPTClassifierConfig` — a GPT fine-tuned
  with a classification head (GPT-1-style transfer)
* :class:`ShowAttendTell`, :class:`ShowAttendTellConfig` — Xu et al. 2015's image captioner:
  a conv-net grid of annotation vectors and an LSTM decoder with soft attention over it
* :class:`ListenAttendSpell`, :class:`SpeechTransformer` (and configs) — recognizers over
  log-mel features: Chan et al. 2016's pyramidal BiLSTM under the RNN translators' attention
  decoder, and the Transformer after a convolutional front end (Zeyer et al. 2019's comparison)

:func:`load_pretrained` opens any checkpoint directory by the ``model_type`` in its
``config.json`` (:data:`MODEL_TYPES`); :func:`task_models` lists the models a task trains
(:data:`MODEL_TASKS`, what each model declared). A new model is one file here: its config
dataclass (extending :class:`~attnlab.modules.BlockConfig` where the fields apply), the model
class decorated with ``@register_model(task="...")``, and one import line below
(docs/design.md, "Adding a model").
"""

from attnlab.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from attnlab.models.base import (
    MODEL_TASKS,
    MODEL_TYPES,
    ModelCache,
    PretrainedModel,
    StateCache,
    load_pretrained,
    register_model,
    task_models,
)
from attnlab.models.classifier import GPTClassifierConfig, GPTForSequenceClassification
from attnlab.models.encoder import Encoder, EncoderConfig
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.listen_attend_spell import ListenAttendSpell, ListenAttendSpellConfig
from attnlab.models.lstmn import LSTMLM, LSTMN, LSTMConfig, LSTMNConfig
from attnlab.models.ntm import NTM, NTMConfig
from attnlab.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from attnlab.models.sequence_lstm import SequenceLSTM, SequenceLSTMConfig
from attnlab.models.show_attend_tell import ShowAttendTell, ShowAttendTellConfig
from attnlab.models.speech_transformer import SpeechTransformer, SpeechTransformerConfig
from attnlab.models.transformer import Transformer, TransformerConfig

__all__ = [
    "GPT",
    "AttentionSeq2Seq",
    "AttentionSeq2SeqConfig",
    "MODEL_TASKS",
    "MODEL_TYPES",
    "Encoder",
    "EncoderConfig",
    "GPTClassifierConfig",
    "GPTConfig",
    "GPTForSequenceClassification",
    "LSTMConfig",
    "ListenAttendSpell",
    "ListenAttendSpellConfig",
    "LSTMLM",
    "LSTMN",
    "LSTMNConfig",
    "ModelCache",
    "NTM",
    "NTMConfig",
    "PretrainedModel",
    "RNNSeq2Seq",
    "RNNSeq2SeqConfig",
    "SequenceLSTM",
    "SequenceLSTMConfig",
    "ShowAttendTell",
    "ShowAttendTellConfig",
    "SpeechTransformer",
    "SpeechTransformerConfig",
    "StateCache",
    "Transformer",
    "TransformerConfig",
    "load_pretrained",
    "register_model",
    "task_models",
]
