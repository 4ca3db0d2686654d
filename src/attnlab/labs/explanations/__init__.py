"""Explanations measured against ground truth (``attnlab lab explanations``).

"Attention is not explanation" is usually argued without a right answer to compare with. Three
of attnlab's trained models have one: the captioner's number words name digits whose boxes are
known, the Neural Turing Machine's answers were written at locations its write head shows, and
a translator's copied words (names, numbers, "in") come from one known source word. The lab
scores five explanations of each output — raw attention, attention rollout and attention flow
(Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"), gradient × attention and
integrated gradients (Sundararajan, Taly & Yan 2017, "Axiomatic Attribution for Deep Networks")
— with the pointing game and a mass measure, beside uniform and random relevance
(:mod:`attnlab.explain` holds the methods; this package the tasks):

* :mod:`~attnlab.labs.explanations.lab` — the run, the table and the verdict;
* :mod:`~attnlab.labs.explanations.captioner`, :mod:`~attnlab.labs.explanations.ntm`,
  :mod:`~attnlab.labs.explanations.translator` — each task's cases and methods;
* :mod:`~attnlab.labs.explanations.outputs` — the explained output (a token's log-probability);
* :mod:`~attnlab.labs.explanations.tally` — the scores and baselines;
* :mod:`~attnlab.labs.explanations.pictures` — one example of each task.
"""

from attnlab.labs.explanations.lab import FULL, QUICK, SOURCE, TITLE, Settings, run

__all__ = ["FULL", "QUICK", "SOURCE", "TITLE", "Settings", "run"]
