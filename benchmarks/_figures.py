"""The line charts the comparison benchmarks draw (matplotlib's object API, Agg, no pyplot)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def line_chart(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: Path,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    xticks: tuple[Sequence[float], Sequence[str]] | None = None,
    yscale: str = "linear",
) -> Path:
    """One line with markers per ``name: (xs, ys)``, a legend and a
    light grid, saved to ``path``; ``yscale`` as matplotlib's (``"log"``)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.add_subplot()
    for name, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", label=name)
    if xticks is not None:
        ax.set_xticks(*xticks)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_yscale(yscale)
    ax.grid(alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
