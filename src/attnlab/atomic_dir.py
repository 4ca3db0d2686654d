"""A directory that replaces another in one atomic step, and the repair of a killed writer's
leftovers (docs/reliability.md, "Atomic checkpoints").

:func:`atomic_directory` is how every checkpoint directory is written (``step_*``, ``best/``,
``final/``): the reader of ``path`` always sees either the old complete directory or the new
one, never a half-written one, and never none once one has existed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``path`` when the block succeeds.

    The temporary directory ``.NAME.tmp-*`` lives in ``path``'s parent (same filesystem). When
    the block ends, its files are flushed to disk and given the permissions the user's umask
    allows (like any file the user creates), then it takes ``path``'s place in one atomic step:
    a rename when ``path`` is new, an exchange of the two directories when it exists (Linux's
    ``renameat2(RENAME_EXCHANGE)``), after which the old one is deleted. So at every instant
    ``path`` is either the old complete directory or the new one. Where the filesystem cannot
    exchange, the old directory is renamed aside to ``.NAME.old-*`` first; a crash between the
    two renames is repaired by :func:`clean_leftovers` on the next start. On an exception the
    temporary directory is deleted and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        _finish_tree(tmp)
        if not path.exists():
            os.replace(tmp, path)
        elif not _exchange(tmp, path):
            _replace_by_two_renames(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the half-written new, or the old after the swap


def _replace_by_two_renames(new: Path, path: Path) -> None:
    """Move ``path`` aside, move ``new`` into its place, delete the old (no exchange here)."""
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
    os.replace(path, old / path.name)
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old / path.name, path)  # put the old one back before giving up
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux ``renameat2`` with ``RENAME_EXCHANGE``);
    ``False`` where the system or the filesystem cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-[A-Za-z0-9_]+$")


def clean_leftovers(directory: str | Path) -> list[Path]:
    """Repair and remove what a killed writer left in ``directory``: a ``.NAME.old-*`` whose
    ``NAME`` is missing is moved back into place, then every ``.NAME.tmp-*`` and ``.NAME.old-*``
    is deleted. Only safe while no other process writes there (hold the run's lock).
    Returns the leftovers removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for entry in sorted(directory.iterdir()):
        match = _LEFTOVER.match(entry.name)
        if match is None or not entry.is_dir():
            continue
        target, saved = directory / match["name"], entry / match["name"]
        if match["kind"] == "old" and not target.exists() and saved.is_dir():
            os.replace(saved, target)  # the new one never arrived: the old one comes back
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _finish_tree(directory: Path) -> None:
    """Flush every file under ``directory`` to disk and give files and directories the
    permissions the umask allows (temporary directories and safetensors files start private)."""
    mask = _umask()
    os.chmod(directory, 0o777 & ~mask)
    for entry in directory.rglob("*"):
        if entry.is_dir():
            os.chmod(entry, 0o777 & ~mask)
        elif entry.is_file():
            os.chmod(entry, 0o666 & ~mask)
            with entry.open("rb") as f:
                os.fsync(f.fileno())
