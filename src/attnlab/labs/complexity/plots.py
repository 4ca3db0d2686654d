"""The complexity lab's pictures: cost against length on log-log axes, with the fitted exponents
in the legends (matplotlib's object-oriented ``Figure``, no pyplot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from attnlab.labs.complexity.decoding import MODES, DecodingMeasurements
from attnlab.labs.complexity.measure import LayerMeasurements, fit_exponent
from attnlab.visualize import save_figure

PANELS = (("flops", "FLOPs (counted)"), ("seconds", "forward time (s)"),
          ("activation", "activation memory (bytes)"), ("peak", "peak forward memory (bytes)"))


def _panel(ax, lines: dict[str, tuple[Sequence[int], Sequence[float]]], xlabel: str, ylabel: str,
           points: int, var: str = "n") -> None:
    """Log-log lines with markers; each label gets the exponent fitted over its last ``points``."""
    for label, (xs, ys) in lines.items():
        slope = fit_exponent(xs[-points:], ys[-points:])
        ax.loglog(xs, ys, marker="o", label=f"{label}: ∝ {var}^{slope:.2f}")
    ax.set_xticks([], minor=True)  # the measured lengths as plain numbers, no 10^k clutter
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def plot_scaling(results: list[LayerMeasurements], points: int, path: Path) -> Path:
    """One panel per measure of :data:`PANELS`, one line per layer; exponents over the largest
    ``points`` lengths."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8.5), layout="constrained")
    for ax, (field, label) in zip(fig.subplots(2, 2).flat, PANELS, strict=True):
        lines = {r.layer.name: (r.ns, getattr(r, field)) for r in results}
        _panel(ax, lines, "sequence length n", label, points)
    fig.suptitle("One layer at fixed width: attention grows as n², recurrence and convolution as n "
                 "(Hasegawa-Johnson, Why Self-Attention?)")
    return save_figure(fig, path)


def plot_decoding(result: DecodingMeasurements, path: Path) -> Path:
    """FLOPs and time of generating N tokens, cached and recomputed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    points = min(3, len(result.lengths))
    for ax, (values, label) in zip(fig.subplots(1, 2), ((result.flops, "FLOPs (counted)"),
                                                       (result.seconds, "time (s)")), strict=True):
        lines = {mode: (result.lengths, values[mode]) for mode in MODES}
        _panel(ax, lines, "new tokens N", label, points, var="N")
    fig.suptitle("Decoding N tokens with the KV cache and recomputing the prefix (Ba, Computational Cost and "
                 "Parallelism)")
    return save_figure(fig, path)
