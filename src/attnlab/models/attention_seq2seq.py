"""The RNN encoder-decoder with attention of Bahdanau et al. (2015), with the scores of Luong
et al. (2015) and Chorowski et al. (2015) (Hasegawa-Johnson (ECE 417 Lecture 21), "Attention";
López et al. (Attention Mechanisms); Ba (CSC413 Lecture 8)).

    :class:`AttentionSeq2Seq` (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by
    Jointly Learning to Align and Translate", §3 and appendix A):
        src → bi-GRU → h_j = [h→_j; h←_j]                                memory (B, S, 2e)
        s_0 = tanh(W_s h←_1)
        α_i = softmax_j a(s_{i-1}, h_j),  c_i = Σ_j α_ij h_j              (eqs. 5-6)
        s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])                             (eq. 4)
        p(y_i | ...) = softmax(E_out tanh(W_o [s_i; c_i; E y_{i-1}]))

The score ``a`` is selectable (:class:`~attnlab.attention.alignment.Alignment`): ``additive``
(Bahdanau), ``dot`` and ``general`` (Luong), ``location`` (Chorowski). Padding gets weight
exactly 0 in the alignment. Embeddings, encoder, GRU cell and deep output are
:class:`~attnlab.models.rnn.RNNTranslator`'s.

One step function, :meth:`AttentionSeq2Seq._step` (eqs. 4-6), serves teacher forcing and
decoding. What depends on the source alone is prepared once per sentence (:class:`Annotations`):
the alignment's key side (Bahdanau's ``W_k h_j``, their ``U_a h_j``, which "does not depend on
i", appendix A.1.2) and what the step pools. The context enters the decoder only through the
weights that read it, ``W^c`` (the GRU's) and ``W_o^c`` (the deep output's), and ``W c_i =
Σ_j α_ij W h_j`` (eq. 5); so for few short sources a decoding cache keeps the images
``[W^c h_j; W_o^c h_j]`` and each step pools those rows, without forming ``c_i``: a fast path
behind the step's one read, :meth:`Annotations.read`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.attention.alignment import SCORES, Alignment
from attnlab.models.base import StateCache, register_model
from attnlab.models.rnn import RNNSeq2SeqConfig, RNNTranslator, StepWeights, autocast_once
from attnlab.validation import check_choice, check_positive


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


@dataclass
class Annotations:
    """The source as every decoder step reads it: the alignment's prepared ``keys`` ``(B, S, ·)``
    and ``mask`` ``(B, S)`` (``None``: no padding), and the ``values`` that ``α_i`` pools —
    the annotations ``h_j`` ``(B, S, 2e)`` with the ``weights`` that read ``c_i``, ``W^c``
    ``(2e, 3H)`` and ``W_o^c`` ``(2e, E)`` (transposed), or (``weights=None``) their images
    ``[W^c h_j; W_o^c h_j]`` ``(B, S, 3H + E)``; ``gate_width`` is ``3H``."""

    keys: Tensor
    mask: Tensor | None
    values: Tensor
    gate_width: int
    weights: tuple[Tensor, Tensor] | None = None

    def read(self, alpha: Tensor) -> tuple[Tensor, Tensor]:
        """``(W^c c_i (B, 3H), W_o^c c_i (B, E))`` for ``c_i = Σ_j α_ij h_j`` (eq. 5), ``alpha``
        ``(B, S)``: the weights times the pooled annotations, or the pooled images."""
        pooled = torch.bmm(alpha.unsqueeze(1), self.values).squeeze(1)  # (B, ·)
        if self.weights is None:  # W c_i = Σ_j α_ij W h_j: the images, pooled
            return pooled[:, : self.gate_width], pooled[:, self.gate_width :]
        w_gates, w_output = self.weights
        return pooled @ w_gates, pooled @ w_output


@register_model(task="translation")
class AttentionSeq2Seq(RNNTranslator):
    """Bahdanau et al. (2015) with a selectable alignment score (module doc).

    ``encode(src)`` → ``(memory (B, S, 2e), mask (B, S))``; ``decode(..., return_weights=True)``
    also returns the alignment as a one-layer, one-head list ``[(B, 1, T, S)]``, the layout of
    :meth:`~attnlab.models.Transformer.decode`'s cross-attention weights.
    """

    model_type = "attention_seq2seq"
    config_class = AttentionSeq2SeqConfig

    def __init__(self, config: AttentionSeq2SeqConfig, encoder: nn.Module | None = None) -> None:
        """``encoder``: what reads the source into the ``2e``-wide memory, by default the bi-GRU
        over the source embeddings (a recognizer passes its listener: the decoder is the same)."""
        memory_dim = 2 * config.encoder_dim
        super().__init__(config, context_dim=memory_dim)
        c = config
        self.encoder = encoder if encoder is not None else nn.GRU(
            c.embed_dim, c.encoder_dim, batch_first=True, bidirectional=True)
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

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, *,
        cache: StateCache | None = None, return_weights: bool = False, check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits ``(B, T, V_tgt)`` of ``tgt`` ``(B, T)`` attending over ``memory`` ``(B, S, 2e)``;
        with ``return_weights`` also ``[alignment (B, 1, T, S)]``. With a ``cache``, ``tgt``
        holds only the new tokens; the state and last alignment are carried over, and the keys
        and ``src_mask`` are the first step's. Every position goes through :meth:`_step`.
        ``check=False``: the caller made (or checked) ``tgt`` and ``memory`` itself."""
        if check:
            self._check_decode(tgt, memory)
        state, previous, source = self._start(memory, src_mask, cache)
        embedded = self._drop(self.tgt_embed(tgt))  # (B, T, E)
        weights, hidden, alignments = self._step_weights(cache), [], []
        for t in range(tgt.shape[1]):
            state, deep, previous = self._step(embedded[:, t], state, previous, source, weights)
            hidden.append(deep)
            alignments.append(previous)
        if cache is not None:
            cache.update(state=state, previous=previous)
            cache.offset += tgt.shape[1]
        logits = self._logits(hidden)  # (B, T, V_tgt)
        if not return_weights:
            return logits
        return logits, [torch.stack(alignments, dim=1).unsqueeze(1)]  # [(B, 1, T, S)]

    def _step(
        self, y: Tensor, state: Tensor, previous: Tensor, source: Annotations, weights: StepWeights
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One decoder step, eqs. 4-6: ``y`` ``E y_{i-1}`` ``(B, E)``, ``state`` ``s_{i-1}``
        ``(B, H)``, ``previous`` ``α_{i-1}`` ``(B, S)`` → ``(s_i (B, H), the deep output's hidden
        layer (B, E), α_i (B, S))``."""
        alpha = self.alignment(state, source.keys, source.mask, previous)  # (B, S), eq. 6
        context_gates, context_output = source.read(alpha)  # W^c c_i, W_o^c c_i: eq. 5
        state = self._recur(state, y, context_gates + weights.gates_bias, weights)  # eq. 4
        return state, self._deep(state, y, context_output + weights.output_bias, weights), alpha

    def _start(
        self, memory: Tensor, src_mask: Tensor | None, cache: StateCache | None
    ) -> tuple[Tensor, Tensor, Annotations]:
        """``(state (B, H), previous alignment (B, S), the source's Annotations)``: carried in the
        cache, or fresh at the first step, where the alignment's keys are prepared once for
        every step. A new cache keeps the mask only if some source is padded (else each step
        runs a plain softmax) and, while ``B·S ≤ 2e`` (fewer rows than ``W^c`` has columns), the
        annotations' images (:meth:`_project`)."""
        if cache is not None and "state" in cache:
            source = self._annotations(cache["keys"], cache.get("mask"), memory, cache.get("projected"))
            return cache["state"], cache["previous"], source
        if src_mask is None:  # every source position is real
            src_mask = torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)
        state = torch.tanh(self.bridge(memory[:, 0, self.config.encoder_dim :]))  # tanh(W_s h←_1): (B, H)
        previous = Alignment.initial(src_mask).to(memory.dtype)  # (B, S)
        keys = self.alignment.prepare(memory)  # (B, S, ·)
        if cache is None:
            return state, previous, self._annotations(keys, src_mask, memory)
        cache["keys"] = keys
        if not bool(src_mask.all()):
            cache["mask"] = src_mask
        if memory.shape[0] * memory.shape[1] <= memory.shape[2]:  # B·S ≤ 2e
            cache["projected"] = self._project(memory)
        return state, previous, self._annotations(keys, cache.get("mask"), memory, cache.get("projected"))

    def _annotations(
        self, keys: Tensor, mask: Tensor | None, memory: Tensor, images: Tensor | None = None
    ) -> Annotations:
        """The step's view of the source: the annotations ``memory`` with the weights that read
        ``c_i``, or their ``images`` when the cache holds them."""
        gate_width = 3 * self.config.hidden_dim
        if images is not None:
            return Annotations(keys, mask, images, gate_width)
        return Annotations(keys, mask, autocast_once(memory), gate_width, self._context_weights())

    def _project(self, memory: Tensor) -> Tensor:
        """The annotations' images under the weights that read the context, once per sentence:
        ``memory`` ``(B, S, 2e)`` → ``[W^c h_j; W_o^c h_j]`` ``(B, S, 3H + E)``. Each step then
        pools ``S`` such rows instead of multiplying ``c_i`` by the ``(3H + E) × 2e`` weights:
        cheaper while ``B·S ≤ 2e``."""
        w_gates, w_output = self._context_weights()
        return torch.cat([memory @ w_gates, memory @ w_output], dim=-1)
