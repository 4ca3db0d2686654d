"""Maximum flow by Edmonds–Karp: push flow along a shortest augmenting path of the residual
network, found by breadth-first search, until the sink can no longer be reached (Edmonds &
Karp 1972, "Theoretical Improvements in Algorithmic Efficiency for Network Flow Problems";
Cormen, Leiserson, Rivest & Stein, "Introduction to Algorithms", §26.2, "The Ford-Fulkerson
method"). Attention flow (:func:`attnlab.explain.rollout.attention_flow`) is one maximum flow
a pair of tokens through the layers' attention graph.

A network is a mapping ``capacity[u][v] ≥ 0`` over hashable nodes (a missing edge has capacity
0). Capacities are real numbers: a path is augmented while its bottleneck exceeds
``tolerance``, so float rounding cannot make the loop run on crumbs. The result's ``flow[u][v]``
is the net flow on each edge: ``0 ≤ flow ≤ capacity``, and into every node other than the
source and the sink as much flows in as out (the max-flow min-cut theorem: its value equals the
capacity of the smallest cut).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from typing import NamedTuple

__all__ = ["Flow", "max_flow"]

Network = Mapping[Hashable, Mapping[Hashable, float]]


class Flow(NamedTuple):
    """A maximum flow: its ``value`` and the flow on each edge ``flow[u][v]`` (edges that carry some)."""

    value: float
    flow: dict[Hashable, dict[Hashable, float]]


def _reachable(capacity: Network, source: Hashable) -> set[Hashable]:
    """The nodes a path of edges with positive capacity leads to from ``source`` (and it)."""
    seen, queue = {source}, deque([source])
    while queue:
        for v, c in capacity.get(queue.popleft(), {}).items():
            if c > 0 and v not in seen:
                seen.add(v)
                queue.append(v)
    return seen


def _residual(capacity: Network, nodes: set[Hashable]) -> dict[Hashable, dict[Hashable, float]]:
    """The residual network of the zero flow among ``nodes``: each edge's capacity and a
    reverse edge of 0 (no flow can reach the other nodes, so they are left out)."""
    residual: dict[Hashable, dict[Hashable, float]] = {u: {} for u in nodes}
    for u in nodes:
        for v, c in capacity.get(u, {}).items():
            if v not in nodes:
                continue
            residual[u][v] = float(c)
            residual[v].setdefault(u, 0.0)
    return residual


def _shortest_path(residual: dict, source: Hashable, sink: Hashable, tolerance: float) -> dict | None:
    """Breadth-first search from ``source`` over edges with residual capacity above
    ``tolerance``: each reached node's predecessor, or ``None`` when ``sink`` is not reached."""
    parent = {source: source}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v, c in residual[u].items():
            if c > tolerance and v not in parent:
                parent[v] = u
                if v == sink:
                    return parent
                queue.append(v)
    return None


def max_flow(capacity: Network, source: Hashable, sink: Hashable, *, tolerance: float = 1e-12) -> Flow:
    """The maximum flow from ``source`` to ``sink`` in the network ``capacity[u][v]``.

    Each round finds a shortest path with spare capacity (Edmonds–Karp: O(V E²) in all),
    pushes its bottleneck along it and takes as much back from the reverse edges. A ``source``
    or ``sink`` that is no node of the network carries no flow (value 0).
    """
    if source == sink:
        raise ValueError(f"source and sink must differ, got {source!r} for both")
    for u, edges in capacity.items():
        for v, c in edges.items():
            if c < 0:
                raise ValueError(f"capacity[{u!r}][{v!r}] must be >= 0, got {c}")
    nodes = _reachable(capacity, source)
    if sink not in nodes:
        return Flow(0.0, {})
    residual = _residual(capacity, nodes)
    value = 0.0
    while (parent := _shortest_path(residual, source, sink, tolerance)) is not None:
        path, v = [], sink
        while v != source:
            path.append((parent[v], v))
            v = parent[v]
        push = min(residual[u][v] for u, v in path)
        for u, v in path:
            residual[u][v] -= push
            residual[v][u] += push
        value += push
    return Flow(value, _net_flow(capacity, residual))


def _net_flow(capacity: Network, residual: dict) -> dict[Hashable, dict[Hashable, float]]:
    """The net flow on each edge: what its residual capacity lost. Of two opposite edges at
    most one carries net flow (``residual[u][v] + residual[v][u]`` stays ``c(u, v) + c(v, u)``)."""
    flow: dict[Hashable, dict[Hashable, float]] = {}
    for u in residual:
        for v, c in capacity.get(u, {}).items():
            if v not in residual:
                continue
            used = float(c) - residual[u][v]
            if used > 0:
                flow.setdefault(u, {})[v] = used
    return flow
