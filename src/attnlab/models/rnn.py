"""RNN encoder-decoders: what they share, and the fixed context vector of Cho et al. (2014)
(Hasegawa-Johnson (ECE 417 Lecture 21), "Attention"; López et al. (Attention Mechanisms); Ba
(CSC413 Lecture 8)).

    :class:`RNNSeq2Seq` (Cho, van Merriënboer, Gulcehre, Bahdanau, Bougares, Schwenk & Bengio
    2014, "Learning Phrase Representations using RNN Encoder-Decoder", §2.2):
        src → GRU → last state h_S → c = tanh(V h_S)                      one vector (B, 1, H)
        s_0 = tanh(V' c);  s_i = GRU(s_{i-1}, [E y_{i-1}; c])
        p(y_i | ...) = softmax(E_out tanh(W_o [s_i; c; E y_{i-1}]))         (deep output)

The attention decoder of Bahdanau et al. (2015) is :mod:`attnlab.models.attention_seq2seq`;
both build on :class:`RNNTranslator`: embeddings, a GRU encoder over packed sequences (a padded
position never enters a GRU, and a GRU reads any length), a decoder GRU cell and the deep
output. Each decoder has one step function (``_step``), used by teacher forcing and decoding
alike; what depends on the source alone is computed once per sentence and, when decoding, kept
in a :class:`~attnlab.models.base.StateCache`. The GRU cell and the deep output read their
inputs ``[E y; c]`` and ``[s; c; E y]`` through one weight matrix each, so ``W [E y; c] =
W^y E y + W^c c``: a step multiplies its own inputs by their column blocks
(:class:`StepWeights`) and adds the context's part, which for Cho's model (one context vector
``c``) is a per-sentence term (:meth:`RNNSeq2Seq._context_terms`). ``decode`` checks its
arguments, unless a caller that made them passes ``check=False``; the layers below trust it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.config import Config
from attnlab.models.base import PretrainedModel, StateCache, register_model
from attnlab.validation import check_ids, check_positive, check_probability, check_rank, check_vocabularies


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


def gru_step(input_gates: Tensor, state: Tensor, w_hh: Tensor, b_hh: Tensor) -> Tensor:
    """One GRU step from input gates computed elsewhere (Cho et al. 2014, eqs. 5-8, in
    ``nn.GRU``'s gate order r, z, n): ``input_gates`` ``W x + b_ih`` ``(B, 3H)``, ``state`` ``s``
    ``(B, H)``, ``w_hh`` ``(3H, H)``, ``b_hh`` ``(3H,)`` → the next state ``(B, H)``::

        r, z = σ(W_r x + U_r s),  σ(W_z x + U_z s)
        n = tanh(W_n x + r ⊙ (U_n s)),  s' = (1 − z) ⊙ n + z ⊙ s

    Equal to ``nn.GRUCell`` to rounding; lets a caller add a constant part of ``W x`` once.
    """
    x_r, x_z, x_n = input_gates.chunk(3, dim=1)  # (B, H) each: W_r x, W_z x, W_n x (+ b_ih)
    s_r, s_z, s_n = torch.addmm(b_hh, state, w_hh.t()).chunk(3, dim=1)  # U s + b_hh, (B, H) each
    r, z = torch.sigmoid(x_r + s_r), torch.sigmoid(x_z + s_z)  # (B, H)
    n = torch.tanh(torch.addcmul(x_n, r, s_n))  # (B, H)
    return torch.lerp(n, state, z)  # (B, H): n + z ⊙ (s − n)


def autocast_once(x: Tensor) -> Tensor:
    """``x`` in autocast's precision while autocast is on (else ``x``): for a tensor that every
    decoder step multiplies, cast once per call instead of by autocast at every step (autocast
    caches the casts of parameters, not of their views nor of activations)."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        return x.to(torch.get_autocast_dtype(device))
    return x


class StepWeights(NamedTuple):
    """The parameters a decoder step reads, gathered once per call: what it multiplies its own
    inputs ``E y_{i-1}`` and ``s`` by — transposed views of column blocks of the GRU cell's
    ``W [E y; c]`` and of the deep output's ``W_o [s; c; E y]``, ``gates_y`` ``(E, 3H)``,
    ``output_s`` ``(H, E)``, ``output_y`` ``(E, E)``, and the cell's ``U`` ``(3H, H)`` —
    and the biases ``b_ih``, ``b_hh`` ``(3H,)`` and ``b_o`` ``(E,)``."""

    gates_y: Tensor
    gates_bias: Tensor
    recurrent: Tensor
    recurrent_bias: Tensor
    output_s: Tensor
    output_y: Tensor
    output_bias: Tensor


class RNNTranslator(PretrainedModel):
    """What both RNN encoder-decoders share: embeddings, the packed encoder pass, the decoder's
    GRU cell over ``[E y_{i-1}; c_i]`` (``context_dim`` wide ``c``), the deep output layer,
    teacher-forced ``forward`` and the checks at ``decode``."""

    def __init__(self, config: RNNSeq2SeqConfig, context_dim: int) -> None:
        super().__init__()
        self.config = c = config
        self.context_dim = context_dim
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
        """The checks of ``decode``, the decoder's entry point (the layers below trust it)."""
        check_ids("tgt", tgt, self.config.tgt_vocab_size)
        check_rank("memory", memory, 3, "(B, S, d)")
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"memory has batch size {memory.shape[0]} but tgt has batch size {tgt.shape[0]}"
            )

    def _weights(self) -> StepWeights:
        """The views of the weights every decoder step multiplies (:class:`StepWeights`)."""
        e, h, cell, deep = self.config.embed_dim, self.config.hidden_dim, self.cell, self.deep_output
        w_ih, w_o = autocast_once(cell.weight_ih), autocast_once(deep.weight)
        return StepWeights(
            w_ih[:, :e].t(), cell.bias_ih, cell.weight_hh, cell.bias_hh,
            w_o[:, :h].t(), w_o[:, h + self.context_dim :].t(), deep.bias,
        )

    def _context_weights(self) -> tuple[Tensor, Tensor]:
        """The weights that read the context ``c``, transposed: ``W^c`` ``(C, 3H)`` and ``W_o^c``
        ``(C, E)``, the ``c`` columns of the GRU's ``W [E y; c]`` and the deep output's
        ``W_o [s; c; E y]``."""
        e, h = self.config.embed_dim, self.config.hidden_dim
        w_ih, w_o = autocast_once(self.cell.weight_ih), autocast_once(self.deep_output.weight)
        return w_ih[:, e:].t(), w_o[:, h : h + self.context_dim].t()

    def _recur(self, state: Tensor, y: Tensor, context_gates: Tensor, weights: StepWeights) -> Tensor:
        """``s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])``: ``state`` ``(B, H)``, ``y`` ``E y_{i-1}``
        ``(B, E)``, ``context_gates`` the context's part of the input gates ``W^c c_i + b_ih``
        ``(B, 3H)`` → ``s_i`` ``(B, H)``."""
        gates = torch.addmm(context_gates, y, weights.gates_y)  # (B, 3H): W [E y; c] + b_ih
        return gru_step(gates, state, weights.recurrent, weights.recurrent_bias)

    def _deep(self, state: Tensor, y: Tensor, context_output: Tensor, weights: StepWeights) -> Tensor:
        """The deep output's hidden layer ``tanh(W_o [s_i; c_i; E y_{i-1}] + b_o)`` (Bahdanau et
        al. appendix A.2.2, with tanh in place of maxout), given the context's part ``W_o^c c_i
        + b_o`` ``(B, E)`` → ``(B, E)``."""
        hidden = torch.addmm(torch.addmm(context_output, state, weights.output_s), y, weights.output_y)
        return torch.tanh(hidden)

    def _logits(self, hidden: list[Tensor]) -> Tensor:
        """``E_out`` over the deep output's hidden layers, ``T`` of ``(B, E)`` → ``(B, T, V_tgt)``."""
        return self.output(self._drop(torch.stack(hidden, dim=1)))

    def new_cache(self) -> StateCache:
        """An empty :class:`StateCache` for :meth:`decode`."""
        return StateCache()

    def _step_weights(self, cache: StateCache | None) -> StepWeights:
        """:meth:`_weights`, gathered once per decoding when there is a ``cache``."""
        if cache is None:
            return self._weights()
        if cache.weights is None:
            cache.weights = self._weights()
        return cache.weights

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: ``src`` ``(B, S)``, ``tgt_in`` ``(B, T)`` ids → logits ``(B, T, V_tgt)``."""
        check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"tgt_in has batch size {tgt_in.shape[0]} but src has batch size {src.shape[0]}"
            )
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask, check=False)


@register_model(task="translation")
class RNNSeq2Seq(RNNTranslator):
    """Cho et al. (2014): the whole source squeezed into one context vector (module doc).

    ``encode(src)`` returns that vector as a one-position memory ``(B, 1, H)`` (mask all
    True); ``decode`` has no attention to return (no ``return_weights``).
    """

    model_type = "rnn_seq2seq"
    config_class = RNNSeq2SeqConfig
    # attnlab 0.1 ran the decoder as a one-layer nn.GRU; it is stepped as a cell now
    renamed_weights = {f"decoder.{name}_l0": f"cell.{name}"
                       for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__(config, context_dim=config.hidden_dim)
        c = config
        self.encoder = nn.GRU(c.embed_dim, c.hidden_dim, batch_first=True)
        self.context = nn.Linear(c.hidden_dim, c.hidden_dim)  # c = tanh(V h_S)
        self.bridge = nn.Linear(c.hidden_dim, c.hidden_dim)  # s_0 = tanh(V' c)
        self.cell = nn.GRUCell(c.embed_dim + c.hidden_dim, c.hidden_dim)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """``src`` ``(B, S)`` → ``(context (B, 1, H), mask (B, 1))``."""
        _, last, _ = self._encode_packed(self.encoder, src)  # last (1, B, H)
        context = torch.tanh(self.context(last[-1]))  # (B, H)
        return context.unsqueeze(1), torch.ones(src.shape[0], 1, dtype=torch.bool, device=src.device)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, *,
        cache: StateCache | None = None, check: bool = True,
    ) -> Tensor:
        """Logits ``(B, T, V_tgt)`` of ``tgt`` ``(B, T)`` given the context ``memory`` ``(B, 1, H)``;
        with a ``cache``, ``tgt`` holds only the new tokens and the state is carried over. Every
        position goes through :meth:`_step`. There are no attention weights to return: the
        decoder sees one fixed context vector.
        ``check=False``: the caller made (or checked) ``tgt`` and ``memory`` itself."""
        if check:
            self._check_decode(tgt, memory)
        embedded = self._drop(self.tgt_embed(tgt))  # (B, T, E)
        terms = cache if cache is not None and "state" in cache else self._context_terms(memory[:, 0])
        weights, state, hidden = self._step_weights(cache), terms["state"], []
        for t in range(tgt.shape[1]):
            state, deep = self._step(embedded[:, t], state, terms, weights)
            hidden.append(deep)
        if cache is not None:
            cache.update(terms, state=state)
            cache.offset += tgt.shape[1]
        return self._logits(hidden)

    def _step(
        self, y: Tensor, state: Tensor, terms: dict[str, Tensor], weights: StepWeights
    ) -> tuple[Tensor, Tensor]:
        """One decoder step: ``y`` ``E y_{i-1}`` ``(B, E)``, ``state`` ``s_{i-1}`` ``(B, H)`` and
        the sentence's :meth:`_context_terms` → ``(s_i, the deep output's hidden layer (B, E))``."""
        state = self._recur(state, y, terms["context_gates"], weights)  # GRU(s_{i-1}, [E y; c])
        return state, self._deep(state, y, terms["context_output"], weights)

    def _context_terms(self, context: Tensor) -> dict[str, Tensor]:
        """What depends on the context vector ``c`` ``(B, H)`` alone, once per sentence: ``s_0``,
        the GRU's ``W^c c + b_ih`` ``(B, 3H)`` and the deep output's ``W_o^c c + b_o`` ``(B, E)``."""
        w_gates, w_output = self._context_weights()
        return {
            "state": torch.tanh(self.bridge(context)),  # (B, H)
            "context_gates": torch.addmm(self.cell.bias_ih, context, w_gates),  # (B, 3H)
            "context_output": torch.addmm(self.deep_output.bias, context, w_output),  # (B, E)
        }
