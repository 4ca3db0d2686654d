"""A language model's text, prepared once into token files and streamed from them.

The text is a sequence of *documents*: each plain or gzip file is one, each record of a
JSON-lines file is one (its ``text_field``). Documents are joined by ``<eos>`` (nanoGPT's
end-of-text between documents); one file alone has none. Validation text comes from its own
files, or is the last ``1 - train_fraction`` of the characters (nanoGPT's 90 / 10 split).

Preparing reads the files as a stream of pieces of about a megabyte, each cut just before a
``\\n`` that a non-space character follows: no pre-token of the tokenizers here (GPT-2's
byte-level regex, words, characters) spans such a cut, so the ids are those of the whole text
at once, in a fraction of the memory. Three passes: count the characters (and collect them,
for a character vocabulary), learn the tokenizer on the training part (lines, as
``train_from_iterator`` takes them), encode into ``train.bin`` / ``val.bin``
(:mod:`attnlab.data.prepared`), using every core (Hugging Face ``tokenizers`` encodes a batch
of pieces in parallel).
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Full, Queue
from threading import Event, Thread
from typing import Any

import numpy as np

from attnlab.data.corpora import Replaced, normalize_newlines, text_blocks
from attnlab.data.prepared import (
    TokenWriter,
    build_once,
    content_key,
    fingerprint,
    open_tokens,
    token_dtype,
)
from attnlab.data.sources import check_not_empty, is_records, records, text_field
from attnlab.data.tokenizers import (
    UNICODE_SIZE,
    AnyTokenizer,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    load_tokenizer,
)
from attnlab.progress import progress_bar
from attnlab.validation import counted

__all__ = ["PreparedText", "TextSources", "prepare_text"]

BATCH_CHARS = 8 << 20  # characters encoded at once: enough to keep every core busy
BATCH_PIECES = 4096  # and at most this many pieces (short documents: JSON lines)


@dataclass(frozen=True)
class TextSources:
    """Where the text comes from: training files, validation files (empty: the tail of the
    training text), the JSON-lines field, and what to do with bytes that are not UTF-8."""

    train: tuple[Path, ...]
    val: tuple[Path, ...] = ()
    text_field: str = "text"
    train_fraction: float = 0.9
    errors: str = "strict"
    replaced: Replaced = field(default_factory=Replaced, compare=False)

    def documents(self, files: tuple[Path, ...]) -> Iterator[Iterator[str]]:
        """Each document of ``files`` as an iterator of its pieces."""
        for path in files:
            if is_records(path):
                for number, record in records(path, errors=self.errors, replaced=self.replaced):
                    yield iter([normalize_newlines(text_field(record, self.text_field, path, number))])
            else:
                yield self._pieces(path)

    def _pieces(self, path: Path) -> Iterator[str]:
        carry = ""
        for _, text in text_blocks(path, errors=self.errors, replaced=self.replaced):
            text = carry + normalize_newlines(text)
            cut = safe_cut(text)
            carry = text[cut:]
            if cut:
                yield text[:cut]
        if carry:
            yield carry


def safe_cut(text: str) -> int:
    """Where the last ``\\n`` of ``text`` that a non-space character follows begins (0: none).

    GPT-2's pattern never joins such a ``\\n`` to what comes before it: a run of whitespace
    before it gives back its last character when a non-space follows, so the ``\\n`` stands
    alone. Cut *after* the ``\\n`` instead, a line's trailing spaces and its ``\\n`` would
    become one pre-token at the end of a piece, and the ids could differ."""
    end = len(text)
    while (i := text.rfind("\n", 0, end)) > 0:
        if i + 1 < len(text) and not text[i + 1].isspace():
            return i
        end = i
    return 0


@dataclass
class PreparedText:
    """A prepared corpus: its folder, ``meta.json``, tokenizer and memory-mapped streams."""

    folder: Path
    meta: dict[str, Any]
    tokenizer: AnyTokenizer
    built: bool

    def tokens(self, split: str) -> np.ndarray:
        """The ``train`` or ``val`` stream, memory-mapped, shape ``(N,)``."""
        return open_tokens(self.folder, split, self.meta["dtype"])

    def notes(self) -> list[str]:
        """What to print: the folder and its counts; validation lines also in the training text;
        lines whose bytes were replaced."""
        m, how = self.meta, "prepared" if self.built else "reusing"
        lines = [f"{how} {self.folder}: {counted(m['documents'], 'document')}, "
                 f"{m['tokens']['train']:,} train / {m['tokens']['val']:,} val tokens ({m['dtype']})"]
        seen = m["overlap"]
        if seen["also_in_train"]:
            lines.append(f"note: {seen['also_in_train']:,} of the {seen['val_lines']:,} distinct validation "
                         "lines also occur in the training text")
        return lines + ([Replaced.describe(m["replaced"])] if m["replaced"] else [])


# ----------------------------------------------------------------------------- pass 1: count
def count_characters(sources: TextSources, *, want_chars: bool,
                     progress: bool = False) -> tuple[array, np.ndarray | None]:
    """The characters of each training document (and, with ``want_chars``, which code points
    occur anywhere, validation files included)."""
    lengths, seen = array("q"), np.zeros(UNICODE_SIZE, bool) if want_chars else None
    bar = progress_bar(None, unit="char", enabled=progress, desc="reading", leave=False)
    for files in (sources.train, sources.val):
        for document in sources.documents(files):
            n = 0
            for piece in document:
                n += len(piece)
                bar.update(len(piece))
                if seen is not None:
                    seen[np.frombuffer(piece.encode("utf-32-le"), np.uint32)] = True
            if files is sources.train:
                lengths.append(n)
    bar.close()
    if sum(lengths) == 0:
        raise ValueError(f"the training text ({', '.join(map(str, sources.train[:3]))}) is empty")
    return lengths, seen


def split_point(sources: TextSources, lengths: array) -> int:
    """How many characters of the training documents train (the rest validate, without val files)."""
    total = sum(lengths)
    return total if sources.val else int(total * sources.train_fraction)


# ----------------------------------------------------------------------------- pass 2: learn
def learn_tokenizer(kind: str, vocab_size: int, sources: TextSources, train_chars: int,
                    seen: np.ndarray | None, *, progress: bool = False) -> AnyTokenizer:
    """Characters of the whole text (as nanoGPT), or BPE / words learned on the training part."""
    if kind == "char":
        return CharTokenizer(chr(c) for c in np.flatnonzero(seen))
    bar = progress_bar(train_chars, unit="char", enabled=progress, desc=f"learning {kind}", leave=False)

    def lines() -> Iterator[list[str]]:
        for piece, split in _routed(sources, train_chars):
            if split == "train":
                bar.update(len(piece))
                yield piece.splitlines(keepends=True)

    with bar:
        return WordTokenizer.train(lines()) if kind == "word" else Tokenizer.train(lines(), vocab_size)


def _routed(sources: TextSources, train_chars: int) -> Iterator[tuple[str, str]]:
    """``(piece, split)`` of every document (a piece cut in two at the split point), and
    ``("", split)`` after each document: where its ``<eos>`` would go."""
    position = 0
    for files in (sources.train, sources.val):
        for document in sources.documents(files):
            for piece in document:
                if not piece:
                    continue  # an empty record: no text (an empty piece marks a document's end)
                if files is sources.val:
                    yield piece, "val"
                    continue
                start, position = position, position + len(piece)
                if position <= train_chars or start >= train_chars:
                    yield piece, "train" if position <= train_chars else "val"
                else:
                    yield piece[: train_chars - start], "train"
                    yield piece[train_chars - start :], "val"
            yield "", "val" if files is sources.val or position > train_chars else "train"


# ----------------------------------------------------------------------------- pass 3: encode
def _encode(sources: TextSources, tokenizer: AnyTokenizer, train_chars: int, out: Path,
            total: int, progress: bool) -> dict[str, Any]:
    """Encode every piece into ``train.bin`` / ``val.bin``; a reading thread routes the pieces
    ahead of the encoder and checks the training lines against the validation lines' hashes
    (:func:`validation_hashes`) on the way."""
    dtype = token_dtype(tokenizer.vocab_size)
    writers = {s: _Writer(out, s, dtype) for s in ("train", "val")}
    val = validation_hashes(sources, train_chars)
    found = np.zeros(len(val), bool)
    documents, pending, size = 0, [], 0
    bar = progress_bar(total, unit="char", enabled=progress, desc="tokenizing", leave=False)
    with _ReadAhead(sources, train_chars, val, found) as pieces:
        for piece, split in pieces:
            documents += not piece
            pending.append((piece, split))
            size += len(piece)
            if size >= BATCH_CHARS or len(pending) >= BATCH_PIECES:
                bar.update(_flush(pending, tokenizer, writers))
                size = 0
    bar.update(_flush(pending, tokenizer, writers))
    bar.close()
    counts = {s: w.close() for s, w in writers.items()}
    overlap = {"val_lines": len(val), "also_in_train": int(found.sum())}
    return {"dtype": dtype.name, "documents": documents, "tokens": counts, "overlap": overlap}


class _ReadAhead:
    """:func:`_routed`'s pieces, read by a thread a few batches ahead of their consumer; each
    training piece's lines marked in ``found`` where ``val`` (sorted hashes) has them."""

    def __init__(self, sources: TextSources, train_chars: int, val: np.ndarray, found: np.ndarray) -> None:
        self.args, self.val, self.found = (sources, train_chars), val, found
        self.queue: Queue = Queue(maxsize=64)  # pieces of a megabyte at most, or documents
        self.stop = Event()
        self.thread = Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        try:
            for piece, split in _routed(*self.args):
                if self.stop.is_set():
                    return  # the consumer is gone: read no further
                if split == "train" and piece and len(self.val):
                    hashes = _line_hashes(piece)
                    at = np.minimum(np.searchsorted(self.val, hashes), len(self.val) - 1)
                    self.found[at[self.val[at] == hashes]] = True
                self._put((piece, split))
            self._put(None)
        except BaseException as err:  # handed to the consumer, raised there
            self._put(err)

    def _put(self, item: object) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Full):
                self.queue.put(item, timeout=0.1)
                return

    def _pieces(self) -> Iterator[tuple[str, str]]:
        while (item := self.queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def __enter__(self) -> Iterator[tuple[str, str]]:
        self.thread.start()
        return self._pieces()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # a consumer that stopped early (an error, Ctrl-C) frees the reader
        self.thread.join()


class _Writer:
    """One split's stream; ``<eos>`` between documents (never after the last)."""

    def __init__(self, out: Path, split: str, dtype: np.dtype) -> None:
        self.tokens, self.eos_due = TokenWriter(out, split, dtype), False

    @property
    def count(self) -> int:
        return self.tokens.tokens

    def write(self, ids: np.ndarray, eos: int) -> None:
        if self.eos_due and ids.size:
            self.tokens.add([eos])
        self.tokens.add(ids)
        self.eos_due = self.eos_due and not ids.size

    def close(self) -> int:
        return self.tokens.close()["tokens"]


def _flush(pending: list[tuple[str, str]], tokenizer: AnyTokenizer, writers: dict[str, _Writer]) -> int:
    texts = [p for p, _ in pending if p]
    encoded = iter(tokenizer.encode_arrays(texts))
    for piece, split in pending:
        if piece:
            writers[split].write(next(encoded), tokenizer.eos_id)
        else:
            writers[split].eos_due = writers[split].count > 0
    pending.clear()
    return sum(len(t) for t in texts)


def _line_hashes(piece: str) -> np.ndarray:
    """A 64-bit hash of each non-blank line of ``piece`` (stripped), (lines,)."""
    return np.fromiter((hash(s) for line in piece.splitlines() if (s := line.strip())), np.int64)


def validation_hashes(sources: TextSources, train_chars: int) -> np.ndarray:
    """The sorted distinct hashes of the non-blank validation lines (before the encoding pass,
    which checks the training lines against them)."""
    routed = _routed(sources, train_chars)
    parts = [_line_hashes(piece) for piece, split in routed if split == "val"]
    return np.unique(np.concatenate([np.zeros(0, np.int64), *parts]))


# ----------------------------------------------------------------------------- the whole
def prepare_text(
    sources: TextSources, *, kind: str, vocab_size: int, tokenizer: AnyTokenizer | None,
    cache: Path, progress: bool = True,
) -> PreparedText:
    """The prepared corpus of ``sources`` tokenized by ``tokenizer`` (or one of ``kind`` learned
    from them), from the cache or built into it."""
    for path in (*sources.train, *sources.val):
        check_not_empty(path)
    files = fingerprint([*sources.train, *sources.val], cache)
    split = {"val_files": len(sources.val), "train_fraction": sources.train_fraction,
             "text_field": sources.text_field, "errors": sources.errors}
    learned = ({"kind": kind, "vocab_size": vocab_size} if tokenizer is None
               else {"given": tokenizer.to_json()})
    key = content_key("text", files, split, learned)

    def build(tmp: Path) -> dict[str, Any]:
        lengths, seen = count_characters(sources, want_chars=tokenizer is None and kind == "char",
                                         progress=progress)
        train_chars = split_point(sources, lengths)
        tok = tokenizer or learn_tokenizer(kind, vocab_size, sources, train_chars, seen, progress=progress)
        tok.save(tmp)
        encoded = _encode(sources, tok, train_chars, tmp, sum(lengths), progress)
        return {"sources": files, "split": split, "train_chars": train_chars, **encoded,
                "replaced": sources.replaced.lines}

    meta, built = build_once(cache / key, build)
    prepared = PreparedText(cache / key, meta, tokenizer or load_tokenizer(cache / key), built)
    for name, n in (("training", meta["tokens"]["train"]), ("validation", meta["tokens"]["val"])):
        if n == 0:
            raise ValueError(f"the {name} text is empty after splitting; change data.train_fraction "
                             "or data.val")
    return prepared

