"""The alignment of a recognizer drawn over its spectrogram, after Chorowski, Bahdanau, Serdyuk,
Cho & Bengio (2015), "Attention-Based Models for Speech Recognition", Figure 1 (and
Hasegawa-Johnson, ECE 417 Lecture 21): the log-mel features on top, frames across; below, each
output character's attention weights over the encoder's keys, stretched to the frames they
summarise (a key covers ``reduction`` frames), so a diagonal shows where each character was heard.

matplotlib is imported inside the functions, not by ``import attnlab``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.visualize.attention import printable
from attnlab.visualize.figure import save_figure


def plot_speech_alignment(features: Any, weights: Any, characters: Sequence[str], path: str | Path, *,
                          reduction: int, title: str = "") -> Path:
    """Draw ``features`` ``(F, D)`` above ``weights`` ``(T, S)`` (row ``t`` the attention that wrote
    ``characters[t]``, key ``s`` covering frames ``s · reduction`` onwards) into ``path``."""
    feats, alpha = (np.asarray(x.detach().float().cpu() if isinstance(x, torch.Tensor) else x)
                    for x in (features, weights))
    if alpha.ndim != 2 or alpha.shape[0] != len(characters):
        raise ValueError(f"weights must be (T={len(characters)}, S), one row a character, got {alpha.shape}")
    return save_figure(speech_alignment_figure(feats, alpha, characters, reduction, title), path)


def speech_alignment_figure(features: np.ndarray, weights: np.ndarray, characters: Sequence[str],
                            reduction: int, title: str = "") -> Any:
    """The ``Figure`` of :func:`plot_speech_alignment`."""
    from matplotlib.figure import Figure

    frames = features.shape[0]
    height = 2.0 + 0.16 * len(characters)
    fig = Figure(figsize=(min(max(6.0, frames / 40), 16.0), height + 2.0), layout="constrained")
    draw_speech_alignment(fig, features, weights, characters, reduction, title)
    return fig


def draw_speech_alignment(fig: Any, features: np.ndarray, weights: np.ndarray, characters: Sequence[str],
                          reduction: int, title: str = "") -> None:
    """Draw the spectrogram above the alignment on ``fig`` (a ``Figure`` or a subfigure)."""
    frames = features.shape[0]
    stretched = np.repeat(weights, reduction, axis=1)[:, :frames]  # (T, F)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2.0, 2.0 + 0.16 * len(characters)])
    top.imshow(features.T, origin="lower", aspect="auto", cmap="magma", interpolation="nearest")
    top.set_ylabel("mel channel")
    top.set_title(title or "log-mel features and the alignment")
    bottom.imshow(stretched, aspect="auto", cmap="Greys", vmin=0.0, interpolation="nearest")
    bottom.set_yticks(range(len(characters)), [printable(c) if c != " " else "␣" for c in characters],
                      fontsize=7)
    bottom.set_xlabel(f"frame (10 ms); one key = {reduction} frames")
    bottom.set_ylabel("output character")


def plot_speech_beside_translation(features: Any, weights: Any, characters: Sequence[str], *, reduction: int,
                                   translation: Any, source: Sequence[str], target: Sequence[str],
                                   path: str | Path, titles: tuple[str, str] = ("", "")) -> Path:
    """A recognizer's alignment over its spectrogram (:func:`plot_speech_alignment`'s
    ``features`` ``(F, D)``, ``weights`` ``(T, S)``) beside a translator's ``translation``
    ``(T', S')`` (``target`` down, ``source`` across): the ASR/MT table of Hasegawa-Johnson's
    ECE 417 Lecture 21, where the first alignment is monotone and the second need not be. Both
    in one grey scale (white = 0)."""
    from matplotlib.figure import Figure

    from attnlab.visualize.attention import draw_attention

    feats, alpha, beta = (np.asarray(x.detach().float().cpu() if isinstance(x, torch.Tensor) else x)
                          for x in (features, weights, translation))
    if alpha.ndim != 2 or alpha.shape[0] != len(characters):
        raise ValueError(f"weights must be (T={len(characters)}, S), one row a character, got {alpha.shape}")
    fig = Figure(figsize=(16.0, 3.5 + 0.16 * len(characters)), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1.6, 1.0])
    draw_speech_alignment(left, feats, alpha, characters, reduction, titles[0])
    draw_attention(right.add_subplot(), beta, x_labels=source, y_labels=target, title=titles[1] or None,
                   cmap="Greys", axis_names=("source", "target"))
    return save_figure(fig, path)
