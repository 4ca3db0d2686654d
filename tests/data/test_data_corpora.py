"""Readers for line-aligned corpora, the data directory, and the real Multi30k files."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import pytest

from attnlab.data import (
    data_dir,
    load_multi30k,
    load_tinyshakespeare,
    read_lines,
    read_parallel,
    read_tsv,
)
from attnlab.data.corpora import TINYSHAKESPEARE_SHA256
from attnlab.data.multi30k import LANGUAGES, NUM_PAIRS, SHA256, SPLITS
from repo_paths import SHARED_DATA

# Real corpora: $ATTNLAB_DATA, else ../shared/data beside the repository.
REAL_DATA = Path(os.environ["ATTNLAB_DATA"]) if os.environ.get("ATTNLAB_DATA") else SHARED_DATA
requires_data = pytest.mark.skipif(
    not os.environ.get("ATTNLAB_DATA") and not SHARED_DATA.is_dir(),
    reason="ATTNLAB_DATA is unset and ../shared/data is missing",
)


def write(path: Path, lines: list[str], *, gz: bool = False, end: str = "\n") -> Path:
    data = "".join(line + end for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


# --- data directory -----------------------------------------------------------------------


def test_data_dir_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path / "env"))
    assert data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert data_dir() == tmp_path / "env"
    monkeypatch.delenv("ATTNLAB_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".cache" / "attnlab"


def test_missing_file_error_says_where_and_how(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNLAB_DATA", raising=False)
    with pytest.raises(FileNotFoundError) as err:
        load_multi30k("val", "de", "en", data_dir=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "multi30k" / "val.de.gz") in message
    assert "ATTNLAB_DATA" in message and "download=True" in message


# --- line readers -------------------------------------------------------------------------


def test_read_lines_plain_and_gzip_agree(tmp_path):
    lines = ["Ein Mädchen läuft.", "Zwei Hunde  spielen ;-)", "Straße « ok »"]
    plain = read_lines(write(tmp_path / "a.txt", lines))
    packed = read_lines(write(tmp_path / "a.txt.gz", lines, gz=True))
    assert plain == packed == lines


def test_read_lines_strips_trailing_whitespace_and_crlf(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("\ufeffa b  \r\nc\t\r\n d\n".encode())
    assert read_lines(path) == ["a b", "c", " d"]


def test_read_lines_does_not_split_on_carriage_return(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"a\rb\nc\n")
    assert read_lines(path) == ["a\rb", "c"]


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nbad \xff\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2: not valid UTF-8"):
        read_lines(path)


def test_read_parallel_pairs_lines_in_order(tmp_path):
    src = write(tmp_path / "s.de", ["Hallo Welt.", "Ein Hund."], gz=False)
    tgt = write(tmp_path / "t.en.gz", ["Hello world.", "A dog."], gz=True)
    assert read_parallel(src, tgt) == [("Hallo Welt.", "Hello world."), ("Ein Hund.", "A dog.")]


def test_read_parallel_skips_lines_empty_on_both_sides(tmp_path):
    src = write(tmp_path / "s", ["a", "", "b"])
    tgt = write(tmp_path / "t", ["x", "  ", "y"])
    assert read_parallel(src, tgt) == [("a", "x"), ("b", "y")]


@pytest.mark.parametrize("empty_side", ["src", "tgt"])
def test_read_parallel_one_side_empty_names_file_and_line(tmp_path, empty_side):
    full, holed = ["a", "b", "c"], ["a", "b", " "]
    src = write(tmp_path / "s.txt", holed if empty_side == "src" else full)
    tgt = write(tmp_path / "t.txt", holed if empty_side == "tgt" else full)
    bad = src if empty_side == "src" else tgt
    side = "source" if bad is src else "target"
    with pytest.raises(ValueError, match=rf"s\.txt:3 / .*t\.txt:3: the {side} side is empty"):
        read_parallel(src, tgt)


def test_read_parallel_length_mismatch_names_file_and_line(tmp_path):
    src = write(tmp_path / "s.txt", ["a", "b", "c", "d"])
    tgt = write(tmp_path / "t.txt", ["a", "b"])
    with pytest.raises(ValueError, match=r"s\.txt and .*t\.txt differ in length: line 3 of .*s\.txt has no"):
        read_parallel(src, tgt)


def test_read_tsv(tmp_path):
    path = write(tmp_path / "p.tsv", ["Hallo\tHello", "", "Ein Hund. \t A dog."])
    assert read_tsv(path) == [("Hallo", "Hello"), ("Ein Hund.", "A dog.")]


@pytest.mark.parametrize(
    ("line", "message"),
    [("no tab here", r"expected source<TAB>target \(exactly one tab\), got 1 field"),
     ("a\tb\tc", "got 3 fields"), ("a\t ", "target")],
)
def test_read_tsv_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path / "p.tsv", ["x\ty", line])
    with pytest.raises(ValueError, match=rf"p\.tsv:2: .*{message}"):
        read_tsv(path)


# --- Multi30k registry on a tiny corpus ---------------------------------------------------


def test_load_multi30k_reads_data_dir_and_env(tmp_path, monkeypatch):
    folder = tmp_path / "multi30k"
    folder.mkdir()
    write(folder / "val.de.gz", ["Ein Hund.", "Zwei Katzen."], gz=True)
    write(folder / "val.en.gz", ["A dog.", "Two cats."], gz=True)
    expected = [("Ein Hund.", "A dog."), ("Zwei Katzen.", "Two cats.")]
    assert load_multi30k("val", "de", "en", data_dir=tmp_path) == expected
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path))
    assert load_multi30k("val", "en", "de") == [(t, s) for s, t in expected]


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("dev", "de", "en"), "split"),
        (("val", "xx", "en"), "lang"),
        (("val", "en", "en"), "differ"),
    ],
)
def test_load_multi30k_rejects_bad_arguments(tmp_path, args, name):
    with pytest.raises(ValueError, match=name):
        load_multi30k(*args, data_dir=tmp_path)


# --- the real files -----------------------------------------------------------------------


@requires_data
@pytest.mark.parametrize("split", SPLITS)
def test_real_multi30k_sizes_and_first_pair(split):
    pairs = load_multi30k(split, "de", "en", data_dir=REAL_DATA)
    assert len(pairs) == NUM_PAIRS[split] == {"train": 29000, "val": 1014}.get(split, 1000)
    with gzip.open(REAL_DATA / "multi30k" / f"{split}.de.gz", "rt", encoding="utf-8") as f:
        first_de = f.readline().rstrip("\n")
    assert pairs[0][0] == first_de
    assert all(s and t for s, t in pairs)


@requires_data
@pytest.mark.parametrize("split", ["val", "test_2016_flickr"])
def test_real_multi30k_all_languages_align(split):
    for lang in ("fr", "cs"):
        assert len(load_multi30k(split, "en", lang, data_dir=REAL_DATA)) == NUM_PAIRS[split]


@requires_data
def test_checksum_table_matches_the_real_files():
    assert set(SHA256) == {f"{s}.{lang}.gz" for s in SPLITS for lang in LANGUAGES}
    for name, expected in SHA256.items():
        digest = hashlib.sha256((REAL_DATA / "multi30k" / name).read_bytes()).hexdigest()
        assert digest == expected, name


@requires_data
def test_real_tinyshakespeare():
    text = load_tinyshakespeare(data_dir=REAL_DATA)
    raw = (REAL_DATA / "tinyshakespeare" / "input.txt").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == TINYSHAKESPEARE_SHA256
    assert text == raw.decode("utf-8")
    assert text.startswith("First Citizen:")
