"""The measured side of the complexity lab: FLOPs, time, memory, sequential steps and path length
of one layer of each type the lectures compare, at a fixed width ``d`` and growing length ``n``.

Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?" and Ba (CSC413 Lecture 8),
"Computational Cost and Parallelism" state the costs as orders; here each is a number:

* **FLOPs** — counted by ``torch.utils.flop_counter.FlopCounterMode`` (2 a multiply-add) with
  PyTorch's math attention backend, whose products the counter sees (it does not count the
  fused CPU kernel): deterministic, so their exponents are exact.
* **time** — forward seconds without gradients, the median of interleaved rounds
  (:mod:`attnlab.measure.timing`), one thread unless told otherwise.
* **activation memory** — bytes of the tensors a layer keeps for its backward pass (the input
  included, parameters not): Ba's "training memory", deterministic.
* **peak memory** — the peak of tensor storage during a forward pass without gradients, above
  the input (the profiler's allocation trace, :mod:`attnlab.measure.timing`): the "test memory".
* **sequential steps** — the longest chain of matrix products in the autograd graph each of
  which needs the one before: n for a recurrent layer, a constant for the others.
* **path length** — layers stacked until output position n − 1 depends on input 0, found by
  pushing a non-negative signal through them (no cancellation can hide a dependence).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnlab.attention.core import scaled_dot_product_attention
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.measure import timing

Forward = Callable[[Tensor], Tensor]
PRODUCTS = {"MmBackward0", "AddmmBackward0", "BmmBackward0", "BaddbmmBackward0", "ConvolutionBackward0"}
"""Autograd nodes of matrix products (a convolution is one product of unfolded windows)."""


def fit_exponent(ns: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope ``p`` of ``log value = p · log n + c``: ``value ∝ n^p``."""
    if len(ns) != len(values) or len(ns) < 2:
        raise ValueError(
            f"fit_exponent needs >= 2 (n, value) pairs of equal count, got {len(ns)} and {len(values)}"
        )
    if min(ns) <= 0 or min(values) <= 0:
        raise ValueError(f"fit_exponent needs positive n and values, got {list(ns)} and {list(values)}")
    xs, ys = [math.log(n) for n in ns], [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError(f"fit_exponent needs at least two different n, got {list(ns)}")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@dataclass(frozen=True)
class SequenceLayer:
    """A layer under test: ``forward(x (B, n, d)) -> (B, n, d)``; ``kind`` is its row of
    :data:`attnlab.analysis.LAYER_TYPES`, ``key`` its name in the lab's numbers."""

    key: str
    name: str
    kind: str
    module: nn.Module
    forward: Forward


def build_layers(d: int, num_heads: int, kernel_size: int, seed: int = 0) -> list[SequenceLayer]:
    """attnlab's multi-head self-attention (its fused default path and the explicit one that
    returns the weights), ``torch.nn.GRU`` and ``torch.nn.Conv1d`` (length-preserving), width ``d``."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d, num_heads)
    gru = nn.GRU(d, d, batch_first=True)
    conv = nn.Conv1d(d, d, kernel_size, padding="same")
    return [
        SequenceLayer("attention_fused", "self-attention, fused", "self-attention", mha, lambda x: mha(x)),
        SequenceLayer("attention_explicit", "self-attention, explicit", "self-attention", mha,
                      lambda x: mha(x, return_weights=True)[0]),
        SequenceLayer("recurrent", "recurrent (GRU)", "recurrent", gru, lambda x: gru(x)[0]),
        SequenceLayer("convolutional", f"convolutional (k={kernel_size})", "convolutional", conv,
                      lambda x: conv(x.transpose(1, 2)).transpose(1, 2)),  # (B, d, n) inside
    ]


def count_flops(layer: SequenceLayer, x: Tensor) -> tuple[int, int]:
    """``(all FLOPs, FLOPs of the layer's own products)`` of one forward pass; its own products
    are those outside its sub-modules: attention's ``QKᵀ`` and ``softmax(S)·V``."""
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        layer.forward(x)
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    root = type(layer.module).__name__
    children = sum(counts.get(f"{root}.{child}", 0) for child, _ in layer.module.named_children())
    return counts["Global"], counts.get(root, 0) - children


def sequential_products(output: Tensor) -> int:
    """Longest chain of dependent matrix products (:data:`PRODUCTS`) in ``output``'s autograd graph."""
    depth: dict[object, int] = {}
    stack: list[tuple[object, bool]] = [(output.grad_fn, False)]
    while stack:  # iterative post-order: a recurrent graph is thousands of nodes deep
        node, expanded = stack.pop()
        if node is None or (node in depth and not expanded):
            continue
        inputs = [g for g, _ in node.next_functions if g is not None]
        if not expanded:
            stack.append((node, True))
            stack.extend((g, False) for g in inputs if g not in depth)
            continue
        below = max((depth[g] for g in inputs), default=0)
        depth[node] = below + (type(node).__name__ in PRODUCTS)
    return depth.get(output.grad_fn, 0)


def dependent_steps(layer: SequenceLayer, x: Tensor) -> int:
    """:func:`sequential_products` of one forward pass (math attention backend: explicit products)."""
    with sdpa_kernel(SDPBackend.MATH), torch.enable_grad():
        return sequential_products(layer.forward(x.detach().requires_grad_()))


def activation_bytes(layer: SequenceLayer, x: Tensor) -> int:
    """Bytes of the distinct tensors one forward pass saves for backward, parameters excluded."""
    params = {p.untyped_storage().data_ptr() for p in layer.module.parameters()}
    saved: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.enable_grad():
        out = layer.forward(x.detach().requires_grad_())
    del out
    return sum(saved.values())


def layers_to_connect(n: int, layer: Callable[[Tensor, int], Tensor], max_layers: int) -> int:
    """Layers stacked until output ``n − 1`` depends on input 0: a 1 at position 0 of a
    non-negative ``(1, n, 1)`` signal, each layer ``layer(signal, i)`` applied with non-negative
    weights, until the last position is reached."""
    signal = torch.zeros(1, n, 1)
    signal[0, 0, 0] = 1.0
    for depth in range(1, max_layers + 1):
        signal = (layer(signal, depth - 1) > 0).float()  # (1, n, 1): positions reached so far
        if signal[0, -1, 0] > 0:
            return depth
    raise ValueError(f"position 0 does not reach position {n - 1} within max_layers={max_layers}")


def causal_ones_convolution(kernel_size: int, dilated: bool) -> Callable[[Tensor, int], Tensor]:
    """Layer ``i`` of a causal stack of width ``k``: all-ones weights, left padding, dilation
    ``k^i`` when ``dilated`` (ByteNet / WaveNet)."""
    weight = torch.ones(1, 1, kernel_size)

    def layer(signal: Tensor, i: int) -> Tensor:
        dilation = kernel_size**i if dilated else 1
        x = F.pad(signal.transpose(1, 2), ((kernel_size - 1) * dilation, 0))  # (1, 1, pad + n)
        return F.conv1d(x, weight, dilation=dilation).transpose(1, 2)  # (1, n, 1)

    return layer


def causal_attention_layer(signal: Tensor, i: int) -> Tensor:
    """A causal self-attention layer on the signal (its weights are positive: softmax)."""
    q = torch.zeros_like(signal)  # (1, n, 1): equal scores, the weights average the prefix
    return scaled_dot_product_attention(q, q, signal, is_causal=True)


def path_lengths(n: int, kernel_size: int) -> dict[str, int]:
    """Measured layers from position 0 to ``n − 1``: self-attention, dilated and contiguous
    causal convolutions of width ``kernel_size``."""
    return {
        "self-attention": layers_to_connect(n, causal_attention_layer, 1),
        "convolutional, dilated": layers_to_connect(n, causal_ones_convolution(kernel_size, True), n),
        "convolutional, contiguous": layers_to_connect(n, causal_ones_convolution(kernel_size, False), n),
    }


@dataclass
class LayerMeasurements:
    """One layer's figures at each length of ``ns``."""

    layer: SequenceLayer
    ns: list[int]
    flops: list[int] = field(default_factory=list)
    own_flops: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    activation: list[int] = field(default_factory=list)
    peak: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def measure(
    layers: Sequence[SequenceLayer], ns: Sequence[int], d: int, *, rounds: int, min_sample_s: float,
    progress: bool = True,
) -> list[LayerMeasurements]:
    """Every figure of the module docstring, for each layer at each length ``n`` of ``ns``, on
    one sequence ``(1, n, d)``."""
    from attnlab.progress import progress as bar

    inputs = {n: torch.randn(1, n, d, generator=torch.Generator().manual_seed(n)) for n in ns}
    results = [LayerMeasurements(layer, list(ns)) for layer in layers]
    for result in bar(results, desc="counting", enabled=progress):
        for n in ns:
            total, own = count_flops(result.layer, inputs[n])
            result.flops.append(total)
            result.own_flops.append(own)
            result.steps.append(dependent_steps(result.layer, inputs[n]))
            result.activation.append(activation_bytes(result.layer, inputs[n]))
            with torch.no_grad():
                result.peak.append(timing.peak_memory(lambda f=result.layer.forward, x=inputs[n]: f(x)))
    fns = {(i, n): _no_grad(r.layer.forward, inputs[n]) for i, r in enumerate(results) for n in ns}
    samples = timing.time_interleaved(fns, rounds=rounds, min_sample_s=min_sample_s)
    for (i, _), times in samples.items():
        results[i].seconds.append(timing.median(times))
    return results


def _no_grad(forward: Forward, x: Tensor) -> Callable[[], Tensor]:
    def call() -> Tensor:
        with torch.no_grad():
            return forward(x)

    return call


def quadratic_coefficient(ns: Sequence[float], values: Sequence[float]) -> float:
    """``a`` of the parabola ``a n² + b n + c`` through the last three ``(n, value)`` points:
    bytes per ``n²`` of a memory (0 for one that grows linearly)."""
    if len(ns) < 3 or len(ns) != len(values):
        raise ValueError(
            f"quadratic_coefficient needs >= 3 (n, value) pairs of equal count, "
            f"got {len(ns)} and {len(values)}"
        )
    (x1, x2, x3), (y1, y2, y3) = ns[-3:], values[-3:]
    return y1 / ((x1 - x2) * (x1 - x3)) + y2 / ((x2 - x1) * (x2 - x3)) + y3 / ((x3 - x1) * (x3 - x2))
