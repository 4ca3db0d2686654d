"""The pictures of the ``induction`` lab (:mod:`attnlab.labs.induction`): the layers × heads
heatmaps of the prefix-matching and copying scores, and one head's ``(2T, 2T)`` attention on a
repeated sequence, whose off-diagonal stripe ``α_{T+m, m+1}`` is induction (Olsson et al. 2022,
"In-context Learning and Induction Heads", Figure 1)."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

__all__ = ["plot_pattern", "plot_scores"]


def plot_scores(path: Path, prefix: Tensor, copying: Tensor, heads: list[tuple[int, int]]) -> Path:
    """Two heatmaps of ``(L, H)`` scores, layers down and heads across, the induction heads boxed."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from attnlab.visualize import save_figure

    layers, per_layer = prefix.shape
    fig = Figure(figsize=(9, 0.28 * layers + 2.2), layout="constrained")
    panels = (("prefix-matching score", prefix, "viridis", (0.0, 1.0)),
              ("copying score (z of the token read)", copying, "RdBu_r", None))
    for ax, (title, grid, cmap, limits) in zip(fig.subplots(1, 2), panels, strict=True):
        if limits is None:
            bound = float(grid.abs().max()) or 1.0
            limits = (-bound, bound)
        image = ax.imshow(grid.numpy(), cmap=cmap, vmin=limits[0], vmax=limits[1], aspect="auto")
        for layer, head in heads:
            ax.add_patch(Rectangle((head - 1.5, layer - 1.5), 1, 1, fill=False, lw=1.5, ec="k"))
        ax.set_xticks(range(per_layer), labels=[str(h) for h in range(1, per_layer + 1)])
        ax.set_yticks(range(layers), labels=[str(layer) for layer in range(1, layers + 1)], fontsize=7)
        ax.set(xlabel="head", ylabel="layer", title=title)
        fig.colorbar(image, ax=ax, shrink=0.8)
    return save_figure(fig, path)


def plot_pattern(path: Path, weights: Tensor, head: tuple[int, int], prefix: float) -> Path:
    """Head ``(layer, head)``'s attention ``(2T, 2T)`` on one sequence, the halves marked."""
    from matplotlib.figure import Figure

    from attnlab.visualize import draw_attention, save_figure

    (layer, h), length = head, weights.shape[0] // 2
    weights = weights.float()
    fig = Figure(figsize=(6.4, 5.6), layout="constrained")
    ax = fig.subplots()
    image = draw_attention(ax, weights.numpy(), vmax=float(weights[length:].max()),
                           title=f"layer {layer} head {h}: prefix matching {prefix:.2f}")
    for at in (length - 0.5,):
        ax.axhline(at, color="w", lw=0.8, ls="--")
        ax.axvline(at, color="w", lw=0.8, ls="--")
    ax.set(xlabel="key position (first repeat | second)", ylabel="query position")
    fig.colorbar(image, ax=ax, shrink=0.8)
    return save_figure(fig, path)
