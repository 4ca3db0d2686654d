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
decoder state, so no prefix is recomputed. What depends on the source alone is computed at the
cache's first step and kept: Bahdanau's key projection ``W_k h_j`` (their ``U_a h_j``, which
"does not depend on i", appendix A.1.2), for few short sources the images ``W h_j`` of
the annotations under the weights that read ``c_i`` (``W c_i = Σ_j α_ij W h_j``), and for Cho's
model every product of a weight with the one context vector ``c``. A decoding loop checks its first
step and passes ``check=False`` to the later ones (docs/design.md, "Validate once").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
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


def gru_step(input_gates: Tensor, state: Tensor, w_hh: Tensor, b_hh: Tensor) -> Tensor:
    """One GRU step from input gates computed elsewhere (Cho et al. 2014, eqs. 5-8, in
    ``nn.GRU``'s gate order r, z, n): ``input_gates`` ``W x + b_ih`` ``(B, 3H)``, ``state`` ``s``
    ``(B, H)``, ``w_hh`` ``(3H, H)``, ``b_hh`` ``(3H,)`` → the next state ``(B, H)``::

        r, z = σ(W_r x + U_r s),  σ(W_z x + U_z s)
        n = tanh(W_n x + r ⊙ (U_n s)),  s' = (1 − z) ⊙ n + z ⊙ s

    Equal to ``nn.GRUCell`` to rounding; lets a caller add a constant part of ``W x`` once.
    """
    hidden = state.shape[-1]
    hidden_gates = torch.addmm(b_hh, state, w_hh.t())  # (B, 3H): U s + b_hh
    rz = torch.sigmoid(input_gates[:, : 2 * hidden] + hidden_gates[:, : 2 * hidden])  # (B, 2H)
    n = torch.tanh(torch.addcmul(input_gates[:, 2 * hidden :], rz[:, :hidden], hidden_gates[:, 2 * hidden :]))
    return torch.lerp(n, state, rz[:, hidden:])  # (B, H): n + z ⊙ (s − n)


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
        x = self._drop(self.src_embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        outputs, last = rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return outputs, last, mask

    def _drop(self, x: Tensor) -> Tensor:
        """Dropout while training; in eval the identity, without a module call per step."""
        return self.dropout(x) if self.training else x

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
        return self.output(self._drop(hidden))  # (B, T, V_tgt)

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


@register_model(task="translation")
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
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, *, cache: StateCache | None = None,
        check: bool = True,
    ) -> Tensor:
        """Logits ``(B, T, V_tgt)`` of ``tgt`` ``(B, T)`` given the context ``memory`` ``(B, 1, H)``;
        with a ``cache``, ``tgt`` holds only the new tokens and the state is carried over. There
        are no attention weights to return: the decoder sees one fixed context vector."""
        if check:  # False: a decoding loop's later step (docs/design.md, "Validate once")
            self._check_decode(tgt, memory)
        embedded = self._drop(self.tgt_embed(tgt))  # (B, T, E)
        if cache is None:
            return self._teacher_forced(embedded, memory[:, 0])
        if "state" not in cache:
            cache.update(self._context_terms(memory[:, 0]))
        return self._steps(embedded, cache)

    def _teacher_forced(self, embedded: Tensor, context: Tensor) -> Tensor:
        """Every position at once: one fused ``nn.GRU`` over ``[E y_{i-1}; c]`` ``(B, T, E + H)``
        from ``s_0 = tanh(V' c)``, then the deep output → logits ``(B, T, V_tgt)``."""
        state = torch.tanh(self.bridge(context))  # (B, H)
        contexts = context.unsqueeze(1).expand(-1, embedded.shape[1], -1)  # (B, T, H)
        states, _ = self.decoder(torch.cat([embedded, contexts], dim=-1), state.unsqueeze(0).contiguous())
        return self._logits(states, contexts, embedded)

    def _context_terms(self, context: Tensor) -> dict[str, Tensor]:
        """What depends on the context vector ``c`` ``(B, H)`` alone, once per sentence: ``s_0``,
        the ``c`` columns of the GRU's input weights ``W^c c + b_ih`` ``(B, 3H)`` and of the deep
        output ``W_o^c c + b_o`` ``(B, E)`` (the weights' columns follow ``[E y; c]`` and
        ``[s; c; E y]``)."""
        e, h = self.config.embed_dim, self.config.hidden_dim
        gru, deep = self.decoder, self.deep_output
        return {
            "state": torch.tanh(self.bridge(context)),  # (B, H)
            "context_gates": F.linear(context, gru.weight_ih_l0[:, e:], gru.bias_ih_l0),  # (B, 3H)
            "context_output": F.linear(context, deep.weight[:, h : 2 * h], deep.bias),  # (B, E)
        }

    def _steps(self, embedded: Tensor, cache: StateCache) -> Tensor:
        """One GRU step per position of ``embedded`` ``(B, T, E)`` from the cached state, adding
        the cached ``c`` terms instead of multiplying ``c`` again → logits ``(B, T, V_tgt)``."""
        e, h = self.config.embed_dim, self.config.hidden_dim
        gru, deep = self.decoder, self.deep_output
        w_gates = gru.weight_ih_l0[:, :e].t()  # (E, 3H): the E y columns of the GRU's W
        w_state, w_embed = deep.weight[:, :h].t(), deep.weight[:, 2 * h :].t()  # (H, E), (E, E)
        state, outputs = cache["state"], []
        for t in range(embedded.shape[1]):
            y = embedded[:, t]  # E y_{i-1}: (B, E)
            gates = torch.addmm(cache["context_gates"], y, w_gates)  # W [E y; c] + b_ih: (B, 3H)
            state = gru_step(gates, state, gru.weight_hh_l0, gru.bias_hh_l0)  # s_i: (B, H)
            deep_in = torch.addmm(torch.addmm(cache["context_output"], state, w_state), y, w_embed)
            outputs.append(torch.tanh(deep_in))  # tanh(W_o [s_i; c; E y_{i-1}] + b_o): (B, E)
        cache["state"], cache.offset = state, cache.offset + embedded.shape[1]
        return self.output(self._drop(torch.stack(outputs, dim=1)))  # (B, T, V_tgt)


@register_model(task="translation")
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

    def _start(
        self, memory: Tensor, src_mask: Tensor, cache: StateCache | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """``(state (B, H), prepared keys (B, S, ·), previous alignment (B, S), the alignment's
        mask (B, S) or None)``: carried in the cache, or fresh at the first step, where the keys
        ``W_k h_j`` are projected once for every step. A new cache keeps the mask only if some
        source is padded (else each step runs a plain softmax) and, for few short sources, the
        projected annotations (:meth:`_project_annotations`)."""
        if cache is not None and "state" in cache:
            return cache["state"], cache["keys"], cache["previous"], cache.get("mask")
        backward_first = memory[:, 0, self.config.encoder_dim :]  # h←_1: (B, e)
        state = torch.tanh(self.bridge(backward_first))  # (B, H)
        previous = Alignment.initial(src_mask).to(memory.dtype)  # (B, S)
        keys = self.alignment.prepare(memory)  # (B, S, ·)
        if cache is None:
            return state, keys, previous, src_mask
        cache["keys"] = keys
        if not bool(src_mask.all()):
            cache["mask"] = src_mask
        if memory.shape[0] * memory.shape[1] <= memory.shape[2]:  # B·S ≤ 2e: smaller than W^c
            cache["projected"] = self._project_annotations(memory)
        return state, keys, previous, cache.get("mask")

    def _project_annotations(self, memory: Tensor) -> Tensor:
        """The context enters the decoder only through the GRU's input weights ``W^c`` and the
        deep output's ``W_o^c``, and ``W c_i = Σ_j α_ij W h_j`` (eq. 5): ``memory`` ``(B, S, 2e)``
        → ``[W^c h_j; W_o^c h_j]`` ``(B, S, 3H + E)``, once per sentence. Each step then reads
        ``S`` such rows instead of the ``(3H + E) × 2e`` weights: cheaper while ``B·S ≤ 2e``."""
        e, h = self.config.embed_dim, self.config.hidden_dim
        w_gates = self.cell.weight_ih[:, e:]  # (3H, 2e): the c columns of W [E y; c]
        w_output = self.deep_output.weight[:, h : h + memory.shape[2]]  # (E, 2e): of W_o [s; c; E y]
        return torch.cat([F.linear(memory, w_gates), F.linear(memory, w_output)], dim=-1)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, *,
        cache: StateCache | None = None, return_weights: bool = False, check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits ``(B, T, V_tgt)`` of ``tgt`` ``(B, T)`` attending over ``memory`` ``(B, S, 2e)``;
        with ``return_weights`` also ``[alignment (B, 1, T, S)]``. With a ``cache``, ``tgt``
        holds only the new tokens; the state and last alignment are carried over, and the keys
        and ``src_mask`` are the first step's."""
        if check:  # False: a decoding loop's later step (docs/design.md, "Validate once")
            self._check_decode(tgt, memory)
        if src_mask is None:
            src_mask = torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)
        state, keys, previous, mask = self._start(memory, src_mask, cache)
        embedded = self._drop(self.tgt_embed(tgt))  # (B, T, E)
        if cache is not None and "projected" in cache:
            steps = self._projected_steps(embedded, cache["projected"], keys, mask, state, previous)
        else:
            steps = self._context_steps(embedded, memory, keys, mask, state, previous)
        logits, weights, state = steps
        if cache is not None:
            cache.update(state=state, previous=weights[-1])
            cache.offset += tgt.shape[1]
        if not return_weights:
            return logits
        return logits, [torch.stack(weights, dim=1).unsqueeze(1)]  # [(B, 1, T, S)]

    def _context_steps(
        self, embedded: Tensor, memory: Tensor, keys: Tensor, mask: Tensor | None, state: Tensor,
        previous: Tensor,
    ) -> tuple[Tensor, list[Tensor], Tensor]:
        """Eqs. 4-6 for each position of ``embedded`` ``(B, T, E)`` → ``(logits (B, T, V_tgt),
        T alignments (B, S), last state (B, H))``; the deep output runs once over all ``T``."""
        states, contexts, weights = [], [], []
        for t in range(embedded.shape[1]):
            alpha = self.alignment(state, keys, mask, previous)  # (B, S), eq. 6
            context = torch.bmm(alpha.unsqueeze(1).to(memory.dtype), memory).squeeze(1)  # (B, 2e), eq. 5
            state = self.cell(torch.cat([embedded[:, t], context.to(embedded.dtype)], dim=-1), state)
            states.append(state)
            contexts.append(context)
            weights.append(alpha)
            previous = alpha
        contexts = torch.stack(contexts, 1).to(embedded.dtype)  # (B, T, 2e)
        return self._logits(torch.stack(states, 1), contexts, embedded), weights, state

    def _projected_steps(
        self, embedded: Tensor, projected: Tensor, keys: Tensor, mask: Tensor | None, state: Tensor,
        previous: Tensor,
    ) -> tuple[Tensor, list[Tensor], Tensor]:
        """:meth:`_context_steps` over the projected annotations ``(B, S, 3H + E)``: ``α_i`` pools
        ``[W^c c_i; W_o^c c_i]`` directly, so ``c_i`` is never formed."""
        e, h = self.config.embed_dim, self.config.hidden_dim
        cell, deep = self.cell, self.deep_output
        w_gates = cell.weight_ih[:, :e].t()  # (E, 3H): the E y columns of W [E y; c]
        w_state, w_embed = deep.weight[:, :h].t(), deep.weight[:, deep.weight.shape[1] - e :].t()
        outputs, weights = [], []
        for t in range(embedded.shape[1]):
            y = embedded[:, t]  # E y_{i-1}: (B, E)
            alpha = self.alignment(state, keys, mask, previous)  # (B, S), eq. 6
            pooled = torch.bmm(alpha.unsqueeze(1), projected).squeeze(1)  # (B, 3H + E), eq. 5
            gates = torch.addmm(pooled[:, : 3 * h] + cell.bias_ih, y, w_gates)  # W [E y; c_i] + b_ih
            state = gru_step(gates, state, cell.weight_hh, cell.bias_hh)  # (B, H), eq. 4
            deep_in = torch.addmm(torch.addmm(pooled[:, 3 * h :] + deep.bias, state, w_state), y, w_embed)
            outputs.append(torch.tanh(deep_in))  # tanh(W_o [s_i; c_i; E y] + b_o): (B, E)
            weights.append(alpha)
            previous = alpha
        return self.output(self._drop(torch.stack(outputs, dim=1))), weights, state
