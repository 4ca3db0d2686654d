"""Recurrent language models: a plain LSTM and the Long Short-Term Memory-Network (LSTMN) of
Cheng, Dong & Lapata (2016), "Long Short-Term Memory-Networks for Machine Reading", §3.1
(Ba (CSC413 Lecture 8) and López et al. (Attention Mechanisms), "intra-attention").

An LSTM carries one state ``(h_{t-1}, c_{t-1})`` from step to step. The LSTMN keeps a *tape*
of every previous hidden and memory state and replaces that single state by an
attention-weighted summary of the whole tape (Cheng et al. eqs. 13-16)::

    a_i^t = vᵀ tanh(W_h h_i + W_x x_t + W_h̃ h̃_{t-1})      i < t     (eq. 13)
    s^t   = softmax(a^t)                                            (eq. 14)
    h̃_t = Σ_i s_i^t h_i,   c̃_t = Σ_i s_i^t c_i                      (eq. 15)
    [i, f, o, ĉ] = [σ, σ, σ, tanh](W [h̃_t; x_t] + b)
    c_t = f ⊙ c̃_t + i ⊙ ĉ_t,   h_t = o ⊙ tanh(c_t)                  (eq. 16)

The gates are exactly an LSTM cell's, with ``(h̃_t, c̃_t)`` in place of ``(h_{t-1}, c_{t-1})``,
so each step is ``torch.nn.LSTMCell(x_t, (h̃_t, c̃_t))``. The tape starts with one zero state
(what an LSTM starts from), so the first step of an LSTMN is the first step of an LSTM. Step
``t`` attends over ``t`` entries: O(t) work a step, O(T²) a window, against the LSTM's O(T).
A layer reads a whole window through :class:`~attnlab.models.lstmn_window.LSTMNWindow`: the
tape preallocated, one masked matmul a step, back-propagation through time written out.

Both are decoder-only models on the seam of :class:`~attnlab.models.GPT`: ``forward(idx, *,
cache=None)`` → logits ``(B, n, V)``, ``new_cache()`` (a :class:`StateCache` with the states
or tapes), ``config.block_size`` (the window generation slides over).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.attention.masks import masked_softmax
from attnlab.attention.scoring import AdditiveScore
from attnlab.config import Config
from attnlab.memory import check_fits, sized
from attnlab.models.base import PretrainedModel, StateCache, register_model
from attnlab.models.lstmn_window import LSTMNWindow
from attnlab.validation import check_ids, check_positive, check_probability


@dataclass
class LSTMConfig(Config):
    """A character (or BPE) LSTM language model: ``num_layers`` LSTMs of width ``hidden_dim``
    over embeddings of width ``embed_dim``; ``dropout`` on the embeddings, between layers and
    before the output layer. ``block_size`` is the training window (and generation's)."""

    vocab_size: int
    block_size: int = 256
    embed_dim: int = 128
    hidden_dim: int = 512
    num_layers: int = 1
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "embed_dim", "hidden_dim", "num_layers"):
            check_positive(name, getattr(self, name))
        check_probability("dropout", self.dropout)


@dataclass
class LSTMNConfig(LSTMConfig):
    """:class:`LSTMConfig` plus ``attention_dim``, the width of the intra-attention's scoring
    network (``W_h``, ``W_x``, ``W_h̃`` and ``v`` of eq. 13)."""

    attention_dim: int = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("attention_dim", self.attention_dim)


class _RecurrentLM(PretrainedModel):
    """Embedding → recurrent layers → dropout → output layer; the layers are the subclass's."""

    def __init__(self, config: LSTMConfig) -> None:
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.embed_dim)
        self.dropout = nn.Dropout(c.dropout)
        self.output = nn.Linear(c.hidden_dim, c.vocab_size)

    def new_cache(self) -> StateCache:
        """An empty :class:`StateCache`: the states (or tapes) carried between calls."""
        return StateCache()

    def _check(self, idx: Tensor) -> None:
        check_ids("idx", idx, self.config.vocab_size)
        if idx.dim() != 2:
            raise ValueError(f"idx must be (B, n) token ids, got shape {tuple(idx.shape)}")


@register_model(task="language_model")
class LSTMLM(_RecurrentLM):
    """The LSTM baseline (Hochreiter & Schmidhuber 1997), PyTorch's fused ``nn.LSTM``."""

    model_type = "lstm"
    config_class = LSTMConfig

    def __init__(self, config: LSTMConfig) -> None:
        super().__init__(config)
        c = config
        between = c.dropout if c.num_layers > 1 else 0.0
        # its recurrent weights alone (4h × h a layer), before nn.LSTM loops over the layers
        layers = {"num_layers": c.num_layers, "4 × hidden_dim²": 4 * c.hidden_dim**2}
        check_fits([sized("recurrent weights", layers, 4)])
        self.lstm = nn.LSTM(c.embed_dim, c.hidden_dim, c.num_layers, batch_first=True, dropout=between)

    def forward(self, idx: Tensor, *, cache: StateCache | None = None, check: bool = True) -> Tensor:
        """``idx`` ``(B, n)`` → logits ``(B, n, V)``; a ``cache`` carries ``(h, c)`` on.
        ``check=False``: the caller made (or checked) ``idx`` itself."""
        if check:
            self._check(idx)
        x = self.dropout(self.embed(idx))  # (B, n, E)
        state = None
        if cache is not None and "h" in cache:  # stored batch first: (B, layers, H)
            state = (cache["h"].transpose(0, 1).contiguous(), cache["c"].transpose(0, 1).contiguous())
        out, (h, c) = self.lstm(x, state)  # (B, n, H)
        if cache is not None:
            cache["h"], cache["c"] = h.transpose(0, 1), c.transpose(0, 1)
            cache.offset += idx.shape[1]
        return self.output(self.dropout(out))  # (B, n, V)


class LSTMNLayer(nn.Module):
    """One LSTMN layer: an ``nn.LSTMCell`` whose previous state is the intra-attention summary
    of its tapes (module doc, eqs. 13-16), run over a window by
    :class:`~attnlab.models.lstmn_window.LSTMNWindow` (the tape preallocated, one masked matmul
    a step, back-propagation through time written out).

    Eq. 13 is the additive score (:class:`~attnlab.attention.scoring.AdditiveScore`) of the
    query ``h̃_{t-1}`` (``W_q = W_h̃``) against the tape's keys ``h_i`` (``W_k = W_h``,
    prepared once as each state joins the tape), with ``W_x x_t`` as its extra term; eq. 14 is
    :func:`~attnlab.attention.masks.masked_softmax` over the tape under row ``t`` of the
    causal mask (the slots written before step ``t``).
    """

    # attnlab 0.1 wrote eq. 13's weights beside the cell: W_h̃, W_h and v
    renamed_weights = {"w_s.": "score.w_q.", "w_h.": "score.w_k.", "v.": "score.w_v."}

    def __init__(self, input_dim: int, hidden_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(input_dim, hidden_dim)
        self.score = AdditiveScore(hidden_dim, hidden_dim, attention_dim)  # W_h̃, W_h, v
        self.w_x = nn.Linear(input_dim, attention_dim, bias=False)  # W_x x_t
        self.hidden_dim = hidden_dim

    def empty_tape(self, x: Tensor) -> dict[str, Tensor]:
        """The tapes before the first step, one zero state: ``h``, ``c`` ``(B, 1, H)``, their
        keys ``W_h h`` ``(B, 1, A)`` and the summary ``h̃`` ``(B, H)``."""
        zeros = x.new_zeros(x.shape[0], 1, self.hidden_dim)
        return {"h": zeros, "c": zeros, "keys": self.score.prepare(zeros), "summary": zeros[:, 0]}

    def read(self, keys: Tensor, states: Tensor, query: Tensor, step_input: Tensor,
             allowed: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One step's read of the tape (eqs. 13-15): ``keys`` ``(B, W, A)``, ``states`` ``[h; c]``
        ``(B, W, 2H)``, the query ``h̃_{t-1}`` ``(B, H)``, ``W_x x_t`` ``(B, A)`` and the slots it
        may see ``(W,)`` → ``([h̃_t; c̃_t] (B, 2H), s^t (B, W), the score's features (B, 1, W, A))``,
        ``s^t`` 0 on the unseen slots."""
        extra = step_input[:, None, None]  # (B, 1, 1, A): W_x x_t
        features = self.score.features(query.unsqueeze(1), keys, extra=extra)  # (B, 1, W, A)
        scores = self.score.w_v(features).squeeze(-1)  # (B, 1, W): eq. 13, AdditiveScore.score
        weights = masked_softmax(scores, allowed, check=False)  # (B, 1, W), eq. 14
        return torch.bmm(weights, states).squeeze(1), weights.squeeze(1), features  # eq. 15

    def forward(self, x: Tensor, tape: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        """Read ``x`` ``(B, n, D)`` onto ``tape``: ``(outputs (B, n, H), the grown tape, the
        attention rows (B, n, W))``, row ``t`` over the tape's first ``W = L + n - 1`` slots
        (``L`` entries before this call, the initial state first)."""
        cell, dtype = self.cell, self.cell.weight_hh.dtype
        with torch.autocast(x.device.type, enabled=False):
            x = x.to(dtype)
            inputs = self.w_x(x)  # (B, n, A): W_x x_t for every step at once
            found = LSTMNWindow.apply(
                self, x, inputs, *(tape[k].to(dtype) for k in TAPE), cell.weight_ih,
                cell.bias_ih + cell.bias_hh, cell.weight_hh, self.score.w_q.weight, self.score.w_k.weight,
                self.score.w_v.weight,
            )
        grown = dict(zip(TAPE, found[:4], strict=True))
        start = tape["h"].shape[1]
        return grown["h"][:, start:], grown, found[4]


TAPE = ("h", "c", "keys", "summary")  # what a layer carries from call to call


@register_model(task="language_model")
class LSTMN(_RecurrentLM):
    """Cheng et al. (2016)'s LSTMN language model: ``num_layers`` :class:`LSTMNLayer` s."""

    model_type = "lstmn"
    config_class = LSTMNConfig

    def __init__(self, config: LSTMNConfig) -> None:
        super().__init__(config)
        c = config
        widths = [c.embed_dim] + [c.hidden_dim] * (c.num_layers - 1)
        self.layers = nn.ModuleList(LSTMNLayer(w, c.hidden_dim, c.attention_dim) for w in widths)

    def forward(
        self, idx: Tensor, *, cache: StateCache | None = None, return_weights: bool = False,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``idx`` ``(B, n)`` → logits ``(B, n, V)``; a ``cache`` carries the tapes on. With
        ``return_weights`` also one ``(B, 1, n, n)`` matrix per layer: row ``t``, column ``j < t``
        is the weight of the state after token ``j`` when reading token ``t`` (the weight left
        on the initial zero state is not shown; column ``j >= t`` is 0: no look-ahead).
        ``check=False``: the caller made (or checked) ``idx`` itself."""
        if check:
            self._check(idx)
        x = self.dropout(self.embed(idx))  # (B, n, E)
        weights = []
        for number, layer in enumerate(self.layers):
            names = [f"{name}{number}" for name in TAPE]
            if cache is not None and names[0] in cache:
                tape = dict(zip(TAPE, (cache[k] for k in names), strict=True))
            else:
                tape = layer.empty_tape(x)
            start = tape["h"].shape[1]  # tape entries before this call: the initial state, earlier tokens
            out, tape, rows = layer(x, tape)
            if cache is not None:
                cache.update(zip(names, tape.values(), strict=True))
            if return_weights:
                weights.append(_square(rows, start))
            x = self.dropout(out) if number < len(self.layers) - 1 else out
        if cache is not None:
            cache.offset += idx.shape[1]
        logits = self.output(self.dropout(x))  # (B, n, V)
        return (logits, weights) if return_weights else logits


def _square(rows: Tensor, start: int) -> Tensor:
    """Attention rows ``(B, n, W)`` over the tape's slots (``start`` entries before this call)
    → ``(B, 1, n, n)`` over the tokens of this call (earlier tokens and the initial state left
    out); column ``j >= t`` of row ``t`` is 0 (masked)."""
    n = rows.shape[1]
    out = rows.new_zeros(rows.shape[0], n, n)
    out[:, :, : n - 1] = rows[:, :, start:]
    return out.unsqueeze(1)
