"""Where corpora live, and readers for sentence-aligned text.

Data directory: the ``data_dir`` argument, else ``$ATTNLAB_DATA``, else ``~/.cache/attnlab``.
Inside it each corpus has a folder: ``multi30k/train.de.gz``, ``tinyshakespeare/input.txt``.

Sentence-aligned text has one sentence a line (plain or gzip, UTF-8); line ``i`` of the
source file translates line ``i`` of the target file. Readers strip trailing whitespace
(newline, ``\\r``, spaces). A pair with **both** sides empty is skipped (blank separator
lines); a pair with **one** side empty, or files of different lengths, is a broken
alignment and raises ``ValueError`` naming the file and the 1-based line number.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

from attnlab.data.download import download as fetch

DATA_ENV = "ATTNLAB_DATA"
DEFAULT_DATA_DIR = Path("~/.cache/attnlab")
GZIP_MAGIC = b"\x1f\x8b"

TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare"
)
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"

PathLike = str | os.PathLike[str]
READS_FROM = (
    f"attnlab reads corpora from --data-dir (data_dir= in Python), else ${DATA_ENV}, else {DEFAULT_DATA_DIR}"
)
"""Where the data directory comes from, as the errors for a missing corpus say it."""


def data_dir(explicit: PathLike | None = None) -> Path:
    """The data directory: ``explicit``, else ``$ATTNLAB_DATA``, else ``~/.cache/attnlab``.

    The directory is not required to exist (a download may create it); loaders raise a
    ``FileNotFoundError`` saying where they looked when a file is missing.
    """
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return DEFAULT_DATA_DIR.expanduser()


_resolve_data_dir = data_dir  # loaders take a ``data_dir`` argument that shadows the function


def ensure_file(path: Path, url: str, sha256: str | None, *, download_missing: bool) -> Path:
    """Return ``path`` if it exists; else download it from ``url`` (sha256-checked) or raise.

    An existing file is trusted as is (downloads are atomic, so it cannot be a partial one).
    """
    if path.is_file():
        return path
    if not download_missing:
        env = os.environ.get(DATA_ENV)
        where = f"${DATA_ENV}={env}" if env else f"${DATA_ENV} is unset"
        raise FileNotFoundError(
            f"{path} not found ({where}). {READS_FROM}; point one at a directory holding "
            f"{path.parent.name}/, or fetch the file there: curl -L --create-dirs -o {path} {url} "
            "(in Python, download=True fetches it and checks its sha256)"
        )
    return fetch(url, path, sha256)


def _raw_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with the trailing ``\\n`` removed; line numbers start at 1.

    Lines split on ``\\n`` only (never on ``\\r`` or Unicode separators inside a sentence).
    """
    with open(path, "rb") as f:
        compressed = f.read(2) == GZIP_MAGIC
    opener = gzip.open if compressed else open
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                yield number, _decode_line(raw, path, number)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({err})") from None


def _not_utf8(path: PathLike, number: int, err: UnicodeDecodeError, line_start: int = 0) -> ValueError:
    """The error for bytes that are not UTF-8: ``path:line: ... at byte B`` (B within the line)."""
    return ValueError(f"{path}:{number}: not valid UTF-8 ({err.reason} at byte {err.start - line_start})")


def _decode_line(raw: bytes, path: PathLike, number: int) -> str:
    """One line as text, its ``\\n`` removed (and the byte-order mark of line 1)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _not_utf8(path, number, err) from None
    if number == 1:
        text = text.removeprefix("\ufeff")  # byte-order mark
    return text.removesuffix("\n")


def read_text(path: PathLike) -> str:
    """A whole UTF-8 text file, line ends as Python's text mode gives them (``\\r\\n`` → ``\\n``);
    bytes that are not UTF-8 raise ``ValueError`` naming the file and the line."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = raw.rfind(b"\n", 0, err.start) + 1
        raise _not_utf8(path, raw.count(b"\n", 0, err.start) + 1, err, line_start) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_lines(path: PathLike) -> list[str]:
    """All lines of a plain or gzip UTF-8 file, trailing whitespace stripped."""
    return [text.rstrip() for _, text in _raw_lines(path)]


def read_parallel(src_path: PathLike, tgt_path: PathLike) -> list[tuple[str, str]]:
    """Read two line-aligned files into ``(source, target)`` pairs.

    Raises:
        ValueError: the files differ in line count (naming the first line without a
            counterpart), or one side of a line is empty.
    """
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        longer, shorter = (src_path, tgt_path) if len(src) > len(tgt) else (tgt_path, src_path)
        n = min(len(src), len(tgt))
        raise ValueError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
            f"line {n + 1} of {longer} has no counterpart in {shorter}"
        )
    pairs = []
    for number, (s, t) in enumerate(zip(src, tgt, strict=True), start=1):
        if not s and not t:
            continue
        if not s or not t:
            empty, other = (src_path, tgt_path) if not s else (tgt_path, src_path)
            raise ValueError(f"{empty}:{number}: empty line, but line {number} of {other} is not")
        pairs.append((s, t))
    return pairs


def read_tsv(path: PathLike) -> list[tuple[str, str]]:
    """Read ``source<TAB>target`` lines into pairs (fields stripped; blank lines skipped).

    Raises:
        ValueError: a line without exactly one tab, or with one side empty.
    """
    pairs = []
    for number, text in _raw_lines(path):
        if not text.strip():
            continue
        fields = [field.strip() for field in text.split("\t")]
        if len(fields) != 2:
            raise ValueError(
                f"{path}:{number}: expected 2 tab-separated fields (source, target), "
                f"got {len(fields)}"
            )
        s, t = fields
        if not s or not t:
            side = "source" if not s else "target"
            raise ValueError(f"{path}:{number}: the {side} side is empty")
        pairs.append((s, t))
    return pairs


def load_tinyshakespeare(
    data_dir: PathLike | None = None, download: bool = False, *, base_url: str | None = None
) -> str:
    """The tinyshakespeare text (~1.1M characters) from ``<data_dir>/tinyshakespeare/input.txt``.

    With ``download=True`` a missing file is fetched from ``base_url`` (default: Karpathy's
    char-rnn repository) and its sha256 verified.
    """
    path = _resolve_data_dir(data_dir) / "tinyshakespeare" / "input.txt"
    url = f"{(base_url or TINYSHAKESPEARE_URL).rstrip('/')}/input.txt"
    ensure_file(path, url, TINYSHAKESPEARE_SHA256, download_missing=download)
    return read_text(path)
