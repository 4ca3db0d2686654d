"""Translation and language-model scores: sacreBLEU, chrF, perplexity.

BLEU (Papineni et al., 2002) and chrF (Popović, 2015) are computed by sacrebleu on
*detokenized*, cased text with its default ``13a`` tokenizer, so numbers are comparable with
published ones (Post, 2018); each score carries sacrebleu's signature
(``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x``), which says exactly how it was
computed. Steinert-Threlkeld's (Transformers I) "Initial WMT Results" table and Ba's (CSC413
Lecture 8) WMT14 table report BLEU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class Score:
    """A corpus-level score: ``score`` (0-100), sacrebleu's ``signature`` and ``details``
    (e.g. ``BLEU = 38.12 70.1/45.3/31.0/21.6 (BP = 0.981 ratio = 0.981 ...)``)."""

    name: str
    score: float
    signature: str
    details: str

    def __str__(self) -> str:
        return f"{self.details} | {self.signature}"


References = Sequence[str] | Sequence[Sequence[str]]


def _reference_streams(hypotheses: Sequence[str], references: References) -> list[list[str]]:
    """One reference per hypothesis (``list[str]``), or sacrebleu's list of reference streams."""
    if isinstance(hypotheses, str):
        raise ValueError("hypotheses must be a sequence of sentences, got one string")
    if len(hypotheses) == 0:
        raise ValueError("hypotheses must hold at least one sentence, got 0")
    if references and isinstance(references[0], str):
        streams = [list(references)]
    else:
        streams = [list(r) for r in references]
    for k, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"references stream {k} has {len(stream)} sentences but hypotheses has "
                f"{len(hypotheses)}"
            )
    return streams


def _score(
    metric: BLEU | CHRF, name: str, hypotheses: Sequence[str], references: References
) -> Score:
    result = metric.corpus_score(list(hypotheses), _reference_streams(hypotheses, references))
    return Score(name, float(result.score), metric.get_signature().format(), str(result))


def bleu(hypotheses: Sequence[str], references: References) -> Score:
    """Corpus sacreBLEU of detokenized ``hypotheses`` against ``references`` (cased, 13a)."""
    return _score(BLEU(), "BLEU", hypotheses, references)


def chrf(hypotheses: Sequence[str], references: References) -> Score:
    """Corpus chrF (character 6-grams, β = 2) with sacrebleu's defaults."""
    return _score(CHRF(), "chrF", hypotheses, references)


def perplexity(mean_nll: float) -> float:
    """``exp(mean negative log-likelihood per token)`` (natural log); ``inf`` on overflow."""
    value = float(mean_nll)
    if math.isnan(value) or value < 0:
        raise ValueError(f"mean_nll must be a number >= 0, got {value}")
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf
