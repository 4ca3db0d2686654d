"""A training run's directory: one writer at a time, a killed writer's leftovers repaired, and
a new run never mixed with an old one (docs/reliability.md, "One run, one directory").

Two trainings writing the same run directory would interleave their checkpoints and metrics,
and averaging would then mix the weights of different runs. :class:`RunLock` holds an
exclusive OS lock (``flock``) on ``RUN_DIR/.lock`` for the life of a run; a second writer is
refused at once, in one line naming the holder's PID. The operating system releases the lock
when its process ends, however it ends, so a killed run never leaves a lock that blocks.
Within one process the lock is re-entrant: the task driver and the trainer both take it.
:func:`writing_run` is what the trainer enters: the lock, then the repairs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from attnlab.checkpoint import clean_leftovers, list_checkpoints

try:
    import fcntl
except ImportError:  # Windows: no flock; runs are not locked there
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


class RunDirectoryInUse(ValueError):
    """Another process is writing the run directory."""


class RunLock:
    """``with RunLock(run_dir):`` — hold the run directory for this process.

    Creating the directory and its lock file is also the first check that it is writable
    (a ``PermissionError`` names it before any data is read).
    """

    _held: ClassVar[dict[Path, list[int]]] = {}  # resolved run dir -> [fd, depth]

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)

    def __enter__(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        key = self.run_dir.resolve()
        if key in self._held:
            self._held[key][1] += 1
            return self
        fd = os.open(self.run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise RunDirectoryInUse(
                    f"run directory {self.run_dir} is in use by {holder}; wait for it to finish, "
                    f"or choose another --run-dir"
                ) from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(fd, f"PID {os.getpid()} on {socket.gethostname()} since {stamp}: "
                  f"{' '.join(sys.argv)[:120]}\n".encode(), 0)
        self._held[key] = [fd, 1]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        key = self.run_dir.resolve()
        entry = self._held[key]
        entry[1] -= 1
        if entry[1] == 0:
            del self._held[key]
            os.close(entry[0])  # closing the descriptor releases the flock


@contextlib.contextmanager
def writing_run(run_dir: str | Path | None, *, fresh: bool, writer: bool = True) -> Iterator[None]:
    """Hold ``run_dir`` (nothing when ``None``) and repair what a killed writer left there
    (:func:`~attnlab.checkpoint.clean_leftovers`) — the ``writer`` process only (rank 0 under
    torchrun) — and, for a ``fresh`` run, refuse a directory that already holds an earlier
    run's checkpoints (averaging would mix the two)."""
    if run_dir is None:
        yield
        return
    run_dir = Path(run_dir)
    with RunLock(run_dir) if writer else contextlib.nullcontext():
        if writer:
            clean_leftovers(run_dir)
            clean_leftovers(run_dir / "checkpoints")
        if fresh and (old := list_checkpoints(run_dir)):
            raise ValueError(
                f"run directory {run_dir} already holds checkpoints (newest {old[-1].name}) "
                f"of an earlier run: resume it with --resume {run_dir}, or choose a new "
                f"--run-dir (or delete the old one)"
            )
        yield
