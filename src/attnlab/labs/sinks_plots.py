"""The pictures of the ``sinks`` lab (:mod:`attnlab.labs.sinks`): the first token's share of
attention by layer against uniform attention's, and the loss by position under the three caches
(Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks", Figures 2 and 3)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

__all__ = ["plot_losses", "plot_shares"]

SMOOTH = 32  # tokens in the running mean of the loss curves


def plot_shares(path: Path, shares: dict[str, tuple[Tensor, float]]) -> Path:
    """One curve a corpus, layer by layer; its uniform-attention share dashed."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.subplots()
    for (name, (share, uniform)), colour in zip(shares.items(), ("C0", "C1"), strict=False):
        layers = range(1, len(share) + 1)
        ax.plot(layers, share.numpy(), marker="o", ms=3, color=colour, label=name)
        ax.axhline(uniform, color=colour, ls="--", lw=1, label=f"{name}: uniform attention")
    ax.set(xlabel="layer", ylabel="attention on the first token", ylim=(0, 1),
           title="Attention sinks: the first token's share (mean over heads and queries)")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_losses(path: Path, losses: dict[str, Tensor], cache_size: int) -> Path:
    """Each cache's loss ``(rows, n − 1)``, averaged over rows and smoothed, by position."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.subplots()
    for name, loss in losses.items():
        curve = loss.double().mean(0)  # (n - 1,)
        width = min(SMOOTH, len(curve))
        smooth = torch.nn.functional.avg_pool1d(curve[None, None], width, stride=1)[0, 0]
        ax.plot(range(width, len(curve) + 1), smooth.numpy(), label=name)
    ax.axvline(cache_size, color="k", lw=0.8, ls=":", label="the cache is full: eviction starts")
    ax.set(xlabel="token position", ylabel="loss (nats)", title="Evicting the first tokens")
    ax.legend(fontsize=8)
    return save_figure(fig, path)
