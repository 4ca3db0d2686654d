"""Attention heatmaps (Steinert-Threlkeld (Transformers I), "Attention visualisation"; Ba
(CSC413 Lecture 8), Bahdanau alignment maps).

Rows are queries, columns are keys, colour is the attention weight ``α_ij``. matplotlib is
imported inside the functions and used through its object-oriented ``Figure`` API (rendered by
the Agg backend), so ``import attnlab`` stays light and no global pyplot state or display is
touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnlab.visualize.figure import save_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.image import AxesImage


def _to_numpy(weights: Any, rank: int, layout: str) -> np.ndarray:
    """Tensor or array → float numpy array of ``rank`` dims (leading singleton dims dropped)."""
    if hasattr(weights, "detach"):  # a torch.Tensor, without importing torch here
        weights = weights.detach().cpu().float().numpy()
    arr = np.asarray(weights, dtype=np.float64)
    while arr.ndim > rank and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != rank:
        raise ValueError(f"weights must have shape {layout}, got shape {tuple(arr.shape)}")
    return arr


def _check_labels(name: str, labels: Sequence[str] | None, n: int, axis: str) -> None:
    if labels is not None and len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the weights have {n} {axis}")


def printable(label: str) -> str:
    """A tick label every font can draw: control characters (a newline token, a stray byte of
    byte-level BPE) are written as escapes, ``\\n``, ``\\x10``."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in label)


def draw_attention(
    ax: Axes,
    weights: Any,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    axis_names: tuple[str, str] = ("keys", "queries"),
) -> AxesImage:
    """Draw one ``(n_q, n_k)`` weight matrix on a matplotlib ``ax``; return the image.

    Keys run along x, queries down y. Labels are drawn when given (one per key / query);
    ``axis_names`` names the x and y axes.
    """
    w = _to_numpy(weights, 2, "(n_q, n_k)")
    n_q, n_k = w.shape
    _check_labels("x_labels", x_labels, n_k, "keys (columns)")
    _check_labels("y_labels", y_labels, n_q, "queries (rows)")
    image = ax.imshow(
        w, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest"
    )
    from matplotlib.ticker import MaxNLocator

    for axis, labels, n in ((ax.xaxis, x_labels, n_k), (ax.yaxis, y_labels, n_q)):
        if labels is None:
            axis.set_major_locator(MaxNLocator(integer=True))  # token indices, not 0.5 steps
        else:
            axis.set_ticks(range(n), labels=[printable(label) for label in labels], fontsize=8)
    if x_labels is not None:
        ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlabel(axis_names[0])
    ax.set_ylabel(axis_names[1])
    if title:
        ax.set_title(title)
    return image


def plot_attention(
    weights: Any,
    path: str | Path,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Save a heatmap of one attention matrix ``(n_q, n_k)`` (tensor or array) to ``path``.

    Leading singleton dimensions are dropped, so ``(1, 1, n_q, n_k)`` weights of one batch
    element and head work directly. The image format follows the suffix (``.png``, ``.pdf``,
    ...). Returns ``path``.
    """
    from matplotlib.figure import Figure

    w = _to_numpy(weights, 2, "(n_q, n_k)")
    n_q, n_k = w.shape
    fig = Figure(figsize=(min(3 + 0.3 * n_k, 14), min(2.5 + 0.3 * n_q, 14)), layout="constrained")
    ax = fig.add_subplot()
    image = draw_attention(ax, w, x_labels=x_labels, y_labels=y_labels, title=title)
    fig.colorbar(image, ax=ax, label="attention weight")
    return save_figure(fig, path)


def plot_attention_heads(
    weights: Any,
    path: str | Path,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str | None = None,
    ncols: int | None = None,
    panel_titles: Sequence[str] | None = None,
    **draw: Any,
) -> Path:
    """Save a grid with one heatmap per head of ``(H, n_q, n_k)`` weights to ``path``.

    ``(1, H, n_q, n_k)`` (one batch element) is accepted too. All heads share one colour scale
    so they can be compared. ``panel_titles`` (one per head; default ``head h``) and the
    ``draw`` options of :func:`draw_attention` (``cmap``, ``axis_names``) style the panels.
    Returns ``path``.
    """
    from matplotlib.figure import Figure

    w = _to_numpy(weights, 3, "(H, n_q, n_k)")
    heads, n_q, n_k = w.shape
    titles = [f"head {h}" for h in range(heads)] if panel_titles is None else list(panel_titles)
    if len(titles) != heads:
        raise ValueError(f"panel_titles has {len(titles)} titles but the weights have {heads} heads")
    ncols = min(heads, 4) if ncols is None else ncols
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    nrows = math.ceil(heads / ncols)
    side_w, side_h = min(2 + 0.25 * n_k, 6), min(2 + 0.25 * n_q, 6)
    fig = Figure(figsize=(side_w * ncols + 1, side_h * nrows + 0.5), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    vmax = float(w.max()) if w.size else 1.0
    for h, ax in enumerate(axes):
        if h >= heads:
            ax.set_axis_off()
            continue
        image = draw_attention(
            ax, w[h], x_labels=x_labels, y_labels=y_labels, title=titles[h], vmax=vmax, **draw
        )
    if heads:
        fig.colorbar(image, ax=list(axes[:heads]), label="attention weight")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def plot_alignment(
    weights: Any,
    path: str | Path,
    *,
    source: Sequence[str],
    target: Sequence[str],
    title: str | None = None,
) -> Path:
    """Save the alignment of a translation, Bahdanau et al. (2015) Figure 3: source tokens
    along x, target tokens down y, each weight ``α_ij`` as a grey level (white = 1).

    ``weights`` ``(H, T, S)``: one layer's encoder-decoder attention, one matrix per head (an
    RNN decoder's alignment is ``H = 1``). With several heads the grid shows their mean first,
    then each head, on one scale. The one picture for every translation model (the task's
    report, ``attnlab plot-alignment``). Returns ``path``.
    """
    w = _to_numpy(weights, 3, "(H, T, S)")
    names = {"cmap": "gray", "axis_names": ("source", "target")}
    if w.shape[0] > 1:
        w = np.concatenate([w.mean(axis=0, keepdims=True), w])
        titles = ["mean over heads", *(f"head {h}" for h in range(w.shape[0] - 1))]
    else:
        titles = ["alignment"]
    return plot_attention_heads(
        w, path, x_labels=source, y_labels=target, title=title, panel_titles=titles,
        ncols=min(len(titles), 3), **names,
    )
