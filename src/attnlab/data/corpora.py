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
from typing import IO

from attnlab.data.download import download as fetch
from attnlab.validation import check_choice, counted

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


ERRORS = ("strict", "replace")
"""What a reader does with bytes that are not UTF-8: refuse them naming the file, the line and
the byte (``strict``), or read on with U+FFFD in their place (``replace``), counted."""
BLOCK_BYTES = 1 << 20


def _open_binary(path: PathLike) -> IO[bytes]:
    """``path`` opened for reading bytes, decompressed when it starts with gzip's magic."""
    with open(path, "rb") as f:
        compressed = f.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115


class Replaced:
    """The lines in which ``errors="replace"`` replaced bytes, by file (a file read twice counts
    each line once)."""

    def __init__(self) -> None:
        self.numbers: dict[str, set[int]] = {}

    def add(self, path: PathLike, numbers: Iterator[int]) -> None:
        self.numbers.setdefault(str(path), set()).update(numbers)

    @property
    def lines(self) -> dict[str, int]:
        """How many lines of each file had bytes replaced."""
        return {path: len(numbers) for path, numbers in self.numbers.items()}

    @staticmethod
    def describe(lines: dict[str, int]) -> str | None:
        """One line naming what was replaced (``None`` when nothing was)."""
        if not lines:
            return None
        files = ", ".join(f"{p} ({counted(n, 'line')})" for p, n in lines.items())
        return f"note: bytes that are not UTF-8 replaced by U+FFFD in {files}"


def text_blocks(
    path: PathLike, *, errors: str = "strict", replaced: Replaced | None = None,
    block_bytes: int | None = None,
) -> Iterator[tuple[int, str]]:
    """Stream a plain or gzip UTF-8 file as ``(number of the block's first line, text)``.

    Each block holds whole lines of about ``block_bytes`` (default :data:`BLOCK_BYTES`; ending
    in ``\\n``, the file's last
    perhaps not), so memory does not grow with the file; the byte-order mark is dropped.

    Raises:
        ValueError: bytes that are not UTF-8 (with ``errors="strict"``), naming the file, the
            line and the byte offset in the line and in the (uncompressed) file; a truncated
            or corrupt gzip file.
    """
    check_choice("errors", errors, ERRORS)
    block_bytes = block_bytes or BLOCK_BYTES
    line, offset, carry = 1, 0, bytearray()
    try:
        with _open_binary(path) as f:
            while True:
                raw = f.read(block_bytes)
                carry += raw
                cut = carry.rfind(b"\n") + 1 if raw else len(carry)
                if raw and cut == 0:
                    continue  # one line longer than a block: read on
                data = bytes(carry[:cut])
                del carry[:cut]
                if data:
                    text = _decode(data, path, line, offset, errors, replaced)
                    yield line, text.removeprefix("\ufeff") if offset == 0 else text
                    line, offset = line + data.count(b"\n"), offset + len(data)
                if not raw:
                    return
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({err})") from None


def _decode(data: bytes, path: PathLike, line: int, offset: int, errors: str,
            replaced: Replaced | None) -> str:
    """``data`` (whole lines starting at ``line``, byte ``offset`` of the file) as text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        if errors == "strict":
            start = data.rfind(b"\n", 0, err.start) + 1
            number = line + data.count(b"\n", 0, err.start)
            raise ValueError(
                f"{path}:{number}: not valid UTF-8 ({err.reason} at byte {err.start - start} of the line, "
                f"byte {offset + err.start} of the file); --errors replace (data.errors = \"replace\") "
                "reads on with U+FFFD in its place"
            ) from None
    if replaced is not None:
        replaced.add(path, (line + i for i, raw in enumerate(data.split(b"\n")) if not _is_utf8(raw)))
    return data.decode("utf-8", errors="replace")


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def numbered_lines(
    path: PathLike, *, errors: str = "strict", replaced: Replaced | None = None
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with the trailing ``\\n`` removed; line numbers start at 1.

    Lines split on ``\\n`` only (never on ``\\r`` or Unicode separators inside a sentence).
    """
    for first, text in text_blocks(path, errors=errors, replaced=replaced):
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        yield from enumerate(lines, start=first)


def read_text(path: PathLike) -> str:
    """A whole UTF-8 text file, line ends as Python's text mode gives them (``\\r\\n`` → ``\\n``);
    bytes that are not UTF-8 raise ``ValueError`` naming the file and the line."""
    return normalize_newlines("".join(text for _, text in text_blocks(path)))


def normalize_newlines(text: str) -> str:
    """``\\r\\n`` and a lone ``\\r`` become ``\\n`` (Python's universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_lines(path: PathLike) -> list[str]:
    """All lines of a plain or gzip UTF-8 file, trailing whitespace stripped."""
    return [text.rstrip() for _, text in numbered_lines(path)]


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
