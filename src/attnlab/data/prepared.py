"""Prepared token files: a corpus tokenized once into memory-mapped arrays, reused by every run
(nanoGPT's ``train.bin``, with the offsets fairseq's indexed datasets add for sentence pairs).

One prepared corpus is a folder of the cache, written atomically (a crash or Ctrl-C leaves no
half of one behind)::

    meta.json         what it holds: format, token dtype, counts, the sources' fingerprints
    tokenizer*.json   the tokenizer(s) that made it
    NAME.bin          token ids, uint16 where the vocabulary fits (≤ 65,536 ids), else uint32
    NAME.idx          int64 offsets (rows + 1) where the ids are rows (sentences)

Its name is a hash of what decides its content: each source's size, modification time and
sha256, and the tokenizer and split settings; a changed file, tokenizer or setting makes a
new one. A file's sha256 is remembered by (path, size, time, inode), so an unchanged corpus
is not read again to find its folder. Processes that prepare the same corpus at once (the
ranks of ``torchrun`` on one machine) take turns on a lock: one writes, the others read it.

The cache is ``$ATTNLAB_CACHE``, else ``~/.cache/attnlab/prepared``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.atomic import atomic_directory, write_atomic
from attnlab.parsing import read_json

CACHE_ENV = "ATTNLAB_CACHE"
DEFAULT_CACHE = Path("~/.cache/attnlab/prepared")
FORMAT = "attnlab.prepared/1"
META_FILE = "meta.json"
HASHES_FILE = "hashes.json"


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where prepared corpora live: ``explicit``, else ``$ATTNLAB_CACHE``, else
    ``~/.cache/attnlab/prepared``."""
    chosen = explicit or os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(chosen).expanduser()


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id of ``vocab_size``."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


# ----------------------------------------------------------------------------- the key
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(paths: Sequence[Path], cache: Path) -> list[dict[str, Any]]:
    """Each file's path, size, modification time (ns) and sha256 (a folder's: its files' together);
    the hashes of files seen before unchanged (same path, size, time and inode) come from
    ``cache/hashes.json``."""
    known_file = cache / HASHES_FILE
    known = read_json(known_file, "hash cache") if known_file.is_file() else {}
    out, changed = [], False
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        entry: dict[str, Any] = {"path": str(path), "size": 0, "mtime_ns": 0, "sha256": hashlib.sha256()}
        for file in files:  # a folder (a saved dataset): its files' sizes, times and hashes together
            st = file.stat()
            stamp = f"{file.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
            if stamp not in known:
                known[stamp], changed = _sha256(file), True
            entry["size"] += st.st_size
            entry["mtime_ns"] = max(entry["mtime_ns"], st.st_mtime_ns)
            entry["sha256"].update(known[stamp].encode())
        out.append({**entry, "sha256": entry["sha256"].hexdigest() if path.is_dir() else known[stamp]})
    if changed:
        cache.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # only a shortcut: a read-only cache still works
            write_atomic(known_file, json.dumps(known))
    return out


def content_key(*parts: Any) -> str:
    """A short hash of ``parts`` (JSON): the name of the prepared folder they decide."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# ----------------------------------------------------------------------------- build once
@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_once(folder: Path, build: Callable[[Path], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """``(meta, built)``: the prepared ``folder``'s ``meta.json``, after ``build(tmp)`` wrote its
    files into a temporary folder (returning the meta) when it did not exist yet."""
    with _locked(folder):
        if (folder / META_FILE).is_file():
            return read_json(folder / META_FILE, "prepared corpus"), False
        with atomic_directory(folder) as tmp:
            meta = {"format": FORMAT, **build(tmp)}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        return meta, True


# ----------------------------------------------------------------------------- write and read
class TokenWriter:
    """Append ids to ``directory/NAME.bin``: a stream (:meth:`add`) or rows whose offsets go to
    ``NAME.idx`` (:meth:`add_rows`), never holding more than one block in memory."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype, *, rows: bool = False) -> None:
        self.dtype, self.tokens, self.rows = dtype, 0, 0
        self._bin = open(directory / f"{name}.bin", "wb")  # noqa: SIM115 (closed by close())
        self._idx = open(directory / f"{name}.idx", "wb") if rows else None  # noqa: SIM115
        if self._idx is not None:
            np.zeros(1, np.int64).tofile(self._idx)

    def add(self, ids: np.ndarray | Sequence[int]) -> None:
        """Append ``ids`` to the stream."""
        array = np.asarray(ids, dtype=self.dtype)
        array.tofile(self._bin)
        self.tokens += array.size

    def add_rows(self, rows: Sequence[Sequence[int]]) -> None:
        """Append each row of ``rows`` and its end offset."""
        lengths = np.fromiter((len(r) for r in rows), np.int64, len(rows))
        flat = np.concatenate([np.asarray(r, self.dtype) for r in rows]) if rows else np.zeros(0, self.dtype)
        flat.tofile(self._bin)
        (self.tokens + np.cumsum(lengths)).tofile(self._idx)
        self.tokens, self.rows = self.tokens + flat.size, self.rows + len(rows)

    def close(self) -> dict[str, int]:
        self._bin.close()
        if self._idx is not None:
            self._idx.close()
        return {"tokens": self.tokens, "rows": self.rows}


def open_tokens(directory: Path, name: str, dtype: str) -> np.ndarray:
    """``NAME.bin`` memory-mapped read-only, shape ``(N,)`` (an empty array for no tokens)."""
    path = directory / f"{name}.bin"
    if path.stat().st_size == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class Rows:
    """Rows of ids (sentences) in ``NAME.bin`` + ``NAME.idx``, memory-mapped: ``rows[i]`` is
    row ``i`` as an int64 array, ``rows.lengths`` every row's length (N,)."""

    def __init__(self, directory: Path, name: str, dtype: str) -> None:
        self.tokens = open_tokens(directory, name, dtype)
        self.offsets = np.memmap(directory / f"{name}.idx", dtype=np.int64, mode="r")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)
