"""Mean and variance normalisation of features: each of the ``n_mels`` channels shifted to mean
0 and scaled to variance 1, over one utterance's frames or over the whole training split.

Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based Models for Speech
Recognition", normalise each feature to zero mean and unit variance over the training set, as
Hasegawa-Johnson's ECE 417 Lecture 21 does. For features ``x`` ``(F, D)`` (``F`` frames, ``D``
channels)::

    y[t, d] = (x[t, d] - μ[d]) / sqrt(σ²[d] + ε)

* **per utterance** (:func:`utterance_normalize`): ``μ``, ``σ²`` over the utterance's own frames;
* **global** (:class:`FeatureStats`): ``μ``, ``σ²`` over every frame of the utterances given to
  :meth:`FeatureStats.fit` (the training split), accumulated as float64 sums
  ``Σ x`` and ``Σ x²``, so the order of the utterances does not change them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.validation import check_rank

EPS = 1e-5


def utterance_normalize(features: Tensor, eps: float = EPS) -> Tensor:
    """``features`` ``(F, D)`` (or ``(B, F, D)``, each utterance alone) with each channel at mean 0
    and variance 1 over its frames (the biased variance, ``eps`` added)."""
    check_rank("features", features, (2, 3), "(F, D) or (B, F, D)")
    mean = features.mean(dim=-2, keepdim=True)
    var = features.var(dim=-2, unbiased=False, keepdim=True)
    return (features - mean) / torch.sqrt(var + eps)


@dataclass(frozen=True)
class FeatureStats:
    """The global mean ``(D,)`` and variance ``(D,)`` of training features (float64)."""

    mean: Tensor
    var: Tensor
    frames: int

    @classmethod
    def fit(cls, utterances: Iterable[Tensor]) -> FeatureStats:
        """The statistics of every frame of ``utterances``, each ``(F, D)``."""
        total = squares = None
        frames = 0
        for k, x in enumerate(utterances):
            check_rank(f"utterance {k}", x, 2, "(F, D)")
            x = x.detach().to(torch.float64)
            total = x.sum(0) if total is None else total + x.sum(0)
            squares = x.square().sum(0) if squares is None else squares + x.square().sum(0)
            frames += x.shape[0]
        if total is None or squares is None or frames == 0:
            raise ValueError("FeatureStats.fit needs at least one frame, got none")
        mean = total / frames
        return cls(mean, torch.clamp_min(squares / frames - mean.square(), 0.0), frames)

    def __call__(self, features: Tensor, eps: float = EPS) -> Tensor:
        """``features`` ``(…, D)`` normalised by these statistics, in their own dtype."""
        if features.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"features have {features.shape[-1]} channels but the statistics "
                             f"have {self.mean.shape[0]}")
        mean = self.mean.to(features.device, features.dtype)
        std = torch.sqrt(self.var + eps).to(features.device, features.dtype)
        return (features - mean) / std

    def state_dict(self) -> dict[str, object]:
        """The statistics as plain lists (JSON), to keep with a model."""
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "frames": self.frames}

    @classmethod
    def from_state_dict(cls, state: dict) -> FeatureStats:
        """Statistics saved by :meth:`state_dict`."""
        return cls(torch.tensor(state["mean"], dtype=torch.float64),
                   torch.tensor(state["var"], dtype=torch.float64), int(state["frames"]))
