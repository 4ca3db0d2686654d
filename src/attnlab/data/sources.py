"""Your own data: the files a recipe's ``data.corpus`` names, and the records in them.

A *source* is what people already have, given as a path (relative to the working directory):

* a **file** (plain or gzip, UTF-8, CRLF and a byte-order mark allowed), a **folder** (every
  file below it, in sorted order, hidden ones skipped), a **glob** (``notes/*.md``), or a list
  of these;
* **JSON lines** (``.jsonl`` / ``.ndjson``, gzip too): one record a line, the text under a named
  field — a dotted name reaches into nested objects (``translation.de``);
* **tables** Hugging Face ``datasets`` reads from disk — Parquet, CSV, Arrow, a ``save_to_disk``
  folder — row by row like JSON lines (the optional extra: :mod:`attnlab.data.hf_datasets`);
* for sentence pairs, two **line-aligned files** named by their prefix (``corpus/train`` reads
  ``corpus/train.de`` and ``corpus/train.en``, as Moses, OpenNMT and fairseq take them), a
  **TSV** (``source<TAB>target``), or JSON lines in Hugging Face's
  ``{"translation": {"de": …, "en": …}}`` shape.

Every problem is one line naming the file (and the line): no file matching a glob, an empty
folder or file, a JSON line without the field, parallel files of different lengths (both files
and the first line where they part), one side of a pair empty, bytes that are not UTF-8
(:mod:`attnlab.data.corpora`).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any

from attnlab.data.corpora import Replaced, numbered_lines
from attnlab.data.hf_datasets import TABLE_SUFFIXES, is_saved_dataset, table_records
from attnlab.data.prepared import cache_dir
from attnlab.validation import counted

PathSpec = str | Sequence[str]
JSONL_SUFFIXES = (".jsonl", ".ndjson")
TSV_SUFFIXES = (".tsv",)
GLOB_CHARACTERS = "*?["


def resolved(spec: PathSpec) -> str | list[str]:
    """``spec`` with each path made absolute (``~`` expanded), so a run resumed from another
    directory reads the same files."""
    if isinstance(spec, str):
        return str(Path(os.path.abspath(os.path.expanduser(spec))))
    return [str(resolved(s)) for s in spec]


def expand(spec: PathSpec, what: str) -> list[Path]:
    """The files ``spec`` names (a file, a folder, a glob, or a list of these), in order.

    Raises:
        FileNotFoundError: a named file or folder that does not exist.
        ValueError: a glob that matches no file, or a folder that holds none.
    """
    specs = [spec] if isinstance(spec, str) else list(spec)
    if not specs:
        raise ValueError(f"{what} names no file (an empty list)")
    found: list[Path] = []
    for one in specs:
        found += [p for p in _expand_one(str(one), what) if p not in found]
    return found


def _expand_one(spec: str, what: str) -> list[Path]:
    path = Path(os.path.expanduser(spec))
    if any(c in spec for c in GLOB_CHARACTERS) and not path.exists():
        matches = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not matches:
            raise ValueError(f"{what}: no file matches {spec}")
        return matches
    if is_saved_dataset(path):
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p, path))
        if not files:
            raise ValueError(f"{what}: folder {spec} holds no files")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"{what}: {spec} not found")
    return [path]


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def base_suffix(path: str | Path) -> str:
    """The suffix that names the format, below a ``.gz`` (``train.jsonl.gz`` → ``.jsonl``)."""
    name = Path(path).name.lower().removesuffix(".gz")
    return Path(name).suffix


def is_jsonl(path: str | Path) -> bool:
    return base_suffix(path) in JSONL_SUFFIXES


def is_records(path: str | Path) -> bool:
    """Whether ``path`` holds records with named fields: JSON lines, or a table Hugging Face
    ``datasets`` reads (Parquet, CSV, Arrow, a ``save_to_disk`` folder)."""
    return is_jsonl(path) or base_suffix(path) in TABLE_SUFFIXES or is_saved_dataset(Path(path))


def records(
    path: Path, *, errors: str = "strict", replaced: Replaced | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line or row number, record)`` of a JSON-lines file or a table (:func:`is_records`)."""
    if is_jsonl(path):
        return json_records(path, errors=errors, replaced=replaced)
    return table_records(path, cache_dir())


def check_not_empty(path: Path) -> None:
    """Refuse an empty file in one line."""
    if path.is_file() and path.stat().st_size == 0:
        raise ValueError(f"{path} is empty")


# ----------------------------------------------------------------------------- JSON lines
def json_records(
    path: Path, *, errors: str = "strict", replaced: Replaced | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of each non-blank line of a JSON-lines file.

    Raises:
        ValueError: a line that is not a JSON object, naming the file and the line.
    """
    for number, text in numbered_lines(path, errors=errors, replaced=replaced):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError) as err:
            problem = getattr(err, "msg", None) or "not readable"
            raise ValueError(f"{path}:{number}: not a JSON line ({problem})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: must hold a JSON object, got {type(record).__name__}")
        yield number, record


def field(record: dict[str, Any], name: str, path: Path, number: int) -> Any:
    """``record[name]`` (a dotted ``name`` reaches into nested objects), or a ``ValueError``
    naming the file, the line and the field, with the fields the record has."""
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            keys = ", ".join(sorted(record)) or "none"
            raise ValueError(f"{path}:{number}: no field {name!r} (the record has: {keys})")
        value = value[part]
    return value


def text_field(record: dict[str, Any], name: str, path: Path, number: int) -> str:
    """:func:`field` that must be a string."""
    value = field(record, name, path, number)
    if not isinstance(value, str):
        raise ValueError(f"{path}:{number}: field {name!r} must be a string, got {type(value).__name__}")
    return value


# ----------------------------------------------------------------------------- sentence pairs
def pair_files(spec: PathSpec, src_lang: str, tgt_lang: str, what: str) -> list[Path]:
    """The file(s) holding the pairs ``spec`` names: a TSV or JSON-lines file, two files, or a
    prefix whose ``.{src_lang}`` and ``.{tgt_lang}`` files (``.gz`` too) exist."""
    if not isinstance(spec, str):
        if len(spec) != 2:
            raise ValueError(f"{what} must name a prefix, a .tsv, a .jsonl or two files, "
                             f"got {len(spec)} paths")
        return [_existing(Path(p), what) for p in spec]
    if base_suffix(spec) in TSV_SUFFIXES or is_records(spec):
        return [_existing(Path(spec), what)]
    return [_side(spec, lang, what) for lang in (src_lang, tgt_lang)]


def _existing(path: Path, what: str) -> Path:
    if not path.is_file() and not is_saved_dataset(path):
        raise FileNotFoundError(f"{what}: {path} not found")
    return path


def _side(prefix: str, lang: str, what: str) -> Path:
    for name in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if Path(name).is_file():
            return Path(name)
    raise FileNotFoundError(
        f"{what}: neither {prefix}.{lang} nor {prefix}.{lang}.gz exists (a prefix names one file a "
        "language; or give a .tsv, a .jsonl, or two files)"
    )


def read_pairs(
    files: Sequence[Path], src_lang: str, tgt_lang: str, *, errors: str = "strict",
    replaced: Replaced | None = None,
) -> Iterator[tuple[str, str]]:
    """Stream the ``(source, target)`` pairs of :func:`pair_files`, stripped; a pair empty on
    both sides is skipped (blank separator lines).

    Raises:
        ValueError: one side of a pair empty; two files of different lengths (naming both and
            the first line without a counterpart); a TSV line without exactly one tab; a JSON
            line without the language.
    """
    for f in files:
        check_not_empty(f)
    if len(files) == 2:
        numbered = _aligned(*files, errors=errors, replaced=replaced)
    elif is_records(files[0]):
        numbered = _record_pairs(files[0], src_lang, tgt_lang, errors, replaced)
    else:
        numbered = _tsv_pairs(files[0], errors, replaced)
    for where, s, t in numbered:
        s, t = s.strip(), t.strip()
        if not s and not t:
            continue
        if not s or not t:
            side = "source" if not s else "target"
            raise ValueError(f"{where}: the {side} side is empty, the other is not")
        yield s, t


def _aligned(src: Path, tgt: Path, *, errors: str,
             replaced: Replaced | None) -> Iterator[tuple[str, str, str]]:
    left = numbered_lines(src, errors=errors, replaced=replaced)
    right = numbered_lines(tgt, errors=errors, replaced=replaced)
    for a, b in zip_longest(left, right):
        if a is None or b is None:
            longer, shorter, number = (src, tgt, a[0]) if b is None else (tgt, src, b[0])
            raise ValueError(
                f"{src} and {tgt} differ in length: line {number} of {longer} has no counterpart in {shorter}"
            )
        yield f"{src}:{a[0]} / {tgt}:{b[0]}", a[1], b[1]


def tsv_fields(
    path: Path, names: tuple[str, str], *, errors: str = "strict", replaced: Replaced | None = None
) -> Iterator[tuple[int, str, str]]:
    """``(line number, first, second)`` of each non-blank ``first<TAB>second`` line; a line
    without exactly one tab is refused naming the file, the line and ``names``."""
    for number, text in numbered_lines(path, errors=errors, replaced=replaced):
        if not text.strip():
            continue
        fields = text.rstrip("\r").split("\t")
        if len(fields) != 2:
            raise ValueError(f"{path}:{number}: expected {names[0]}<TAB>{names[1]} (exactly one tab), "
                             f"got {counted(len(fields), 'field')}")
        yield number, fields[0], fields[1]


def _tsv_pairs(path: Path, errors: str, replaced: Replaced | None) -> Iterator[tuple[str, str, str]]:
    for number, source, target in tsv_fields(path, ("source", "target"), errors=errors, replaced=replaced):
        yield f"{path}:{number}", source, target


def _record_pairs(path: Path, src_lang: str, tgt_lang: str, errors: str,
                  replaced: Replaced | None) -> Iterator[tuple[str, str, str]]:
    for number, record in records(path, errors=errors, replaced=replaced):
        prefix = "translation." if "translation" in record else ""  # Hugging Face's shape, or flat
        sides = [text_field(record, prefix + lang, path, number) for lang in (src_lang, tgt_lang)]
        yield f"{path}:{number}", sides[0], sides[1]


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[tuple[str, str]]:
    """All pairs of two line-aligned files (:func:`read_pairs`)."""
    return list(read_pairs([Path(src_path), Path(tgt_path)], "", ""))


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """All pairs of a ``source<TAB>target`` file (:func:`read_pairs`)."""
    return list(read_pairs([Path(path)], "", ""))
