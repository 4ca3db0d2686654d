"""The notebook views' pictures drawn by matplotlib: each view's ``_repr_png_`` and ``save``.

The same data the page draws, for a front end that shows no HTML and for a figure in a paper:
a matrix as :func:`attnlab.visualize.draw_attention` draws it; the model view's thumbnails as one
image (the page's, :func:`attnlab.explorer.quantize.thumbnails`); the head view's lines; the
neuron view's products ``q_d k_d`` with the softmax beside them. matplotlib's object-oriented
``Figure`` API, imported inside each function (no pyplot state, no display).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import Tensor

from attnlab.explorer.quantize import LEVELS, thumbnails
from attnlab.validation import plural
from attnlab.visualize import draw_attention, printable

FAINTEST = 0.01  # the head view draws no line for a smaller weight (as the page)
LINES = 2000  # and, hovering no token, only the strongest lines (as the page)
HEAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def matrix_figure(matrix: Tensor, x_labels: Sequence[str] | None, y_labels: Sequence[str] | None, *,
                  title: str, grey: bool = False, axes: tuple[str, str] = ("key", "query")) -> Any:
    """One ``(n_q, n_k)`` matrix, labelled when labels are given (grey levels: Bahdanau's)."""
    n_q, n_k = matrix.shape
    fig = _figure(min(3 + 0.3 * n_k, 12), min(2.5 + 0.3 * n_q, 12))
    ax = fig.add_subplot()
    image = draw_attention(ax, matrix.numpy(), x_labels=x_labels, y_labels=y_labels, title=title or None,
                           cmap="gray" if grey else "Blues", axis_names=(plural(axes[0]), plural(axes[1])))
    fig.colorbar(image, ax=ax, label="attention weight")
    return fig


def atlas_figure(weights: Tensor, head_labels: Sequence[str], *, title: str) -> Any:
    """Every head of ``weights (L, H, n_q, n_k)`` as the page's thumbnail (block means, each
    scaled to its largest, √ grey levels), layers down and heads across."""
    layers, heads = weights.shape[:2]
    t, data = thumbnails(weights)
    levels = np.frombuffer(data, dtype=np.uint8).reshape(layers, heads, t, t) / LEVELS
    atlas = np.full((layers * (t + 1) - 1, heads * (t + 1) - 1), np.nan)
    for layer in range(layers):
        for head in range(heads):
            top, left = layer * (t + 1), head * (t + 1)
            atlas[top:top + t, left:left + t] = np.sqrt(levels[layer, head])
    fig = _figure(min(2 + 0.6 * heads, 12), min(1.5 + 0.6 * layers, 18))
    ax = fig.add_subplot()
    ax.imshow(atlas, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks([h * (t + 1) + t / 2 for h in range(heads)], labels=list(head_labels), fontsize=7)
    ax.set_yticks([layer * (t + 1) + t / 2 for layer in range(layers)],
                  labels=[str(layer + 1) for layer in range(layers)], fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=10)
    return fig


def lines_figure(weights: Tensor, tokens: Sequence[str], keys: Sequence[str], *, title: str) -> Any:
    """One layer's heads ``(H, n_q, n_k)`` as the head view draws them: queries left, keys right,
    a line a weight ≥ :data:`FAINTEST` (the :data:`LINES` strongest), as opaque as the weight,
    a colour a head."""
    from matplotlib.collections import LineCollection

    heads, n_q, n_k = weights.shape
    rows = max(n_q, n_k)
    fig = _figure(5, min(1 + 0.22 * rows, 20))
    ax = fig.add_subplot()
    values = weights.numpy()
    total = int((values >= FAINTEST).sum())
    floor = FAINTEST if total <= LINES else max(FAINTEST, float(np.sort(values, axis=None)[-LINES]))
    for head in range(heads):
        i, j = np.nonzero(values[head] >= floor)
        if not len(i):
            continue
        segments = np.stack([np.stack([np.zeros(len(i)), i], 1), np.stack([np.ones(len(i)), j], 1)], 1)
        colour = np.array([int(HEAD_COLOURS[head % len(HEAD_COLOURS)][k:k + 2], 16) / 255 for k in (1, 3, 5)])
        colours = np.c_[np.tile(colour, (len(i), 1)), values[head][i, j].clip(0, 1)]  # RGBA, one a line
        ax.add_collection(LineCollection(segments, colors=colours, linewidths=1))
    if total > LINES:
        title += f" (the {LINES:,} strongest of {total:,} lines, weights ≥ {floor:.3f})"
    if rows <= 100:
        size = 9 if rows <= 40 else 6
        for row, token in enumerate(tokens):
            ax.text(-0.03, row, printable(token), ha="right", va="center", fontsize=size)
        for row, token in enumerate(keys):
            ax.text(1.03, row, printable(token), ha="left", va="center", fontsize=size)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_axis_off()
    ax.set_title(title, fontsize=10)
    return fig


def neuron_figure(q: Tensor, k: Tensor, keys: Sequence[str], weights: Tensor, *, title: str) -> Any:
    """One query ``q (d,)`` against keys ``k (m, d)``: the products ``q_d k_d`` (keys down,
    dimensions across; blue positive, orange negative) and the softmax of ``q·k/√d`` beside them."""
    products = (k * q).numpy()  # (m, d)
    m, d = products.shape
    fig = _figure(min(4 + 0.08 * d, 14), min(1.5 + 0.2 * m, 20))
    left, right = fig.subplots(1, 2, width_ratios=[4, 1], sharey=True)
    top = float(np.abs(products).max()) or 1.0
    left.imshow(products, cmap="PuOr_r", vmin=-top, vmax=top, aspect="auto", interpolation="nearest")
    left.set_xlabel("dimension of q and k")
    left.set_title("q × k, dimension by dimension", fontsize=9)
    if m <= 60:
        left.set_yticks(range(m), labels=[printable(key) for key in keys], fontsize=7)
    right.barh(range(m), weights.numpy(), color="#1f77b4")
    right.set_xlim(0, 1)
    right.set_title("softmax(q·k/√d)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig
