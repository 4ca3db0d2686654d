"""Pictures of a Neural Turing Machine at work, after Graves, Wayne & Danihelka (2014),
Figures 4-6, 8-9 and 17 (Ba (CSC413 Lecture 8), "Neural Turing Machines").

* :func:`plot_memory_access` — one sequence: inputs, targets and outputs over time; what the
  write head adds and where it writes; where the read head reads (locations down, time
  across, weights as grey levels). It takes arrays: the task runs the model
  (:func:`attnlab.tasks.algorithmic.draw_memory_access`).
* :func:`plot_sort_mechanism` — the priority sort after Figure 17: write location against
  priority, the write and read weightings of one sequence.
* :func:`plot_generalisation` — bit errors per sequence against sequence length for several
  models, the training range shaded.

matplotlib is imported here, not by ``import attnlab`` (the Figure API needs no backend).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.visualize.figure import save_figure


def _used_locations(*weights: np.ndarray, margin: int = 2, floor: float = 0.05) -> slice:
    """The span of memory locations any head gave more than ``floor`` weight, plus a margin."""
    peak = np.max([w.max(axis=0) for w in weights], axis=0)  # (N,)
    used = np.flatnonzero(peak > floor)
    if used.size == 0:
        return slice(0, peak.size)
    return slice(max(int(used[0]) - margin, 0), min(int(used[-1]) + margin + 1, peak.size))


def plot_memory_access(
    inputs: Any, targets: Any, outputs: Any, write_weights: Any, read_weights: Any, adds: Any,
    path: str | Path, *, title: str = "",
) -> Path:
    """Draw one sequence in the paper's Figure 6 layout, time across: ``inputs (T, in)``,
    ``targets`` and ``outputs (T, out)`` (probabilities), a write head's ``adds (T, M)`` and
    ``write_weights (T, N)``, a read head's ``read_weights (T, N)`` (tensors or arrays).
    Locations are cropped to the span the heads used."""

    inputs, targets, outputs, write, read, adds = (
        np.asarray(x.detach().float().cpu() if isinstance(x, torch.Tensor) else x)
        for x in (inputs, targets, outputs, write_weights, read_weights, adds)
    )
    span = _used_locations(write, read)
    locations = f"locations {span.start}-{span.stop - 1}"
    panels = [  # (title, image (rows, T), y label, first row's index)
        ("inputs", inputs.T, "channel", 0), ("targets", targets.T, "bit", 0),
        ("outputs σ(y)", outputs.T, "bit", 0), ("add vectors (write head)", adds.T, "memory width", 0),
        (f"write weightings ({locations})", write[:, span].T, "location", span.start),
        (f"read weightings ({locations})", read[:, span].T, "location", span.start),
    ]
    return save_figure(memory_figure(panels, title=title), path)


def memory_figure(panels: Sequence[tuple[str, np.ndarray, str, int]], *, title: str = "") -> Any:
    """The ``Figure`` of :func:`plot_memory_access` (and of the notebook view
    ``attnlab.views.ntm_memory``): one panel a ``(name, image (rows, T), y label, first row's
    index)``, time across; a ``location`` panel in grey levels (black = 1), others in viridis."""
    from matplotlib.figure import Figure

    steps = panels[0][1].shape[1]
    fig = Figure(figsize=(min(4 + 0.12 * steps, 16), 1 + 1.7 * len(panels)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(panels), 1, sharex=True))
    for ax, (name, image, ylabel, first) in zip(axes, panels, strict=True):
        rows, steps = image.shape
        ax.imshow(image, aspect="auto", cmap="gray_r" if ylabel == "location" else "viridis",
                  interpolation="nearest", extent=(-0.5, steps - 0.5, first + rows - 0.5, first - 0.5))
        ax.set_title(name, fontsize=9, loc="left")
        ax.set_ylabel(ylabel, fontsize=8)
    axes[-1].set_xlabel("time step")
    if title:
        fig.suptitle(title)
    return fig


def plot_generalisation(
    curves: Mapping[str, Mapping[int, float]], path: str | Path, *,
    train_range: tuple[int, int], title: str = "", ylabel: str = "bit errors per sequence",
    xlabel: str = "sequence length",
) -> Path:
    """Bit errors per sequence against length (``xlabel``), one line per model, ``train_range``
    shaded."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.axvspan(*train_range, color="0.9", label=f"training range {train_range[0]}-{train_range[1]}")
    for name, by_length in curves.items():
        lengths = sorted(int(k) for k in by_length)
        ax.plot(lengths, [by_length[k] if k in by_length else by_length[str(k)] for k in lengths],
                marker="o", label=name)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_yscale("symlog", linthresh=0.1)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return save_figure(fig, path)



def plot_sort_mechanism(
    priority: Any, write_location: Any, write_weights: Any, read_weights: Any, wanted_location: Any,
    path: str | Path, *, correlation: float, found: float, title: str = "",
) -> Path:
    """The priority-sort machine after Graves et al. (2014), Figure 17: left, each input's write
    location against its priority over many sequences (``priority``, ``write_location (B, L)``;
    ``correlation`` is their Spearman ρ); middle and right, one sequence's write weightings
    over its ``L`` input steps and read weightings over its answer steps
    (``(steps, N)``, locations down), the answer's write locations ``wanted_location (keep,)``
    marked in red (``found``: the share of answer steps that read there)."""
    from matplotlib.figure import Figure

    priority, location, write, read, wanted = (
        np.asarray(x.detach().float().cpu() if isinstance(x, torch.Tensor) else x)
        for x in (priority, write_location, write_weights, read_weights, wanted_location)
    )
    span = _used_locations(write, read)
    fig = Figure(figsize=(13.0, 4.2), layout="constrained")
    scatter, writes, reads = fig.subplots(1, 3, width_ratios=(1.2, 1, 1))
    scatter.scatter(priority.ravel(), location.ravel(), s=6, alpha=0.4)
    scatter.set(xlabel="priority", ylabel="write location",
                title=f"write location against priority: Spearman ρ = {correlation:.2f}")
    answers = f"read weightings (answer steps); red: where written ({found:.0%} hit)"
    for ax, image, name in ((writes, write, "write weightings (input steps)"), (reads, read, answers)):
        steps = image.shape[0]
        ax.imshow(image[:, span].T, aspect="auto", cmap="gray_r", interpolation="nearest",
                  extent=(-0.5, steps - 0.5, span.stop - 0.5, span.start - 0.5))
        ax.set(xlabel="time step", ylabel="location")
        ax.set_title(name, fontsize=8, loc="left")
    reads.plot(np.arange(len(wanted)), wanted, "r.", markersize=8)
    for ax in (scatter, writes, reads):
        ax.title.set_fontsize(8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)
