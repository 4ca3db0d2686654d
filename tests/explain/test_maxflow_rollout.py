"""Edmonds–Karp against a hand-computed network, brute-force minimum cuts and networkx;
attention rollout against a float64 NumPy product; attention flow against a brute-force
minimum cut of the layered graph; both of identity attention equal to the identity."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from attnlab.explain import attention_flow, attention_rollout, layer_maps, max_flow, with_residual


def min_cut(capacity: dict, source, sink) -> float:
    """The capacity of the smallest source–sink cut, every cut enumerated (max-flow min-cut)."""
    nodes = set(capacity) | {v for edges in capacity.values() for v in edges}
    inner = sorted(nodes - {source, sink}, key=str)
    best = float("inf")
    for r in range(len(inner) + 1):
        for chosen in itertools.combinations(inner, r):
            side = {source, *chosen}
            cut = sum(c for u in side for v, c in capacity.get(u, {}).items() if v not in side)
            best = min(best, cut)
    return best


def random_network(rng: np.random.Generator, nodes: int, density: float) -> dict:
    return {u: {v: float(rng.uniform(0, 5)) for v in range(nodes) if v != u and rng.random() < density}
            for u in range(nodes)}


def test_the_textbook_network_carries_23():
    # Cormen, Leiserson, Rivest & Stein, "Introduction to Algorithms", Figure 26.1: max flow 23
    capacity = {"s": {"v1": 16, "v2": 13}, "v1": {"v3": 12}, "v2": {"v1": 4, "v4": 14},
                "v3": {"v2": 9, "t": 20}, "v4": {"v3": 7, "t": 4}}
    flow = max_flow(capacity, "s", "t")
    assert flow.value == pytest.approx(23.0)
    assert sum(flow.flow["s"].values()) == pytest.approx(23.0)


@pytest.mark.parametrize("seed", range(12))
def test_max_flow_equals_the_smallest_cut_and_respects_every_edge(seed):
    rng = np.random.default_rng(seed)
    capacity = random_network(rng, 7, 0.45)
    flow = max_flow(capacity, 0, 6)
    assert flow.value == pytest.approx(min_cut(capacity, 0, 6), abs=1e-9)
    for u, edges in flow.flow.items():
        for v, f in edges.items():
            assert 0 < f <= capacity[u][v] + 1e-9
    for node in range(1, 6):  # conservation away from the source and the sink
        into = sum(edges.get(node, 0.0) for edges in flow.flow.values())
        assert into == pytest.approx(sum(flow.flow.get(node, {}).values()), abs=1e-9)
    assert sum(flow.flow.get(0, {}).values()) == pytest.approx(flow.value)


def test_max_flow_equals_networkx_on_larger_networks():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(7)
    for _ in range(5):
        capacity = random_network(rng, 25, 0.2)
        graph = nx.DiGraph()
        graph.add_nodes_from(range(25))
        graph.add_weighted_edges_from(((u, v, c) for u, e in capacity.items() for v, c in e.items()),
                                      weight="capacity")
        assert max_flow(capacity, 0, 24).value == pytest.approx(nx.maximum_flow_value(graph, 0, 24), rel=1e-9)


def test_an_unreachable_sink_gets_nothing_and_bad_networks_are_named():
    assert max_flow({"a": {"b": 1.0}, "c": {"d": 2.0}}, "a", "d").value == 0.0
    with pytest.raises(ValueError, match=r"capacity\['a'\]\['b'\] must be >= 0, got -1"):
        max_flow({"a": {"b": -1}}, "a", "b")
    with pytest.raises(ValueError, match="source and sink must differ"):
        max_flow({"a": {"b": 1}}, "a", "a")


def random_maps(seed: int, layers: int = 3, heads: int = 2, n: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(2 * torch.randn(layers, heads, n, n, generator=gen), dim=-1)


def test_rollout_equals_a_float64_product_of_the_residual_maps():
    maps = random_maps(0)
    a = maps.double().numpy().mean(axis=1)  # (L, n, n)
    hat = [(0.5 * m + 0.5 * np.eye(4)) / (0.5 * m + 0.5 * np.eye(4)).sum(1, keepdims=True) for m in a]
    expected = np.linalg.multi_dot(hat[::-1])
    assert np.allclose(attention_rollout(maps), expected, atol=1e-12)
    raw = np.linalg.multi_dot(list(a[::-1]))
    assert np.allclose(attention_rollout(maps, residual=False), raw, atol=1e-12)
    assert np.allclose(attention_rollout(maps).sum(-1), 1.0)


def layered_min_cut(maps: np.ndarray, i: int, j: int) -> float:
    """The smallest cut between (0, j) and (L, i) of the layered graph, built here on its own."""
    depth, n = maps.shape[0], maps.shape[-1]
    capacity = {(l - 1, b): {(l, a): maps[l - 1][a, b] for a in range(n)} for l in range(1, depth + 1)
                for b in range(n)}
    return min_cut(capacity, (0, j), (depth, i))


@pytest.mark.parametrize("seed", range(3))
def test_flow_equals_a_brute_force_minimum_cut_of_the_layered_graph(seed):
    maps = random_maps(seed, layers=2, heads=1, n=3)
    hat = with_residual(layer_maps(maps))
    flow = attention_flow(maps)
    for i, j in itertools.product(range(3), range(3)):
        assert flow[i, j] == pytest.approx(layered_min_cut(hat, i, j), abs=1e-9)
    assert (flow >= 0).all() and (flow <= 1 + 1e-9).all()  # a token's one unit in, one unit out
    assert np.allclose(attention_flow(maps, [2], [0, 1])[0], [flow[2, 0], flow[2, 1], 0.0])


def test_identity_attention_rolls_out_and_flows_to_the_identity():
    identity = torch.eye(5).expand(3, 2, 5, 5)
    assert np.array_equal(attention_rollout(identity), np.eye(5))
    assert np.allclose(attention_flow(identity), np.eye(5))


@pytest.mark.parametrize("maps, message", [
    (torch.ones(2, 3) / 3, "maps must have 3 or 4 dimensions"),
    (torch.ones(2, 3, 4) / 4, r"maps must be square \(L, n, n\)"),
    (-torch.ones(1, 2, 2), "maps must hold attention weights >= 0"),
    (torch.ones(0, 2, 2), "maps must hold at least one layer"),
])
def test_bad_maps_are_named(maps, message):
    with pytest.raises(ValueError, match=message):
        attention_rollout(maps)
    with pytest.raises(ValueError, match="outputs must be token indices in"):
        attention_flow(torch.eye(3)[None], [3])
