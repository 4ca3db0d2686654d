"""Attention rollout and attention flow over a stack of attention maps (Abnar & Zuidema 2020,
"Quantifying Attention Flow in Transformers", §3).

A stack ``maps`` ``(L, H, n, n)`` (or ``(L, n, n)``, one head) holds layer ℓ's weights: row
``i`` is token ``i`` of the layer's output, column ``j`` token ``j`` of its input (the output of
layer ℓ − 1). The heads are averaged. The residual connection carries each token past the
attention, so, as in the paper, a layer's graph is ``Â_ℓ = 0.5 A_ℓ + 0.5 I`` with its rows
normalised again to sum to 1 (:func:`with_residual`). Then, for output token ``i`` of the last
layer and input token ``j`` of the first:

* **rollout** ``R = Â_L Â_{L−1} ··· Â_1`` ``(n, n)``: ``R[i, j]`` is the share of ``j`` in
  ``i`` if every layer mixed its inputs linearly with those weights (the paper's eq. 1);
* **flow** ``F[i, j]``: the maximum flow from node ``(0, j)`` to node ``(L, i)`` of the layered
  graph whose edges ``(ℓ − 1, j) → (ℓ, i)`` have capacity ``Â_ℓ[i, j]`` — the most "attention"
  that can travel from ``j`` to ``i`` when every edge is a pipe of that capacity
  (:func:`attnlab.explain.maxflow.max_flow`, one flow a pair).

Both are computed in float64. An identity stack (every token attends to itself) rolls out and
flows to the identity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from attnlab.explain.maxflow import max_flow
from attnlab.validation import check_rank, shape_str

__all__ = ["attention_flow", "attention_rollout", "layer_maps", "layered_network", "with_residual"]


def layer_maps(maps: Tensor | np.ndarray) -> np.ndarray:
    """``maps`` ``(L, H, n, n)`` or ``(L, n, n)`` → ``(L, n, n)`` float64, the heads averaged.
    ``ValueError`` for another rank, no layer, non-square maps or negative weights."""
    maps = torch.as_tensor(maps).detach().to("cpu", torch.float64)
    check_rank("maps", maps, (3, 4), "(L, H, n, n) or (L, n, n)")
    if maps.shape[0] == 0:
        raise ValueError(f"maps must hold at least one layer, got {shape_str(maps.shape)}")
    if maps.ndim == 4:
        maps = maps.mean(dim=1)
    if maps.shape[-1] != maps.shape[-2]:
        raise ValueError(f"maps must be square (L, n, n) over one token set, got {shape_str(maps.shape)}")
    if bool((maps < 0).any()):
        raise ValueError(f"maps must hold attention weights >= 0, got a minimum of {float(maps.min()):.3g}")
    return maps.numpy()


def with_residual(maps: np.ndarray, share: float = 0.5) -> np.ndarray:
    """``Â = share · A + (1 − share) · I`` of each ``(n, n)`` layer, rows normalised to sum to 1
    (rows of ``A`` that sum to 1 stay normalised; a row of zeros becomes the token itself)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    mixed = share * maps + (1.0 - share) * np.eye(maps.shape[-1])
    return mixed / mixed.sum(axis=-1, keepdims=True)


def attention_rollout(maps: Tensor | np.ndarray, *, residual: bool = True) -> np.ndarray:
    """``R = Â_L ··· Â_1`` ``(n, n)`` of ``maps`` ``(L, H, n, n)`` / ``(L, n, n)``; row ``i`` the
    last layer's token ``i``, column ``j`` the first layer's input token ``j``. ``residual``:
    use ``Â = 0.5 A + 0.5 I`` (the paper), else the raw maps."""
    layers = layer_maps(maps)
    layers = with_residual(layers) if residual else layers
    rollout = np.eye(layers.shape[-1])
    for layer in layers:
        rollout = layer @ rollout
    return rollout


def layered_network(layers: np.ndarray, sink: int) -> tuple[dict, list[int]]:
    """The layered graph of ``layers`` ``(L, n, n)`` (capacities ``layers[ℓ − 1][i, j]`` on the
    edges ``(ℓ − 1, j) → (ℓ, i)``), kept to the nodes from which ``(L, sink)`` can be reached;
    and the input tokens ``j`` whose node ``(0, j)`` is among them."""
    network: dict[tuple[int, int], dict[tuple[int, int], float]] = {}
    alive = [sink]
    depth = layers.shape[0]
    for level in range(depth, 0, -1):
        below: set[int] = set()
        for i in alive:
            for j in np.flatnonzero(layers[level - 1][i] > 0).tolist():
                network.setdefault((level - 1, j), {})[(level, i)] = float(layers[level - 1][i, j])
                below.add(j)
        alive = sorted(below)
    return network, alive


def attention_flow(
    maps: Tensor | np.ndarray, outputs: Sequence[int] | None = None, inputs: Sequence[int] | None = None,
    *, residual: bool = True,
) -> np.ndarray:
    """``F[i, j]`` ``(len(outputs), n)``: the maximum flow from input token ``j`` to each output
    token ``i`` of ``outputs`` (default: every token) through the layered graph of ``maps``
    ``(L, H, n, n)`` / ``(L, n, n)``, with the residual ``Â`` (``residual``); only the columns
    of ``inputs`` are computed (default: every token), the others are 0."""
    layers = layer_maps(maps)
    layers = with_residual(layers) if residual else layers
    depth, n = layers.shape[0], layers.shape[-1]
    outputs = list(range(n)) if outputs is None else list(outputs)
    wanted = set(range(n) if inputs is None else inputs)
    for name, tokens in (("outputs", outputs), ("inputs", wanted)):
        for i in tokens:
            if not 0 <= i < n:
                raise ValueError(f"{name} must be token indices in [0, {n}), got {i}")
    flows = np.zeros((len(outputs), n))
    for row, i in enumerate(outputs):
        network, sources = layered_network(layers, i)
        for j in sources:
            if j in wanted:
                flows[row, j] = max_flow(network, (0, j), (depth, i)).value
    return flows
