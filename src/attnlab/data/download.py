"""Download a file, verify its sha256, and write it atomically.

The file is streamed through :func:`~attnlab.atomic.atomic_file` (a temporary file beside
``dest``) while its sha256 is computed; only when the checksum matches does it replace
``dest``. A failed or corrupt download therefore never leaves a partial file behind.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from pathlib import Path

from attnlab.atomic import atomic_file
from attnlab.progress import progress_bar

CHUNK_BYTES = 1 << 16


class ChecksumError(ValueError):
    """A file's sha256 differs from the expected value."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(
    url: str,
    dest: str | os.PathLike[str],
    sha256: str | None = None,
    *,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Fetch ``url`` into ``dest`` and return ``dest`` as a ``Path``.

    Args:
        url: ``http(s)://`` or ``file://`` address.
        dest: target file; its parent directory is created if needed.
        sha256: expected hex digest. On a mismatch :class:`ChecksumError` is raised and
            nothing is written to ``dest``. ``None`` skips the check.
        progress: show a progress bar (bytes, rate, ETA).
        timeout: socket timeout in seconds.
    """
    dest = Path(dest)
    with atomic_file(dest) as out:
        actual = _stream(url, out, progress=progress, timeout=timeout, label=dest.name)
        if sha256 is not None and actual != sha256.lower():
            raise ChecksumError(
                f"sha256 of {url} is {actual} but expected {sha256.lower()}; "
                f"the download was discarded and {dest} was not written"
            )
    return dest


def _stream(url: str, out, *, progress: bool, timeout: float, label: str) -> str:
    """Copy the body of ``url`` into the open binary file ``out``; return its hex sha256."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as response:
        total = response.headers.get("Content-Length")
        with progress_bar(int(total) if total else None, unit="B", enabled=progress, desc=label,
                          leave=False, unit_scale=True, unit_divisor=1024) as bar:
            for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                out.write(chunk)
                digest.update(chunk)
                bar.update(len(chunk))
    return digest.hexdigest()
