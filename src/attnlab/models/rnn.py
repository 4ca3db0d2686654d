"""RNN encoder-decoders: the fixed context vector of Cho et al. (2014) and the attention of
Bahdanau et al. (2015), Luong et al. (2015) and Chorowski et al. (2015) (Hasegawa-Johnson
(ECE 417 Lecture 21), "Attention"; López et al. (Attention Mechanisms); Ba (CSC413 Lecture 8)).

    :class:`RNNSeq2Seq` (Cho, van Merriënboer, Gulcehre, Bahdanau, Bougares, Schwenk & Bengio
    2014, "Learning Phrase Representations using RNN Encoder-Decoder", §2.2):
        src → GRU → last state h_S → c = tanh(V h_S)                      one vector (B, 1, H)
        s_0 = tanh(V' c);  s_i = GRU(s_{i-1}, [E y_{i-1}; c])
        p(y_i | ...) = softmax(E_out tanh(W_o [s_i; c; E y_{i-1}]))         (deep output)

    :class:`AttentionSeq2Seq` (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by
    Jointly Learning to Align and Translate", §3 and appendix A):
        src → bi-GRU → h_j = [h→_j; h←_j]                                memory (B, S, 2e)
        s_0 = tanh(W_s h←_1)
        α_i = softmax_j a(s_{i-1}, h_j),  c_i = Σ_j α_ij h_j              (eqs. 5-6)
        s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])                             (eq. 4)
        p(y_i | ...) = softmax(E_out tanh(W_o [s_i; c_i; E y_{i-1}]))

The score ``a`` is selectable (:class:`~attnlab.attention.alignment.Alignment`): ``additive``
(Bahdanau), ``dot`` and ``general`` (Luong), ``location`` (Chorowski). Source padding is
handled by packed sequences in the encoder (a padded position never enters a GRU) and gets
weight exactly 0 in the alignment. Both models have no length limit: a GRU reads any length.

Decoding follows the seam of :class:`~attnlab.models.Transformer`: ``encode`` once, then
``decode`` one token at a time with a :class:`~attnlab.models.base.StateCache` holding the
decoder state (and the projected keys and last alignment), so no prefix is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.attention.alignment import SCORES, Alignment
from attnlab.config import Config
from attnlab.models.base import PretrainedModel, StateCache, register_model
from attnlab.validation import (
    check_choice,
    check_ids,
    check_positive,
    check_probability,
    check_rank,
    check_vocabularies,
)


@dataclass
class RNNSeq2SeqConfig(Config):
    """Cho et al.'s GRU encoder-decoder. ``tgt_vocab_size=None`` means the source's size;
    ``share_embeddings`` ties source and target embeddings (one joint vocabulary);
    ``tie_output`` ties the output layer to the target embedding. ``hidden_dim`` is the width
    of the GRU states; ``dropout`` applies to the embeddings and the deep output."""

    src_vocab_size: int
    tgt_vocab_size: int | None = None
    pad_id: int = 0
    embed_dim: int = 256
    hidden_dim: int = 512
    dropout: float = 0.2
    share_embeddings: bool = False
    tie_output: bool = True

    def __post_init__(self) -> None:
        check_vocabularies(self)
        for name in ("embed_dim", "hidden_dim"):
            check_positive(name, getattr(self, name))
        check_probability("dropout", self.dropout)


@dataclass
class AttentionSeq2SeqConfig(RNNSeq2SeqConfig):
    """Bahdanau et al.'s model: :class:`RNNSeq2SeqConfig` plus the bi-GRU encoder's width per
    direction (``encoder_dim``; the memory is ``2 · encoder_dim`` wide), the alignment
    ``score`` (one of ``additive``, ``dot``, ``general``, ``location``), the scoring network's
    width (``attention_dim``) and the location features (``location_filters``,
    ``location_kernel``, odd)."""

    encoder_dim: int = 256
    score: str = "additive"
    attention_dim: int = 256
    location_filters: int = 10
    location_kernel: int = 21

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("score", self.score, SCORES)
        for name in ("encoder_dim", "attention_dim", "location_filters", "location_kernel"):
            check_positive(name, getattr(self, name))
        if self.location_kernel % 2 == 0:
            raise ValueError(f"location_kernel must be odd, got {self.location_kernel}")
        if self.score == "dot" and self.hidden_dim != 2 * self.encoder_dim:
            raise ValueError(
                f"score 'dot' needs hidden_dim = 2 * encoder_dim (decoder state and memory of one "
                f"width), got hidden_dim={self.hidden_dim}, encoder_dim={self.encoder_dim}"
            )


class _RNNTranslator(PretrainedModel):
    """What both RNN encoder-decoders share: embeddings, the packed encoder pass, the deep
    output layer, teacher-forced ``forward`` and argument checks."""

    def __init__(self, config: RNNSeq2SeqConfig, context_dim: int) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.embed_dim)
        self.tgt_embed = (
            self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.embed_dim)
        )
        self.dropout = nn.Dropout(c.dropout)
        self.deep_output = nn.Linear(c.hidden_dim + context_dim + c.embed_dim, c.embed_dim)
        self.output = nn.Linear(c.embed_dim, c.tgt_vocab_size, bias=False)
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, std=c.embed_dim**-0.5)
        if c.tie_output:
            self.output.weight = self.tgt_embed.weight  # (V_tgt, E)

    def _encode_packed(self, rnn: nn.GRU, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Run ``rnn`` over the real tokens of ``src`` ``(B, S)`` only: ``(outputs (B, S, ·) zero
        on padding, last states (layers·directions, B, ·), mask (B, S))``."""
        c = self.config
        check_ids("src", src, c.src_vocab_size)
        if src.shape[0] == 0 or src.shape[1] == 0:
            raise ValueError(f"src must hold at least one token, got shape {tuple(src.shape)}")
        mask = src != c.pad_id  # (B, S)
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # (B,); an all-pad row reads one pad
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        outputs, last = rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return outputs, last, mask

    def _check_decode(self, tgt: Tensor, memory: Tensor) -> None:
        check_ids("tgt", tgt, self.config.tgt_vocab_size)
        check_rank("memory", memory, 3, "(B, S, d)")
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"memory has batch size {memory.shape[0]} but tgt has batch size {tgt.shape[0]}"
            )

    def _logits(self, states: Tensor, contexts: Tensor, embedded: Tensor) -> Tensor:
        """The deep output ``E_out tanh(W_o [s_i; c_i; E y_{i-1}])``: ``(B, T, ·)`` × 3 →
        ``(B, T, V_tgt)`` (Bahdanau et al. appendix A.2.2, with tanh in place of maxout)."""
        hidden = torch.tanh(self.deep_output(torch.cat([states, contexts, embedded], dim=-1)))
        return self.output(self.dropout(hidden))  # (B, T, V_tgt)

    def new_cache(self) -> StateCache:
        """An empty :class:`StateCache` for :meth:`decode`."""
        return StateCache()

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: ``src`` ``(B, S)``, ``tgt_in`` ``(B, T)`` ids → logits ``(B, T, V_tgt)``."""
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"tgt_in has batch size {tgt_in.shape[0]} but src has batch size {src.shape[0]}"
            )
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)


@register_model
class RNNSeq2Seq(_RNNTranslator):
    """Cho et al. (2014): the whole source squeezed into one context vector (module doc).

    ``encode(src)`` returns that vector as a one-position memory ``(B, 1, H)`` (mask all
    True); ``decode`` has no attention to return (no ``return_weights``).
    """

    model_type = "rnn_seq2seq"
    config_class = RNNSeq2SeqConfig

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__(config, context_dim=config.hidden_dim)
        c = config
        self.encoder = nn.GRU(c.embed_dim, c.hidden_dim, batch_first=True)
        self.context = nn.Linear(c.hidden_dim, c.hidden_dim)  # c = tanh(V h_S)
        self.bridge = nn.Linear(c.hidden_dim, c.hidden_dim)  # s_0 = tanh(V' c)
        self.decoder = nn.GRU(c.embed_dim + c.hidden_dim, c.hidden_dim, batch_first=True)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """``src`` ``(B, S)`` → ``(context (B, 1, H), mask (B, 1))``."""
        _, last, _ = self._encode_packed(self.encoder, src)  # last (1, B, H)
        context = torch.tanh(self.context(last[-1]))  # (B, H)
        return context.unsqueeze(1), torch.ones(src.shape[0], 1, dtype=torch.bool, device=src.device)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, *, cache: StateCache | None = None
    ) -> Tensor:
        """Logits ``(B, T, V_tgt)`` of ``tgt`` ``(B, T)`` given the context ``memory`` ``(B, 1, H)``;
        with a ``cache``, ``tgt`` holds only the new tokens and the state is carried over. There
        are no attention weights to return: the decoder sees one fixed context vector."""
        self._check_decode(tgt, memory)
        context = memory[:, 0]  # (B, H)
        if cache is not None and "state" in cache:
            state = cache["state"]  # (B, H)
        else:
            state = torch.tanh(self.bridge(context))  # (B, H)
        embedded = self.dropout(self.tgt_embed(tgt))  # (B, T, E)
        contexts = context.unsqueeze(1).expand(-1, tgt.shape[1], -1)  # (B, T, H)
        states, last = self.decoder(torch.cat([embedded, contexts], dim=-1), state.unsqueeze(0).contiguous())
        if cache is not None:
            cache["state"], cache.offset = last[0], cache.offset + tgt.shape[1]
        return self._logits(states, contexts, embedded)


@register_model
class AttentionSeq2Seq(_RNNTranslator):
    """Bahdanau et al. (2015) with a selectable alignment score (module doc).

    ``encode(src)`` → ``(memory (B, S, 2e), mask (B, S))``; ``decode(..., return_weights=True)``
    also returns the alignment as a one-layer, one-head list ``[(B, 1, T, S)]``, the layout of
    :meth:`~attnlab.models.Transformer.decode`'s cross-attention weights.
    """

    model_type = "attention_seq2seq"
    config_class = AttentionSeq2SeqConfig

    def __init__(self, config: AttentionSeq2SeqConfig) -> None:
        memory_dim = 2 * config.encoder_dim
        super().__init__(config, context_dim=memory_dim)
        c = config
        self.encoder = nn.GRU(c.embed_dim, c.encoder_dim, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(c.encoder_dim, c.hidden_dim)  # s_0 = tanh(W_s h←_1)
        self.alignment = Alignment(
            c.score, c.hidden_dim, memory_dim, c.attention_dim,
            filters=c.location_filters, kernel_size=c.location_kernel,
        )
        self.cell = nn.GRUCell(c.embed_dim + memory_dim, c.hidden_dim)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """``src`` ``(B, S)`` → ``(memory (B, S, 2e), mask (B, S))``; True = real token."""
        memory, _, mask = self._encode_packed(self.encoder, src)
        return memory, mask

    def _start(self, memory: Tensor, src_mask: Tensor, cache: StateCache | None) -> tuple[Tensor, ...]:
        """``(state (B, H), prepared keys (B, S, ·), previous alignment (B, S))``: carried in the
        cache, or fresh at the first step."""
        if cache is not None and "state" in cache:
            return cache["state"], cache["keys"], cache["previous"]
        backward_first = memory[:, 0, self.config.encoder_dim :]  # h←_1: (B, e)
        state = torch.tanh(self.bridge(backward_first))  # (B, H)
        previous = Alignment.initial(src_mask).to(memory.dtype)  # (B, S)
        return state, self.alignment.prepare(memory), previous

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, *,
        cache: StateCache | None = None, return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits ``(B, T, V_tgt)`` of ``tgt`` ``(B, T)`` attending over ``memory`` ``(B, S, 2e)``;
        with ``return_weights`` also ``[alignment (B, 1, T, S)]``. With a ``cache``, ``tgt``
        holds only the new tokens and the state, keys and last alignment are carried over."""
        self._check_decode(tgt, memory)
        if src_mask is None:
            src_mask = torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)
        state, keys, previous = self._start(memory, src_mask, cache)
        embedded = self.dropout(self.tgt_embed(tgt))  # (B, T, E)
        states, contexts, weights = [], [], []
        for t in range(tgt.shape[1]):
            alpha = self.alignment(state, keys, src_mask, previous)  # (B, S), eq. 6
            context = torch.bmm(alpha.unsqueeze(1).to(memory.dtype), memory).squeeze(1)  # (B, 2e), eq. 5
            state = self.cell(torch.cat([embedded[:, t], context.to(embedded.dtype)], dim=-1), state)
            states.append(state)
            contexts.append(context)
            weights.append(alpha)
            previous = alpha
        if cache is not None:
            cache.update(state=state, keys=keys, previous=previous)
            cache.offset += tgt.shape[1]
        logits = self._logits(torch.stack(states, 1), torch.stack(contexts, 1).to(embedded.dtype), embedded)
        if not return_weights:
            return logits
        return logits, [torch.stack(weights, dim=1).unsqueeze(1)]  # [(B, 1, T, S)]

