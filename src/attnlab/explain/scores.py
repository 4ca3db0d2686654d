"""Scoring an explanation against a known answer.

An explanation is a relevance vector over ``n`` candidates (the cells of an image grid, the
locations of a memory, the positions of a source sentence); the truth is the set of candidates
the output really came from, or a distribution over them.

* **Pointing game** (Zhang, Lin, Brandt, Shen & Sclaroff 2016, "Top-down Neural Attention by
  Excitation Backprop"): a hit when the most relevant candidate is a true
  one (:func:`pointing_hit`). Candidates tied at the top count as a draw among them: the score
  is the share of the tied ones that are true, the expected hit of a random tie-break — so
  uniform relevance scores ``|truth| / n`` (:func:`uniform_pointing`), and a method that cannot
  tell its top candidates apart gains nothing from their order.
* **Mass on the truth** — the energy-based pointing game (Wang et al. 2020, "Score-CAM:
  Score-Weighted Visual Explanations for Convolutional Neural Networks"): the share of the positive
  relevance that lies on the true candidates (:func:`mass_on_truth`; uniform relevance gives
  ``|truth| / n``), and, for a true *distribution* ``q``, the **overlap** ``Σ_i min(p_i, q_i)``
  of the positive relevance normalised to ``p`` with it (:func:`overlap`; 1 when they are equal,
  0 when disjoint). Relevance with no positive part scores 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.validation import check_rank, shape_str

__all__ = ["mass_on_truth", "overlap", "pointing_hit", "positive_share", "uniform_pointing"]


def _check(relevance: Tensor, truth: Tensor) -> None:
    check_rank("relevance", relevance, 1, "(n,) one value a candidate")
    if truth.shape != relevance.shape:
        raise ValueError(
            f"truth has shape {shape_str(truth.shape)} but relevance has {shape_str(relevance.shape)}"
        )


def pointing_hit(relevance: Tensor, truth: Tensor, *, tolerance: float = 1e-9) -> float:
    """1.0 when the candidate of largest ``relevance`` ``(n,)`` is in ``truth`` ``(n,)`` (bool),
    0.0 when not; when several tie at the top (within ``tolerance`` of the largest, relative),
    the share of them in ``truth``."""
    _check(relevance, truth)
    relevance = relevance.double()
    top = relevance.max()
    tied = relevance >= top - tolerance * top.abs().clamp(min=1e-300)
    return float(truth.bool()[tied].double().mean())


def uniform_pointing(truth: Tensor) -> float:
    """The pointing game's hit rate of uniform relevance: ``|truth| / n``."""
    return float(truth.float().mean())


def positive_share(relevance: Tensor) -> Tensor:
    """The positive part of ``relevance`` normalised to sum to 1 (zeros when none is positive)."""
    positive = relevance.double().clamp(min=0)
    total = positive.sum()
    return positive / total if total > 0 else positive


def mass_on_truth(relevance: Tensor, truth: Tensor) -> float:
    """The share of the positive ``relevance`` ``(n,)`` on the candidates of ``truth`` ``(n,)``."""
    _check(relevance, truth)
    return float(positive_share(relevance)[truth.bool()].sum())


def overlap(relevance: Tensor, truth: Tensor) -> float:
    """``Σ_i min(p_i, q_i)``: ``p`` the positive ``relevance`` normalised, ``q`` the distribution
    ``truth`` ``(n,)`` (normalised here too)."""
    _check(relevance, truth)
    return float(torch.minimum(positive_share(relevance), positive_share(truth)).sum())
