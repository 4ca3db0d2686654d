"""The one atomic writer: a file or a directory that replaces the old one in one step, and
the repair of a killed writer's leftovers (docs/reliability.md, "Atomic outputs").

:func:`atomic_file` is how every file attnlab writes is written (pictures, HTML, reports,
``results.json``, tokenizers, rewritten metrics), and :func:`atomic_directory` every checkpoint
directory (``step_*``, ``best/``, ``final/``): the reader of ``path`` always sees either the
old complete file or directory or the new one, never a half-written one — a full disk, an
exception or Ctrl-C in the middle of a write leaves the old one (or none) in place.
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
from typing import IO, Any


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
    temporary directory is deleted, parent directories created for it are removed again and
    ``path`` is left as it was; an ``OSError`` that names no file is raised again naming ``path``.
    """
    path = check_target(path, directory=True)
    with _parents(path), _naming(path):
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
        try:
            with _naming(path, inside=tmp):  # a file of the new directory, named at its place
                yield tmp
                _finish_tree(tmp)
            if not path.exists():
                os.replace(tmp, path)
            elif not _exchange(tmp, path):
                _replace_by_two_renames(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the half-written new, or the old after the swap


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "wb", *, encoding: str | None = None) -> Iterator[IO[Any]]:
    """Yield an open temporary file (``mode`` ``"wb"`` or ``"w"``) that replaces ``path`` when
    the block succeeds.

    The temporary file ``.NAME.tmp-*`` lives beside ``path`` (same filesystem). When the block
    ends it is flushed to disk, given the permissions the user's umask allows and renamed onto
    ``path`` in one step (``os.replace``); a ``path`` that is a symbolic link keeps it, and the
    file it points to is replaced (:func:`check_target` says which paths are refused first).
    Missing parent directories are created. On an exception (a full disk, Ctrl-C) the temporary
    file is deleted, the directories created for it are removed again and ``path`` is left as
    it was; an ``OSError`` that names no file, or only the temporary one, is raised again naming
    ``path``. Text mode writes UTF-8 unless ``encoding`` says otherwise.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_file mode must be 'wb' or 'w', got {mode!r}")
    path = check_target(path)
    with _parents(path), _naming(path):
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
        tmp = Path(name)
        try:
            with os.fdopen(fd, mode, encoding=(encoding or "utf-8") if mode == "w" else None) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            _publish(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def check_target(path: str | Path, *, directory: bool = False) -> Path:
    """The path to write a file (or, with ``directory``, a directory) at, checked before any work:
    ``path`` itself, or the file a symbolic link ``path`` points to. A ``ValueError`` names what
    is in the way: a file where a directory must be (``path`` itself, or one of its parents), a
    directory where a file must be, a link to a place whose directory does not exist (attnlab
    never creates directories at the far end of a link)."""
    path = Path(path)
    if path.is_symlink():
        target = path.resolve()
        if not target.parent.is_dir():
            raise ValueError(f"{path} is a symbolic link to {target}, whose directory does not exist")
        path = target
    if path.is_dir() and not directory:
        raise ValueError(f"cannot write the file {path}: it is a directory")
    if path.exists() and not path.is_dir() and directory:
        raise ValueError(f"cannot write the directory {path}: it is a file")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"cannot write {path}: {parent} is a file, not a directory")
    return path


@contextlib.contextmanager
def _parents(path: Path) -> Iterator[None]:
    """Create ``path``'s missing parent directories; when the block fails, remove the ones it
    created again (those still empty), so a refused or failed write leaves nothing behind."""
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
    try:
        yield
    except BaseException:
        for directory in missing:  # deepest first
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


def _publish(tmp: Path, path: Path) -> None:
    """Give the complete temporary file ``tmp`` the permissions the umask allows and rename it
    onto ``path`` in one step."""
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def write_atomic(path: str | Path, content: bytes | str, *, encoding: str = "utf-8") -> Path:
    """Write ``content`` (bytes, or text in ``encoding``) to ``path`` through :func:`atomic_file`;
    returns ``path``."""
    data = content.encode(encoding) if isinstance(content, str) else content
    with atomic_file(path) as f:
        f.write(data)
    return Path(path)


@contextlib.contextmanager
def _naming(path: Path, inside: Path | None = None) -> Iterator[None]:
    """Re-raise an ``OSError`` that names no file (``ENOSPC`` from a write) or only the
    temporary file (a folder without write permission, ``path`` a directory) naming ``path``;
    one that names a file of the temporary directory ``inside``, naming that file where it
    would stand in ``path``."""
    try:
        yield
    except OSError as err:
        named = Path(err.filename) if isinstance(err.filename, str) else None
        within = inside is not None and named is not None and named.is_relative_to(inside)
        temporary = named is not None and named.name.startswith(f".{path.name}.tmp-")
        if err.errno is None or not (named is None or temporary or within):
            raise
        shown = path / named.relative_to(inside) if within else path
        raise OSError(err.errno, err.strerror, str(shown)) from err


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
    directory and every ``.NAME.tmp-*`` file is deleted. Only safe while no other process
    writes there (hold the run's lock). Returns the leftovers removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for entry in sorted(directory.iterdir()):
        match = _LEFTOVER.match(entry.name)
        if match is None or entry.is_symlink():
            continue
        if not entry.is_dir():
            if match["kind"] == "tmp" and entry.is_file():  # a half-written atomic_file
                entry.unlink()
                removed.append(entry)
            continue
        target, saved = directory / match["name"], entry / match["name"]
        if match["kind"] == "old" and not target.exists() and saved.is_dir():
            os.replace(saved, target)  # the new one never arrived: the old one comes back
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _umask() -> int:
    """The process's umask, read where Linux shows it (``/proc/self/status``) so that no other
    thread ever creates a file under a cleared mask; elsewhere set and restored at once."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
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
