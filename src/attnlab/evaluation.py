"""Translation, language-model and speech scores: sacreBLEU, chrF, perplexity, WER and CER.

BLEU (Papineni et al., 2002) and chrF (Popović, 2015) are computed by sacrebleu on
*detokenized*, cased text with its default ``13a`` tokenizer, so numbers are comparable with
published ones (Post, 2018); each score carries sacrebleu's signature
(``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x``), which says exactly how it was
computed. Steinert-Threlkeld's (Transformers I) "Initial WMT Results" table and Ba's (CSC413
Lecture 8) WMT14 table report BLEU.

Word and character error rates (:func:`wer`, :func:`cer`) are the speech recognizer's scores
(Chorowski, Bahdanau, Serdyuk, Cho & Bengio, 2015, "Attention-Based Models for Speech
Recognition"; Hasegawa-Johnson, ECE 417 Lecture 21): the Levenshtein distance between each
hypothesis and its reference, in words (split on whitespace) or characters (spaces included,
ends stripped), summed over the corpus and divided by the references' total length::

    WER = Σ_i lev(ref_i, hyp_i) / Σ_i |ref_i|

``lev`` counts the substitutions, deletions and insertions of the cheapest alignment (each
costs 1), so a rate can exceed 1 when a hypothesis is longer than its reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
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


def edit_distance(reference: Sequence[Hashable], hypothesis: Sequence[Hashable]) -> int:
    """The Levenshtein distance: the fewest substitutions, deletions and insertions that turn
    ``reference`` into ``hypothesis`` (dynamic programming, one row of ``len(hypothesis) + 1``)."""
    row = list(range(len(hypothesis) + 1))  # distances from the empty reference prefix
    for i, r in enumerate(reference, start=1):
        diagonal, row[0] = row[0], i
        for j, h in enumerate(hypothesis, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (r != h))
    return row[-1]


@dataclass(frozen=True)
class ErrorRate:
    """A corpus error rate: ``errors`` (edits) over ``length`` (reference words or characters)."""

    name: str
    errors: int
    length: int
    unit: str

    @property
    def rate(self) -> float:
        """``errors / length`` (a fraction; may exceed 1)."""
        return self.errors / self.length

    def __str__(self) -> str:
        return f"{self.name} = {100 * self.rate:.2f} % ({self.errors} errors / {self.length} {self.unit}s)"


def _words(text: str) -> list[str]:
    return text.split()


def _characters(text: str) -> list[str]:
    return list(text.strip())


def _error_rate(name: str, unit: str, hypotheses: Sequence[str], references: Sequence[str],
                tokens: Callable[[str], list[str]]) -> ErrorRate:
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise ValueError(f"{name} needs sequences of sentences, got one string")
    if len(hypotheses) != len(references):
        raise ValueError(f"references has {len(references)} sentences but hypotheses has {len(hypotheses)}")
    refs = [tokens(r) for r in references]
    length = sum(len(r) for r in refs)
    if length == 0:
        raise ValueError(f"{name} needs references with at least one {unit}, got none")
    errors = sum(edit_distance(r, tokens(h)) for r, h in zip(refs, hypotheses, strict=True))
    return ErrorRate(name, errors, length, unit)


def wer(hypotheses: Sequence[str], references: Sequence[str]) -> ErrorRate:
    """Corpus word error rate of ``hypotheses`` against one reference each (words split on
    whitespace)."""
    return _error_rate("WER", "word", hypotheses, references, _words)


def cer(hypotheses: Sequence[str], references: Sequence[str]) -> ErrorRate:
    """Corpus character error rate of ``hypotheses`` against one reference each (every
    character, spaces too, of the stripped sentences)."""
    return _error_rate("CER", "character", hypotheses, references, _characters)
