"""An attention-based recognizer: a pyramidal BiLSTM listener and the attention decoder of the
RNN translators, spelling characters (Hasegawa-Johnson, ECE 417 Lecture 21).

    Chan, Jaitly, Le & Vinyals (2016), "Listen, Attend and Spell"; Chorowski, Bahdanau,
    Serdyuk, Cho & Bengio (2015), "Attention-Based Models for Speech Recognition":

        features (B, F, D) → pyramidal BiLSTM ×L → h_j (B, ⌈F / 2^L⌉, 2e)       the listener
        α_i = softmax_j a(s_{i-1}, h_j[, α_{i-1}]),  c_i = Σ_j α_ij h_j          attend
        s_i = GRU(s_{i-1}, [E y_{i-1}; c_i]),  p(y_i | …) = softmax(E_out tanh(W_o [s_i; c_i; E y_{i-1}]))

The listener is :class:`~attnlab.modules.pyramid.PyramidalBLSTM`; everything after it is
:class:`~attnlab.models.AttentionSeq2Seq`'s decoder, unchanged: its step, its
:class:`~attnlab.attention.alignment.Alignment` (``score = "additive"``: Bahdanau's content
score; ``"location"``: Chorowski et al.'s location-aware score, which convolves ``α_{i-1}``),
its cache for beam search. The frames past an utterance's length are masked in the alignment
(weight exactly 0). The character embedding is the target embedding (``share_embeddings``:
there are no source tokens to embed).

``encode(features, lengths)`` → ``(memory (B, S, 2e), mask (B, S))``, ``S = ⌈F / 2^L⌉``;
``model(features, lengths, tgt_in)`` → logits ``(B, T, V)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from attnlab.attention.masks import lengths_to_mask
from attnlab.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from attnlab.models.base import register_model
from attnlab.models.speech_input import TeacherForcedRecognizer, check_features
from attnlab.modules.pyramid import PyramidalBLSTM
from attnlab.validation import check_positive


@dataclass
class ListenAttendSpellConfig(AttentionSeq2SeqConfig):
    """:class:`AttentionSeq2SeqConfig` (the decoder, ``encoder_dim`` the listener's width a
    direction) plus the features' width ``n_mels`` and the listener's ``listener_layers``
    (each halves the frames). Source and target vocabularies are one, the characters."""

    n_mels: int = 80
    listener_layers: int = 3
    share_embeddings: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("n_mels", self.n_mels)
        check_positive("listener_layers", self.listener_layers)
        if not self.share_embeddings or self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("a recognizer has one vocabulary: share_embeddings = true and "
                             f"src_vocab_size = tgt_vocab_size, got {self.share_embeddings}, "
                             f"{self.src_vocab_size}, {self.tgt_vocab_size}")


@register_model(task="speech", default=True)
class ListenAttendSpell(TeacherForcedRecognizer, AttentionSeq2Seq):
    """The pyramidal BiLSTM listener under Bahdanau et al.'s decoder (module doc)."""

    model_type = "listen_attend_spell"
    config_class = ListenAttendSpellConfig

    def __init__(self, config: ListenAttendSpellConfig) -> None:
        c = config
        super().__init__(c, encoder=PyramidalBLSTM(c.n_mels, c.encoder_dim, c.listener_layers, c.dropout))

    @property
    def reduction(self) -> int:
        """How many times fewer keys than frames: ``2^listener_layers``."""
        return 2 ** self.config.listener_layers

    def encode(self, features: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``features`` ``(B, F, n_mels)``, ``lengths`` ``(B,)`` (``None``: all real) →
        ``(memory (B, S, 2e) zero past each length, mask (B, S))``; True = real frame."""
        lengths = check_features(features, lengths, self.config.n_mels)
        memory, lengths = self.encoder(features, lengths)
        return memory, lengths_to_mask(lengths.to(memory.device), memory.shape[1])
