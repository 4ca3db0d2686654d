"""Labelled text of your own for the classification task (``[data] corpus = PATH``).

The files (:func:`attnlab.data.sources.expand`: a file, a folder, a glob or a list; plain or
gzip UTF-8) hold one example a line:

* **TSV**: ``text<TAB>label`` (exactly one tab; blank lines skipped);
* **JSON lines** (``.jsonl`` / ``.ndjson``): the text under ``text_field``, the label under
  ``label_field`` (a string or an integer).

``val`` and ``test`` name files of their own; a split without files is held out of the
training files by a hash of each text (BLAKE2b; a text's share in [0, 1) below
``test_fraction`` tests, below ``test_fraction + val_fraction`` validates), so duplicates land
in the same split and the split never depends on the order of the lines. The label names are
the sorted distinct labels of the training split (numerically when all are integers); label
``i`` is ``label_names[i]``.

Every problem is one line naming the file (and the line): an empty file, a TSV line without
exactly one tab, a JSON line without the text or the label, an empty text or label, fewer than
two classes in training, a validation or test label training never saw, a split left empty.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from attnlab.data.classification import Example, TextClassificationData, fit_to_vocab
from attnlab.data.sources import (
    PathSpec,
    check_not_empty,
    expand,
    field,
    is_records,
    records,
    text_field,
    tsv_fields,
)
from attnlab.validation import counted

Row = tuple[str, str, str]  # (text, label, "file:line")
SPLITS = ("train", "val", "test")


def read_rows(spec: PathSpec, what: str, *, text_name: str = "text", label_name: str = "label") -> list[Row]:
    """``(text, label, "file:line")`` of every example in the files ``spec`` names, in order.

    Raises:
        ValueError: an empty file, a malformed line (``file:line``), an empty text or label.
    """
    rows: list[Row] = []
    for path in expand(spec, what):
        check_not_empty(path)
        found = list(_json_rows(path, text_name, label_name) if is_records(path) else _tsv_rows(path))
        if not found:
            raise ValueError(f"{path} holds no examples (only blank lines)")
        rows += found
    return rows


def _tsv_rows(path: Path) -> Iterator[Row]:
    for number, text, label in tsv_fields(path, ("text", "label")):
        yield _row(text, label, path, number)


def _json_rows(path: Path, text_name: str, label_name: str) -> Iterator[Row]:
    for number, record in records(path):
        text = text_field(record, text_name, path, number)
        label = field(record, label_name, path, number)
        if isinstance(label, bool) or not isinstance(label, str | int):
            raise ValueError(f"{path}:{number}: field {label_name!r} must be a string or an integer, "
                             f"got {type(label).__name__}")
        yield _row(text, str(label), path, number)


def _row(text: str, label: str, path: Path, number: int) -> Row:
    text, label = text.strip(), label.strip()
    if not text or not label:
        raise ValueError(f"{path}:{number}: the {'text' if not text else 'label'} is empty")
    return text, label, f"{path}:{number}"


def hash_share(text: str) -> float:
    """Where ``text`` falls in [0, 1): its BLAKE2b digest (8 bytes) as a fraction."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def hold_out(rows: Sequence[Row], val_fraction: float, test_fraction: float) -> dict[str, list[Row]]:
    """``rows`` split by :func:`hash_share`: below ``test_fraction`` test, below
    ``test_fraction + val_fraction`` val, the rest train (a fraction of 0 holds none out)."""
    parts: dict[str, list[Row]] = {name: [] for name in SPLITS}
    for row in rows:
        share = hash_share(row[0])
        name = "test" if share < test_fraction else "val" if share < test_fraction + val_fraction else "train"
        parts[name].append(row)
    return parts


def label_names(train: Sequence[Row]) -> tuple[str, ...]:
    """The sorted distinct labels of ``train`` (as numbers when every label is an integer).

    Raises:
        ValueError: fewer than two distinct labels.
    """
    labels = {label for _, label, _ in train}
    numeric = all(label.lstrip("-").isdigit() for label in labels)
    names = tuple(sorted(labels, key=int if numeric else None))
    if len(names) < 2:
        raise ValueError(f"the training examples hold {counted(len(names), 'class', 'classes')} "
                         f"({', '.join(names)}); a classifier needs at least 2")
    return names


def numbered(rows: Sequence[Row], names: Sequence[str], split: str) -> list[Example]:
    """``rows`` as ``(text, label id)``; a label outside ``names`` is refused at its line."""
    ids = {name: i for i, name in enumerate(names)}
    out = []
    for text, label, where in rows:
        if label not in ids:
            raise ValueError(f"{where}: label {label!r} of a {split} example does not occur in the training "
                             f"examples (their labels: {', '.join(names)})")
        out.append((text, ids[label]))
    return out


def read_labelled(
    corpus: PathSpec, val: PathSpec, test: PathSpec, *, val_fraction: float, test_fraction: float,
    text_name: str = "text", label_name: str = "label",
) -> TextClassificationData:
    """The three splits of the user's labelled files (the module docstring): ``val`` / ``test``
    their own files, or ``""`` to hold them out of ``corpus`` by hash.

    Raises:
        ValueError: as the module docstring lists.
    """
    def rows(spec: PathSpec, what: str) -> list[Row]:
        return read_rows(spec, what, text_name=text_name, label_name=label_name) if spec else []

    held = (0.0 if val else val_fraction, 0.0 if test else test_fraction)
    parts = hold_out(rows(corpus, "data.corpus"), *held)
    parts["val"] += rows(val, "data.val")
    parts["test"] += rows(test, "data.test")
    _check_filled(parts)
    names = label_names(parts["train"])
    splits = [numbered(parts[name], names, name) for name in SPLITS]
    return TextClassificationData(*splits, label_names=names)


def _check_filled(parts: dict[str, list[Row]]) -> None:
    if not parts["train"]:
        raise ValueError("no training examples: the hash held every example of data.corpus out")
    for name in ("val", "test"):
        if not parts[name]:
            raise ValueError(f"no {name} examples: the hash held none of data.corpus out at "
                             f"data.{name}_fraction; raise it or name data.{name}")


def overlap_note(data: TextClassificationData) -> str | None:
    """A note counting the validation and test texts that are training texts too (None: none)."""
    seen = {text for text, _ in data.train}
    counts = {name: sum(text in seen for text, _ in getattr(data, name)) for name in ("val", "test")}
    if not any(counts.values()):
        return None
    parts = [f"{n:,} of {len(getattr(data, name)):,} {name}" for name, n in counts.items() if n]
    return f"note: {' and '.join(parts)} texts also occur in the training examples"


def fit_to_chars(
    data: TextClassificationData, chars: Collection[str]
) -> tuple[TextClassificationData, str | None]:
    """``data`` with every text that holds characters outside ``chars`` (a character
    tokenizer's vocabulary) passed through :func:`~attnlab.data.classification.fit_to_vocab`
    (typography mapped, accents stripped, the rest dropped); a note counting them (None: none)."""
    known, changed, dropped = set(chars), 0, 0

    def fit(split: list[Example]) -> list[Example]:
        nonlocal changed, dropped
        out = []
        for text, label in split:
            if not set(text) <= known:
                fitted = fit_to_vocab(text, known)
                changed, dropped = changed + 1, dropped + sum(c not in known for c in text)
                text = fitted
            out.append((text, label))
        return out

    fitted = TextClassificationData(*(fit(getattr(data, n)) for n in SPLITS), label_names=data.label_names)
    if not changed:
        return fitted, None
    return fitted, (f"note: {counted(changed, 'text')} held {counted(dropped, 'character')} outside the "
                    f"tokenizer's {counted(len(known), 'character')}: mapped or dropped")
