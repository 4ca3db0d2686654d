"""The lab's pictures: one example of each task with every method's relevance beside the truth.

* the captioner: one scene, one row a number word; the image with the named digit's box, then
  each method's positive relevance over the grid (brighter = more), its most relevant cell
  ringed, green when it lies in the box and red when not;
* the NTM: one sequence; per method a panel of answer steps × memory locations (its positive
  relevance, each row normalised), beside the write weighting of the stored vectors (the truth);
* a translator: one sentence, one row a method, its positive relevance over the source subwords
  for one copied word, the word's own subwords marked.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from torch import Tensor

from attnlab.explain.scores import positive_share
from attnlab.labs.explanations.tally import METHODS

Box = tuple[int, int, int, int]


@dataclass
class CaptionExample:
    """The number words of one scene: per word its caption, word, box, relevances and truth
    (:meth:`add`; :meth:`clear` to start another scene)."""

    checkpoint: Path
    grid: tuple[int, int]
    image: Tensor | None = None
    caption: str = ""
    words: list[tuple[str, Box, dict[str, Tensor], Tensor]] = field(default_factory=list)

    def add(self, image: Tensor, caption: str, word: str, box: Box,
            relevances: dict[str, Tensor], truth: Tensor) -> None:
        self.image, self.caption = image, caption
        self.words.append((word, box, relevances, truth))

    def clear(self) -> None:
        self.image, self.caption, self.words = None, "", []


@dataclass
class MemoryExample:
    """One sequence's answer steps: ``relevances[method]`` ``(A, N)`` and the truth ``(A, N)``."""

    checkpoint: Path
    relevances: dict[str, Tensor]
    truth: Tensor


@dataclass
class TranslationExample:
    """One copied word of one sentence: the source subwords, the source and its translation,
    the word, the relevances ``(S,)`` and the truth ``(S,)`` bool."""

    checkpoint: Path
    source: list[str]
    text: str
    translation: str
    word: str
    relevances: dict[str, Tensor]
    truth: Tensor


def _normalised(relevance: Tensor) -> np.ndarray:
    return positive_share(relevance.detach().flatten()).view(relevance.shape).numpy()


def draw_captioner(example: CaptionExample, path: Path) -> Path:
    """The scene's number words (rows) × the image and each method (columns)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from attnlab.visualize import save_figure

    rows, h, w = len(example.words), *example.grid
    image = example.image[0].float().numpy()
    height, width = image.shape
    fig = Figure(figsize=(1.55 * (1 + len(METHODS)), 1.7 * rows + 0.5), layout="constrained")
    axs = fig.subplots(rows, 1 + len(METHODS), squeeze=False)
    for row, (word, box, relevances, truth) in enumerate(example.words):
        x0, y0, x1, y1 = box
        for col, ax in enumerate(axs[row]):
            ax.imshow(image, cmap="gray", vmin=0.0, vmax=1.0)
            ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, edgecolor="lime"))
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(f'"{word}"', fontsize=9)
                ax.set_title("scene, digit box" if row == 0 else "", fontsize=8)
                continue
            method = METHODS[col - 1]
            share = _normalised(relevances[method]).reshape(h, w)
            ax.imshow(share, cmap="magma", alpha=0.7, extent=(0, width, height, 0), vmin=0.0,
                      vmax=max(float(share.max()), 1e-9))
            top = int(relevances[method].argmax())
            colour = "lime" if bool(truth[top]) else "red"
            cy, cx = (top // w + 0.5) * height / h, (top % w + 0.5) * width / w
            ax.plot([cx], [cy], marker="o", markersize=9, markerfacecolor="none", markeredgecolor=colour)
            ax.set_title(method if row == 0 else "", fontsize=8)
    fig.suptitle(f'captioner: "{example.caption}"', fontsize=9)
    return save_figure(fig, path)


def draw_memory(example: MemoryExample, path: Path) -> Path:
    """Answer steps × memory locations, per method and for the write weighting."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    truth = example.truth.numpy()
    used = np.flatnonzero(truth.max(0) > 0.05)
    lo, hi = max(int(used.min()) - 3, 0), min(int(used.max()) + 4, truth.shape[1])
    panels = [("written (truth)", truth)] + [
        (m, np.stack([_normalised(r) for r in example.relevances[m]])) for m in METHODS]
    fig = Figure(figsize=(2.1 * len(panels), 3.0), layout="constrained")
    for ax, (name, values) in zip(fig.subplots(1, len(panels)), panels, strict=True):
        extent = (lo - 0.5, hi - 0.5, values.shape[0] - 0.5, -0.5)
        ax.imshow(values[:, lo:hi], cmap="magma", aspect="auto", vmin=0.0, extent=extent)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("memory location", fontsize=7)
        ax.tick_params(labelsize=6)
    fig.axes[0].set_ylabel("answer step", fontsize=7)
    fig.suptitle("NTM copy: where each answer was written, and where each method points", fontsize=9)
    return save_figure(fig, path)


def draw_translation(example: TranslationExample, path: Path) -> Path:
    """Methods (rows) × source subwords (columns) for one copied word."""
    from matplotlib.figure import Figure

    from attnlab.visualize import printable, save_figure

    values = np.stack([_normalised(example.relevances[m]) for m in METHODS])
    fig = Figure(figsize=(max(4.0, 0.45 * len(example.source) + 2.0), 2.9), layout="constrained")
    ax = fig.subplots()
    ax.imshow(values, cmap="magma", aspect="auto", vmin=0.0)
    ax.set_yticks(range(len(METHODS)), METHODS, fontsize=8)
    ax.set_xticks(range(len(example.source)), [printable(s) for s in example.source], rotation=60, fontsize=8)
    for j in np.flatnonzero(example.truth.numpy()):
        ax.get_xticklabels()[j].set_color("green")
        ax.get_xticklabels()[j].set_fontweight("bold")
    for i, m in enumerate(METHODS):
        top = int(example.relevances[m].argmax())
        ax.plot([top], [i], marker="o", markersize=8, markerfacecolor="none",
                markeredgecolor="lime" if bool(example.truth[top]) else "red")
    ax.set_title(f'"{example.word}" of "{example.translation}"\nfrom "{example.text}"', fontsize=8)
    return save_figure(fig, path)


def draw_pointing(rows: list[tuple[str, dict[str, float]]], path: Path) -> Path:
    """The pointing-game table as bars: one group a task (``rows``: its title and each method's
    and baseline's hit rate), one bar a method, the baselines hatched grey beside them."""
    from matplotlib.figure import Figure

    from attnlab.labs.explanations.tally import BASELINES
    from attnlab.visualize import save_figure

    names = [*METHODS, *BASELINES]
    colours = [f"C{i}" for i in range(len(METHODS))] + ["0.75", "0.55"]
    width = 0.8 / len(names)
    fig = Figure(figsize=(max(6.0, 2.2 * len(rows) + 3.0), 3.8), layout="constrained")
    ax = fig.subplots()
    for j, (name, colour) in enumerate(zip(names, colours, strict=True)):
        x = np.arange(len(rows)) + (j - (len(names) - 1) / 2) * width
        ax.bar(x, [rates.get(name, np.nan) for _, rates in rows], width, color=colour, label=name,
               hatch="//" if name in BASELINES else None, edgecolor="white")
    ax.set_xticks(range(len(rows)), [textwrap.fill(title, 24) for title, _ in rows], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pointing game (hit rate)", fontsize=8)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title("Which explanation points at the known source", fontsize=9)
    return save_figure(fig, path)
