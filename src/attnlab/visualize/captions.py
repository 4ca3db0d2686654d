"""Where a captioner looks as it writes each word: the figure of Xu et al. (2015), "Show, Attend
and Tell", Figures 2-3 (Ba (CSC413 Lecture 8), "Attention-based caption generation").

One row a caption: the image with its caption, then one panel a generated word with the
attention map of the step that wrote it, upsampled over the image. Given the box of the digit
a word names, the panel outlines it, so a reader sees at once whether the model looked there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from torch import Tensor

from attnlab.visualize.figure import save_figure

__all__ = ["CaptionAttention", "caption_figure", "plot_caption_attention"]


class CaptionAttention(NamedTuple):
    """One row of the figure: ``image (C, H, W)`` in [0, 1], the generated ``words`` (the end
    token included), ``maps (T, h, w)`` (row t: the attention that wrote word t), a ``title``
    and, per word, the box ``(x0, y0, x1, y1)`` of the digit it names (``None``: none)."""

    image: Tensor
    words: Sequence[str]
    maps: Tensor
    title: str = ""
    boxes: Sequence[tuple[int, int, int, int] | None] | None = None


def _show_image(ax, image: Tensor) -> None:
    pixels = image.detach().float().cpu()
    if pixels.shape[0] == 1:
        ax.imshow(pixels[0].numpy(), cmap="gray", vmin=0.0, vmax=1.0)
    else:
        ax.imshow(pixels.permute(1, 2, 0).clamp(0, 1).numpy())
    ax.set_xticks([])
    ax.set_yticks([])


def plot_caption_attention(rows: Sequence[CaptionAttention], path: str | Path, *, title: str = "") -> Path:
    """Draw ``rows`` (:class:`CaptionAttention`) into ``path``: per row the image, then each
    word's attention map (bilinear over the image, brighter = more weight)."""
    return save_figure(caption_figure(rows, title=title), path)


def caption_figure(rows: Sequence[CaptionAttention], *, title: str = "") -> Any:
    """The ``Figure`` of :func:`plot_caption_attention` (and of the notebook view
    ``attnlab.views.caption_attention``)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if not rows:
        raise ValueError("rows must hold at least one caption, got none")
    columns = 1 + max(len(r.words) for r in rows)
    lines = max(r.title.count("\n") + 1 for r in rows)
    fig = Figure(figsize=(1.25 * columns, (1.6 + 0.15 * lines) * len(rows) + 0.3), layout="constrained")
    for row, sub in zip(rows, fig.subfigures(len(rows), 1, squeeze=False)[:, 0], strict=True):
        if row.maps.shape[0] != len(row.words):
            raise ValueError(f"maps must have one map a word ({len(row.words)}), got {row.maps.shape[0]}")
        _, height, width = row.image.shape
        sub.suptitle(row.title, fontsize=8, x=0.005, ha="left")
        axs = sub.subplots(1, columns, squeeze=False)[0]
        _show_image(axs[0], row.image)
        for t, ax in enumerate(axs[1:]):
            if t >= len(row.words):
                ax.set_axis_off()
                continue
            _show_image(ax, row.image)
            weights = row.maps[t].detach().float().cpu().numpy()
            ax.imshow(weights, cmap="magma", alpha=0.65, extent=(0, width, height, 0),
                      interpolation="bilinear", vmin=0.0, vmax=max(float(weights.max()), 1e-6))
            box = row.boxes[t] if row.boxes is not None else None
            if box is not None:
                x0, y0, x1, y1 = box
                ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False,
                                       edgecolor="lime", linewidth=1.0))
            ax.set_title(row.words[t], fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10, fontweight="bold")
    return fig
