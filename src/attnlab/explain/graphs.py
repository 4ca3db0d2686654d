"""A model's attention as the square stack that rollout and flow read
(:mod:`attnlab.explain.rollout`; Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers", §3, where the stack is a Transformer encoder's self-attention).

Two other shapes of attention are put into that form here, over one token set per model:

* an **encoder-decoder Transformer** (Vaswani et al. 2017; Ba (CSC413 Lecture 8),
  "Attention is All You Need"): the tokens are the ``S`` source then the ``T`` target
  positions. Each encoder layer mixes the sources (the targets stay); each decoder layer is
  two maps, its causal self-attention over the targets, then its cross-attention from every
  target to the encoder's output (the sources stay): ``L_e + 2 L_d`` maps of ``(S + T)²``
  (:func:`encoder_decoder_graph`);
* a **recurrent decoder that attends once a step** — Bahdanau's translator, Show, Attend and
  Tell's captioner over the image grid, the Neural Turing Machine's read head over memory
  (Ba (CSC413 Lecture 8), "Attention-Based Machine Translation", "Attention-Based Caption
  Generation", "Neural Turing Machines"): the tokens are the ``N`` locations it reads and one
  more, the decoder's state. At step ``t`` the state reads the locations with ``α_t`` and
  keeps its own past (the residual ``0.5 I`` of rollout is the recurrence); the locations
  stay as they are. ``T`` maps of ``(N + 1)²``, the state the last token
  (:func:`recurrent_graph`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnlab.validation import check_rank, shape_str

__all__ = ["encoder_decoder_graph", "recurrent_graph"]


def _float64(name: str, x: Tensor | np.ndarray, ranks: tuple[int, ...], what: str) -> np.ndarray:
    x = torch.as_tensor(x).detach().to("cpu", torch.float64)
    check_rank(name, x, ranks, what)
    return x.numpy()


def _heads_mean(name: str, x: Tensor | np.ndarray) -> np.ndarray:
    """``(L, H, q, k)`` → ``(L, q, k)``, the heads averaged."""
    return _float64(name, x, (4,), "(L, H, n_q, n_k)").mean(axis=1)


def recurrent_graph(alphas: Tensor | np.ndarray, initial: Tensor | np.ndarray | None = None) -> np.ndarray:
    """``alphas`` ``(T, N)``: the weights a recurrent decoder put on ``N`` locations at each of
    its ``T`` steps → ``(T, N + 1, N + 1)`` maps (one more first map when ``initial`` ``(N,)``,
    the weights its starting state read, e.g. Show, Attend and Tell's mean annotation ``ā``):
    row ``N`` (the state) reads the locations with ``α_t`` and puts nothing on itself; row
    ``j < N`` is location ``j`` itself."""
    steps = _float64("alphas", alphas, (2,), "(T, N)")
    if initial is not None:
        start = _float64("initial", initial, (1,), "(N,)")
        if start.shape[0] != steps.shape[1]:
            raise ValueError(f"initial has {start.shape[0]} locations but alphas {shape_str(steps.shape)}")
        steps = np.concatenate([start[None], steps])
    count, locations = steps.shape
    maps = np.zeros((count, locations + 1, locations + 1))
    maps[:, np.arange(locations), np.arange(locations)] = 1.0
    maps[:, locations, :locations] = steps
    return maps


def encoder_decoder_graph(
    encoder_self: Tensor | np.ndarray, decoder_self: Tensor | np.ndarray, cross: Tensor | np.ndarray
) -> np.ndarray:
    """``encoder_self`` ``(L_e, H, S, S)``, ``decoder_self`` ``(L_d, H, T, T)`` and ``cross``
    ``(L_d, H, T, S)`` → ``(L_e + 2 L_d, S + T, S + T)`` maps over the sources then the targets,
    heads averaged: the encoder layers, then each decoder layer's self- and cross-attention."""
    enc, dec, crs = (_heads_mean(n, x) for n, x in
                     (("encoder_self", encoder_self), ("decoder_self", decoder_self), ("cross", cross)))
    source, target = enc.shape[-1], dec.shape[-1]
    if enc.shape[-2] != source or dec.shape[-2] != target:
        raise ValueError(f"self-attention maps must be square, got encoder {shape_str(enc.shape)} and "
                         f"decoder {shape_str(dec.shape)}")
    if crs.shape[0] != dec.shape[0] or crs.shape[-2:] != (target, source):
        raise ValueError(f"cross must be ({dec.shape[0]}, H, {target}, {source}) for these self-attention "
                         f"maps, got {shape_str(torch.as_tensor(cross).shape)}")
    n = source + target
    maps = []
    for layer in enc:
        m = np.eye(n)
        m[:source, :source] = layer
        maps.append(m)
    for own, reads in zip(dec, crs, strict=True):
        m = np.eye(n)
        m[source:, source:] = own
        maps.append(m)
        m = np.eye(n)
        m[source:, source:] = 0.0
        m[source:, :source] = reads
        maps.append(m)
    return np.stack(maps)
