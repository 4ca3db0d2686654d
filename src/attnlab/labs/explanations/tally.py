"""The lab's bookkeeping: every explained output's scores, per method, with the baselines.

One *case* is one output whose source is known (a number word and its digit's box, an answer
bit vector and its write location, a copied word and its source position). Each method gives a
relevance vector over the case's candidates; :meth:`Tally.add` scores it with the pointing game
and a mass measure (:mod:`attnlab.explain.scores`), and scores two baselines beside it:
**uniform** relevance (its expected pointing hit rate ``|truth| / n``, its mass) and **random**
relevance (i.i.d. uniform numbers from the lab's seeded generator, scored like a method).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attnlab.explain.gradients import Attribution
from attnlab.explain.scores import mass_on_truth, pointing_hit, uniform_pointing

METHODS = ("attention", "rollout", "flow", "gradient × attention", "gradient × attention, all maps",
           "integrated gradients")
BASELINES = ("uniform", "random")


def key_of(method: str) -> str:
    """``method`` as a report number's key: ``gradient × attention, all maps`` →
    ``gradient_x_attention_all_maps``."""
    return method.replace(" × ", "_x_").replace(", ", "_").replace(" ", "_")


@dataclass
class Tally:
    """Scores of one task: ``hits[method]`` (pointing game: 1 or 0, a tie at the top the share
    of the tied candidates that are right; the uniform baseline its expected rate) and
    ``masses[method]``, one entry a case."""

    task: str
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))
    hits: dict[str, list[float]] = field(default_factory=dict)
    masses: dict[str, list[float]] = field(default_factory=dict)
    labels: Counter = field(default_factory=Counter)  # what each case was (a copied word), counted
    facts: dict[str, float] = field(default_factory=dict)  # the task's other numbers (the NTM's write lag)
    gaps: list[float] = field(default_factory=list)  # integrated gradients: |Σ IG − (f(x) − f(x'))|
    deltas: list[float] = field(default_factory=list)  # |f(x) − f(x')|

    def _record(self, method: str, hit: float, mass: float) -> None:
        self.hits.setdefault(method, []).append(float(hit))
        self.masses.setdefault(method, []).append(float(mass))

    def add(self, relevances: dict[str, Tensor], truth: Tensor,
            mass: Callable[[Tensor], float] | None = None, label: str | None = None) -> None:
        """Score one case: ``relevances[method]`` ``(n,)``, ``truth`` ``(n,)`` bool (the right
        candidates); ``mass(relevance)`` the mass measure (default: the share of the positive
        relevance on ``truth``); ``label`` what the case was, counted."""
        truth = truth.bool()
        if label is not None:
            self.labels[label] += 1
        mass = mass or (lambda relevance: mass_on_truth(relevance, truth))
        for method, relevance in relevances.items():
            relevance = relevance.detach().double().flatten()
            self._record(method, pointing_hit(relevance, truth), mass(relevance))
        n = truth.numel()
        self._record("uniform", uniform_pointing(truth), mass(torch.ones(n, dtype=torch.float64)))
        noise = torch.rand(n, generator=self.generator, dtype=torch.float64)
        self._record("random", pointing_hit(noise, truth), mass(noise))

    def completeness(self, attribution: Attribution) -> None:
        """Record how far integrated gradients' sums are from ``f(x) − f(x')`` (each output)."""
        self.gaps += attribution.gap.abs().tolist()
        self.deltas += (attribution.ends[:, 1] - attribution.ends[:, 0]).abs().tolist()

    @property
    def cases(self) -> int:
        """How many outputs were scored."""
        return len(self.hits.get("uniform", []))

    def pointing(self, method: str) -> float:
        """The pointing game's hit rate of ``method`` (nan when it scored nothing)."""
        values = self.hits.get(method, [])
        return sum(values) / len(values) if values else float("nan")

    def mass(self, method: str) -> float:
        """The mean mass measure of ``method`` (nan when it scored nothing)."""
        values = self.masses.get(method, [])
        return sum(values) / len(values) if values else float("nan")

    def best(self) -> list[str]:
        """The method(s) of :data:`METHODS` with the highest pointing rate (ties kept)."""
        scored = [m for m in METHODS if self.hits.get(m)]
        if not scored:
            return []
        top = max(self.pointing(m) for m in scored)
        return [m for m in scored if self.pointing(m) == top]
