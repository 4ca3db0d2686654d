"""A small real classification task: is this line Shakespeare or the King James Bible?

The downstream task for GPT-1-style transfer (Ba (CSC413 Lecture 8), "Transformer Language
Pre-training": pre-train a language model, then fine-tune it on document classification).
Label 0 = a line of dialogue from tinyshakespeare, label 1 = a KJV verse
(:mod:`attnlab.data.kjv`).

How the examples are made (so that neither length nor alphabet gives the answer away):

* **Shakespeare lines** are the non-empty lines of tinyshakespeare minus speaker names (the
  first line of every paragraph, ``"ROMEO:"``). By default they come only from the last
  ``holdout_fraction`` = 10 % of the text (split at that character position, the partial
  first line dropped) — the part the ``shakespeare_char`` LM recipe keeps for validation —
  so a pretrained checkpoint has never trained on any of them.
* **KJV verses** are ~3.5× longer than verse lines (mean 132 vs 38 characters). Each verse
  is cut to a length drawn from the Shakespeare lines' length distribution, at the word
  boundary closest to it (at least one word), so the two length distributions match;
  :func:`length_baseline` measures what length alone still predicts.
* **Characters**: both classes pass through :func:`fit_to_vocab` — typographic characters
  are mapped (’ → ', — → --, æ → ae, accents stripped) and, given a character vocabulary
  (a pretrained char-level model's), anything else is dropped (KJV's brackets and
  parentheses, which never occur in tinyshakespeare).
* Duplicates are removed within each class and any text found in both classes is dropped;
  then ``per_class`` examples of each class are drawn (seeded) and split
  train / val / test per class, so every split is balanced.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attnlab.config import Config
from attnlab.data.corpora import load_tinyshakespeare
from attnlab.data.kjv import load_kjv_verses

PRESET = "shakespeare_vs_kjv"
"""The bundled task's name as a recipe's ``data.corpus``."""
LABELS = ("shakespeare", "kjv")
TYPOGRAPHY = {"’": "'", "‘": "'", "“": '"', "”": '"', "—": "--", "–": "-", "Æ": "AE", "æ": "ae"}

_TYPOGRAPHY_TABLE = str.maketrans(TYPOGRAPHY)

Example = tuple[str, int]  # (text, label)


@dataclass
class ShakespeareKJVConfig(Config):
    """The ``[data]`` table of ``configs/shakespeare_vs_kjv.toml``.

    ``per_class = 0`` takes as many examples as the smaller class has. ``holdout_fraction``
    is the tail of tinyshakespeare the lines come from (1.0 = the whole play text).
    ``train_per_class > 0`` keeps only that many training examples of each class (val and
    test unchanged): the low-data regime where pre-training should help most.
    """

    per_class: int = 0
    train_per_class: int = 0
    val_fraction: float = 0.1
    test_fraction: float = 0.2
    holdout_fraction: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("per_class", "train_per_class"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 < self.holdout_fraction <= 1.0:
            raise ValueError(f"holdout_fraction must be in (0, 1], got {self.holdout_fraction}")
        for name in ("val_fraction", "test_fraction"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ValueError(
                f"val_fraction + test_fraction must be < 1, got "
                f"{self.val_fraction} + {self.test_fraction}"
            )


@dataclass
class TextClassificationData:
    """Labelled lines split three ways; ``label_names[i]`` names label ``i``."""

    train: list[Example]
    val: list[Example]
    test: list[Example]
    label_names: tuple[str, ...] = field(default=LABELS)

    def describe(self) -> str:
        sizes = ", ".join(f"{name} {len(getattr(self, name))}" for name in ("train", "val", "test"))
        return f"{len(self.label_names)} classes ({', '.join(self.label_names)}); {sizes}"


def fit_to_vocab(text: str, chars: Collection[str] | None = None) -> str:
    """``text`` mapped onto a character vocabulary: :data:`TYPOGRAPHY` replacements, accents
    stripped (NFKD), characters outside ``chars`` dropped (none when ``chars`` is None),
    whitespace collapsed to single spaces."""
    text = text.translate(_TYPOGRAPHY_TABLE)
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if chars is not None:
        unknown = {c for c in set(text) if not c.isspace()}.difference(chars)
        text = text.translate(dict.fromkeys(map(ord, unknown)))
    return " ".join(text.split())


def shakespeare_lines(text: str, holdout_fraction: float = 0.1) -> list[str]:
    """Dialogue lines of the last ``holdout_fraction`` of tinyshakespeare: speaker names
    (every paragraph's first line) and blank lines removed, and the first line — cut at the
    split point, or a speaker name — dropped with them."""
    start = int(len(text) * (1.0 - holdout_fraction))
    lines = text[start:].split("\n")
    kept = []
    for previous, line in zip(["", *lines], lines, strict=False):
        if line.strip() and previous.strip():  # a paragraph's first line names the speaker
            kept.append(line.strip())
    return kept


def cut_at_word(text: str, length: int) -> str:
    """The prefix of whole words of ``text`` whose length is closest to ``length`` (ties:
    the shorter), never empty."""
    words = text.split()
    best, prefix = words[0], words[0]
    for word in words[1:]:
        prefix = f"{prefix} {word}"
        if abs(len(prefix) - length) < abs(len(best) - length):
            best = prefix
        elif len(prefix) > length:
            break
    return best


def _unique(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(t for t in texts if t))


def _split(items: list[str], label: int, cfg: ShakespeareKJVConfig) -> list[list[Example]]:
    n_test, n_val = round(len(items) * cfg.test_fraction), round(len(items) * cfg.val_fraction)
    if min(n_test, n_val, len(items) - n_test - n_val) < 1:
        raise ValueError(f"per_class={len(items)} is too small to give every split an example")
    test, val, train = items[:n_test], items[n_test:n_test + n_val], items[n_test + n_val:]
    if cfg.train_per_class:
        if cfg.train_per_class > len(train):
            raise ValueError(
                f"train_per_class must be <= {len(train)} (the training examples of a class), "
                f"got {cfg.train_per_class}"
            )
        train = train[: cfg.train_per_class]
    return [[(t, label) for t in part] for part in (train, val, test)]


def shakespeare_vs_kjv(
    shakespeare_text: str,
    kjv_verses: Sequence[str],
    config: ShakespeareKJVConfig | None = None,
    *,
    chars: Collection[str] | None = None,
) -> TextClassificationData:
    """Balanced, seeded train/val/test splits of Shakespeare lines (0) vs KJV verses (1),
    made as the module docstring describes; ``chars`` is the model's character vocabulary."""
    cfg = config or ShakespeareKJVConfig()
    rng = random.Random(cfg.seed)
    raw_lines = shakespeare_lines(shakespeare_text, cfg.holdout_fraction)
    lines = _unique(fit_to_vocab(t, chars) for t in raw_lines)
    if not lines:
        raise ValueError("shakespeare_text has no dialogue lines")
    lengths = [len(t) for t in lines]
    verses = [fit_to_vocab(v, chars) for v in kjv_verses]
    verses = _unique(cut_at_word(v, rng.choice(lengths)) for v in verses if v)
    taken = set(lines)
    verses = [v for v in verses if v not in taken]
    available = min(len(lines), len(verses))
    n = cfg.per_class or available
    if n > available:
        raise ValueError(
            f"per_class must be <= {available} (Shakespeare lines: {len(lines)}, KJV verses: "
            f"{len(verses)}), got {n}"
        )
    parts = [_split(rng.sample(pool, n), label, cfg) for label, pool in enumerate((lines, verses))]
    train, val, test = (a + b for a, b in zip(*parts, strict=True))
    for split in (test, val, train):  # test and val do not depend on train_per_class
        rng.shuffle(split)
    return TextClassificationData(train, val, test, label_names=LABELS)


def load_shakespeare_vs_kjv(
    config: ShakespeareKJVConfig | None = None,
    *,
    chars: Collection[str] | None = None,
    data_dir: str | None = None,
    sword_dir: str | None = None,
) -> TextClassificationData:
    """:func:`shakespeare_vs_kjv` on tinyshakespeare (``data_dir`` / ``$ATTNLAB_DATA``) and the
    installed KJV (``make data-kjv`` installs it)."""
    text = load_tinyshakespeare(data_dir)
    verses = load_kjv_verses(sword_dir)
    return shakespeare_vs_kjv(text, verses, config, chars=chars)


def length_baseline(train: Sequence[Example], test: Sequence[Example]) -> float:
    """Test accuracy of the best length-threshold rule fitted on ``train`` (two classes).

    The rule is ``label = a if len(text) <= t else b``; ``t`` and the orientation maximise
    train accuracy. Near 0.5 means length alone does not tell the classes apart.
    """
    def accuracy(data: Sequence[Example], t: int, short: int) -> float:
        return sum((len(x) <= t) == (y == short) for x, y in data) / len(data)

    labels = sorted({y for _, y in train})
    if len(labels) != 2:
        raise ValueError(f"train must hold exactly 2 labels, got {labels}")
    candidates = sorted({len(x) for x, _ in train})
    rules = [(t, s) for t in candidates for s in labels]
    t, short = max(rules, key=lambda rule: accuracy(train, *rule))
    return accuracy(test, t, short)


def encode_examples(
    examples: Sequence[Example], tokenizer, max_len: int
) -> tuple[list[list[int]], Tensor]:
    """Token ids GPT-1 style, ``<bos> text <eos>`` (start and extract tokens, Radford et al.
    2018 Fig. 1), the text cut to ``max_len - 2`` tokens; and the labels ``(N,)``."""
    ids, labels, _ = encode_counting(examples, tokenizer, max_len)
    return ids, labels


def encode_counting(
    examples: Sequence[Example], tokenizer, max_len: int
) -> tuple[list[list[int]], Tensor, int]:
    """:func:`encode_examples` and how many texts were cut (longer than ``max_len - 2`` tokens)."""
    if max_len < 3:
        raise ValueError(f"max_len must be >= 3 (bos, a token, eos), got {max_len}")
    ids, cut = [], 0
    for text, _ in examples:
        tokens = tokenizer.encode(text)
        cut += len(tokens) > max_len - 2
        ids.append([tokenizer.bos_id, *tokens[: max_len - 2], tokenizer.eos_id])
    return ids, torch.tensor([label for _, label in examples], dtype=torch.long), cut


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Right-pad ``seqs`` to ``idx`` ``(B, n_max)``; ``lengths`` ``(B,)``. Right padding is
    safe under a causal mask: no real position attends to a pad."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)  # (B,)
    idx = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)  # (B, n)
    for row, s in enumerate(seqs):
        idx[row, : len(s)] = torch.tensor(s, dtype=torch.long)
    return idx, lengths
