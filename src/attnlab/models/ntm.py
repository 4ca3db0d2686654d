"""The Neural Turing Machine of Graves, Wayne & Danihelka (2014), "Neural Turing Machines"
(Ba (CSC413 Lecture 8), "Neural Turing Machines").

A controller reads an input vector and the previous step's read vectors, and emits the
parameters of its heads; write heads erase and add to an ``N × M`` memory, read heads return
weighted sums of its rows; the output layer sees the controller state and the new reads::

    (h_t, c_t) = LSTMCell([x_t; r_{t−1}], (h_{t−1}, c_{t−1}))     controller = "lstm"
    h_t        = tanh(W_c [x_t; r_{t−1}] + b_c)                    controller = "feedforward"
    w^write_t  = address(M_{t−1}, w^write_{t−1}, heads(h_t))       eqs. 5-9
    M_t        = erase_and_add(M_{t−1}, w^write_t, e_t, a_t)        eqs. 3-4
    w^read_t   = address(M_t, w^read_{t−1}, heads(h_t))             eqs. 5-9
    r_t        = read_memory(M_t, w^read_t)                         eq. 2
    y_t        = W_y [h_t; r_t] + b_y                               (logits; σ gives the bits)

The addressing is :mod:`attnlab.attention.addressing`. Head outputs are bounded as the paper
requires: ``β = softplus``, ``g = σ``, ``s = softmax``, ``γ = 1 + softplus``, ``e = σ``,
``a = tanh``; their pre-activations are clipped to ``±clip`` (Collier & Beel 2018,
"Implementing Neural Turing Machines", keep them finite). The memory starts as a small
constant (Collier & Beel's fastest scheme), every weighting as all mass on location 0, the
read vectors as learned parameters.

The paper's two controllers (§3.3, §4): the LSTM, and a **feedforward** network — one tanh
layer with no state of its own, so everything it carries from one step to the next passes
through the memory and the read vectors (the paper's priority-sort machine, §4.5, has one, with
eight read and eight write heads). ``learned_memory`` replaces the constant start by a learned
``N × M`` memory (Collier & Beel's "learned" initialisation): its rows differ, so content
addressing (eq. 5) can tell the locations apart before anything is written — a key computed
from a priority can then pick a location by that priority (the paper's reading of its
priority-sort machine, Figure 17). On the reduced priority sort of docs/benchmarks.md the
constant start learned about as well, so it is an option, not a requirement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.addressing import address, erase_and_add, read_memory
from attnlab.config import Config
from attnlab.models.base import PretrainedModel, register_model
from attnlab.validation import check_choice, check_positive, check_sequence

CONTROLLERS = ("lstm", "feedforward")


@dataclass
class NTMConfig(Config):
    """Sizes of an NTM: ``memory_size`` N locations of ``memory_width`` M, heads, controller.

    ``shift_range`` k allows the shifts ``−k … k`` (2k + 1 ≤ N); ``clip`` bounds the heads'
    pre-activations; ``memory_init`` is the constant every memory cell starts from, unless
    ``learned_memory`` makes the start a learned parameter (drawn from N(0, memory_init_std²));
    ``controller`` is ``"lstm"`` or ``"feedforward"``.
    """

    input_dim: int = 9
    output_dim: int = 8
    controller_dim: int = 100
    memory_size: int = 128
    memory_width: int = 20
    read_heads: int = 1
    write_heads: int = 1
    shift_range: int = 1
    clip: float = 20.0
    memory_init: float = 1e-6
    controller: str = "lstm"
    learned_memory: bool = False
    memory_init_std: float = 0.5

    def __post_init__(self) -> None:
        check_choice("controller", self.controller, CONTROLLERS)
        check_positive("memory_init_std", self.memory_init_std)
        for name in ("input_dim", "output_dim", "controller_dim", "memory_size", "memory_width",
                     "read_heads", "write_heads", "shift_range", "clip"):
            check_positive(name, getattr(self, name))
        if 2 * self.shift_range + 1 > self.memory_size:
            raise ValueError(
                f"shift_range {self.shift_range} allows {2 * self.shift_range + 1} shifts but "
                f"memory_size is {self.memory_size}; need 2 * shift_range + 1 <= memory_size"
            )


class NTMTrace(NamedTuple):
    """What the heads did at every step, for the paper's pictures. ``T`` steps, ``R`` read and
    ``W`` write heads: ``read_weights (B, T, R, N)``, ``write_weights (B, T, W, N)``,
    ``erase``, ``add (B, T, W, M)``, ``memory (B, T, N, M)`` after each step's write."""

    read_weights: Tensor
    write_weights: Tensor
    erase: Tensor
    add: Tensor
    memory: Tensor


class NTMState(NamedTuple):
    """The recurrent state between steps: memory ``(B, N, M)``, reads ``(B, R, M)``, the heads'
    weightings ``(B, R, N)`` / ``(B, W, N)`` and the controller's ``(h, c)``, each ``(B, C)``
    (a feedforward controller's ``h`` is its last output, never read back; its ``c`` stays 0)."""

    memory: Tensor
    reads: Tensor
    read_weights: Tensor
    write_weights: Tensor
    h: Tensor
    c: Tensor


@register_model(task="algorithmic", default=True)
class NTM(PretrainedModel):
    """``forward(x (B, T, input_dim), return_trace=False)`` → logits ``(B, T, output_dim)``
    (and an :class:`NTMTrace` when asked). A fresh memory for every sequence."""

    model_type = "ntm"
    config_class = NTMConfig

    def __init__(self, config: NTMConfig) -> None:
        super().__init__()
        self.config = c = config
        self.address_width = c.memory_width + 3 + (2 * c.shift_range + 1)  # k, β, g, s, γ
        reads = c.read_heads * c.memory_width
        cell = nn.LSTMCell if c.controller == "lstm" else nn.Linear
        self.controller = cell(c.input_dim + reads, c.controller_dim)
        self.read_head = nn.Linear(c.controller_dim, c.read_heads * self.address_width)
        self.write_head = nn.Linear(
            c.controller_dim, c.write_heads * (self.address_width + 2 * c.memory_width)
        )
        self.output = nn.Linear(c.controller_dim + reads, c.output_dim)
        self.initial_reads = nn.Parameter(torch.randn(c.read_heads, c.memory_width).mul_(0.01))
        if c.learned_memory:
            self.initial_memory = nn.Parameter(
                torch.randn(c.memory_size, c.memory_width).mul_(c.memory_init_std)
            )

    def initial_state(self, batch: int) -> NTMState:
        """The state before the first step: constant (or learned) memory, every head on location 0."""
        c, like = self.config, self.initial_reads
        if c.learned_memory:
            memory = self.initial_memory.expand(batch, -1, -1)
        else:
            memory = like.new_full((batch, c.memory_size, c.memory_width), c.memory_init)
        start = like.new_zeros(c.memory_size)
        start[0] = 1.0
        zeros = like.new_zeros(batch, c.controller_dim)
        return NTMState(
            memory=memory,
            reads=self.initial_reads.expand(batch, -1, -1),
            read_weights=start.expand(batch, c.read_heads, -1),
            write_weights=start.expand(batch, c.write_heads, -1),
            h=zeros,
            c=zeros,
        )

    def _addressing(self, params: Tensor, memory: Tensor, previous: Tensor) -> Tensor:
        """Split ``params (B, H, address_width)`` into k, β, g, s, γ, bound them, address."""
        m, shifts = self.config.memory_width, 2 * self.config.shift_range + 1
        key, beta, gate, shift, gamma = params.split([m, 1, 1, shifts, 1], dim=-1)
        return address(
            memory, previous, key,
            strength=F.softplus(beta.squeeze(-1)),
            gate=torch.sigmoid(gate.squeeze(-1)),
            shift=torch.softmax(shift, dim=-1),
            gamma=1 + F.softplus(gamma.squeeze(-1)),
            check=False,  # shapes this model made, every step; forward checked its input
        )

    def step(self, x: Tensor, state: NTMState) -> tuple[Tensor, NTMState, Tensor, Tensor]:
        """One time step: ``x (B, input_dim)`` → logits ``(B, output_dim)``, the new state, and
        the write head's erase and add vectors ``(B, W, M)`` (for the trace). Trusts its caller
        (:meth:`forward` checks the input; the state is the machine's own)."""
        c, batch = self.config, x.shape[0]
        seen = torch.cat([x, state.reads.flatten(1)], dim=-1)
        if c.controller == "lstm":
            h, cell = self.controller(seen, (state.h, state.c))
        else:
            h, cell = torch.tanh(self.controller(seen)), state.c
        write = self.write_head(h).clamp(-c.clip, c.clip).view(batch, c.write_heads, -1)
        write_params, erase, add = write.split([self.address_width, c.memory_width, c.memory_width], -1)
        write_weights = self._addressing(write_params, state.memory, state.write_weights)
        erase, add = torch.sigmoid(erase), torch.tanh(add)
        memory = erase_and_add(state.memory, write_weights, erase, add, check=False)
        read_params = self.read_head(h).clamp(-c.clip, c.clip).view(batch, c.read_heads, -1)
        read_weights = self._addressing(read_params, memory, state.read_weights)
        reads = read_memory(memory, read_weights, check=False)  # (B, R, M)
        logits = self.output(torch.cat([h, reads.flatten(1)], dim=-1))
        return logits, NTMState(memory, reads, read_weights, write_weights, h, cell), erase, add

    def forward(self, x: Tensor, *, return_trace: bool = False) -> Tensor | tuple[Tensor, NTMTrace]:
        """Run the machine over ``x (B, T, input_dim)`` from a fresh memory → ``(B, T, output_dim)``."""
        check_sequence(x, self.config.input_dim)
        state = self.initial_state(x.shape[0])
        logits, steps = [], []
        for t in range(x.shape[1]):
            out, state, erase, add = self.step(x[:, t], state)
            logits.append(out)
            if return_trace:
                steps.append((state.read_weights, state.write_weights, erase, add, state.memory))
        logits = torch.stack(logits, dim=1)
        if not return_trace:
            return logits
        return logits, NTMTrace(*(torch.stack(parts, dim=1) for parts in zip(*steps, strict=True)))

