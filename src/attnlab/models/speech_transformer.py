"""The encoder-decoder Transformer on speech: a convolutional front end that shortens the
frames four times, then the library's Transformer stacks, spelling characters.

Zeyer, Bahar, Irie, Schlüter & Ney (2019), "A Comparison of Transformer and LSTM Encoder
Decoder Models for ASR", compare this model with the LSTM listener of Chan et al. (2016)
(:class:`~attnlab.models.ListenAttendSpell`) on the same features (Hasegawa-Johnson, ECE 417
Lecture 21; Vaswani et al. 2017):

    features (B, F, D) → ConvSubsampling (×4) → LayerNorm → + P → encoder ×N → memory (B, ⌈F/4⌉, d)
    tgt ids (B, T) → E · √d + P → decoder ×N (causal self-attention, cross-attention) → logits

The front end's frames are layer-normalised before the positions are added: unit variance,
the scale of the token path's ``E · √d`` (Vaswani et al. §3.4), so that the sound and the
positions start at one size (left as the projection's default initialisation gives them, the
frames of real speech had an RMS of 0.12 against the positions' 0.71).

Everything after the front end is :class:`~attnlab.models.Transformer`'s: the stacks, the
positions, the decoder's causal mask, its KV cache for beam search. The frames past an
utterance's length reach the stacks as a ``(B, S)`` key-padding mask (the mask contract of
:mod:`attnlab.attention.masks`). The character embedding is the target embedding
(``share_embeddings``).

``encode(features, lengths)`` → ``(memory (B, S, d), mask (B, S))``; ``model(features, lengths,
tgt_in)`` → logits ``(B, T, V)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from attnlab.attention.masks import lengths_to_mask
from attnlab.models.base import register_model
from attnlab.models.speech_input import TeacherForcedRecognizer, check_features
from attnlab.models.transformer import Transformer, TransformerConfig, _unless_all_real
from attnlab.modules.subsampling import ConvSubsampling
from attnlab.validation import check_positive


@dataclass
class SpeechTransformerConfig(TransformerConfig):
    """:class:`TransformerConfig` plus the features' width ``n_mels`` and the front end's
    ``conv_channels``. One vocabulary, the characters; ``max_len`` bounds the subsampled frames
    and the transcripts (sinusoidal positions by default)."""

    n_mels: int = 80
    conv_channels: int = 64
    share_embeddings: bool = True
    max_len: int = 2048

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("n_mels", self.n_mels)
        check_positive("conv_channels", self.conv_channels)
        if not self.share_embeddings or self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("a recognizer has one vocabulary: share_embeddings = true and "
                             f"src_vocab_size = tgt_vocab_size, got {self.share_embeddings}, "
                             f"{self.src_vocab_size}, {self.tgt_vocab_size}")


@register_model(task="speech")
class SpeechTransformer(TeacherForcedRecognizer, Transformer):
    """The conv front end under Vaswani et al.'s stacks (module doc)."""

    model_type = "speech_transformer"
    config_class = SpeechTransformerConfig
    reduction = 4

    def __init__(self, config: SpeechTransformerConfig) -> None:
        super().__init__(config)
        self.frontend = ConvSubsampling(config.n_mels, config.conv_channels, config.d_model)
        self.frontend_norm = nn.LayerNorm(config.d_model, eps=config.norm_eps)

    def encode(self, features: Tensor, lengths: Tensor | None = None, *,  # type: ignore[override]
               check: bool = True) -> tuple[Tensor, Tensor]:
        """``features`` ``(B, F, n_mels)``, ``lengths`` ``(B,)`` (``None``: all real) →
        ``(memory (B, S, d), mask (B, S))``; True = real frame."""
        lengths = check_features(features, lengths, self.config.n_mels)
        x, lengths = self.frontend(features, lengths)  # (B, S, d)
        x = self.frontend_norm(x)  # unit variance a frame, as E·√d
        self.src_pos.check_length("frames after subsampling", x.shape[1])
        mask = lengths_to_mask(lengths.to(x.device), x.shape[1])  # (B, S)
        x = self.src_pos.add(x, 0)
        x = self.dropout(x) if self.training else x
        bias = self.src_pos.bias(x.shape[1], x.shape[1])
        return self.stack.encode(x, _unless_all_real(mask), attn_bias=bias, check=False), mask
