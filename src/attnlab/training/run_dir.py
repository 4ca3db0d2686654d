"""A training run's directory: one writer at a time, a killed writer's leftovers repaired, a new
run never mixed with an old one, and nothing left behind by a run that was refused
(docs/reliability.md, "One run, one directory").

Two trainings writing the same run directory would interleave their checkpoints and metrics,
and averaging would then mix the weights of different runs. :class:`RunLock` holds an
exclusive OS lock (``flock``) on ``RUN_DIR/.lock`` for the life of a run; a second writer is
refused at once, in one line naming the holder's PID and command line. The operating system
releases the lock when its process ends, however it ends, so a killed run never leaves a lock
that blocks. Within one process the lock is re-entrant: the task driver and the trainer both
take it. A run that fails before it has written anything takes back what it created: the
``.lock`` and the directories made for it.

:func:`writing_run` is what a run enters. It writes into a directory only when the directory
is empty, is the run's own (a resume), or the caller says ``overwrite``:

* a new run into a directory holding anything (ignoring ``.lock`` and half-written
  ``.NAME.tmp-*`` files) is refused in one line naming what is there;
* ``overwrite`` deletes every entry of the run directory except ``.lock`` — a link is removed,
  never followed, so nothing outside the directory is touched — and only in a directory an
  earlier run wrote (one holding its ``.lock``); any other directory is refused;
* a resume writes only into the run its checkpoint belongs to
  (:func:`~attnlab.checkpoint.run_dir_of`), and only when there are steps left to train
  (:func:`check_steps_left`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from attnlab.atomic import check_target
from attnlab.checkpoint import (
    TRAINER_NAME,
    clean_leftovers,
    list_checkpoints,
    resolve_resume,
    run_dir_of,
)
from attnlab.training.config import TrainConfig
from attnlab.training.state import TrainerState, load_trainer_state

try:
    import fcntl
except ImportError:  # Windows: no flock; runs are not locked there
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"
COMMAND_LIMIT = 300
"""The longest command line the lock records; a longer one is cut after its last whole word."""
_HALF_WRITTEN = re.compile(r"^\..+\.tmp-[A-Za-z0-9_]+$")  # atomic_file / atomic_directory


class RunDirectoryInUse(ValueError):
    """Another process is writing the run directory."""


@dataclass
class _Holding:
    fd: int
    depth: int
    made: list[Path]  # the directories this process created for the run, outermost first
    before: frozenset[str]  # the directory's entries when the lock was taken


class RunLock:
    """``with RunLock(run_dir):`` — hold the run directory for this process.

    Creating the directory and its lock file is also the first check that it is writable
    (a ``PermissionError`` names it before any data is read). When the outermost ``with``
    ends with an exception and the run added or removed nothing, the ``.lock`` it created
    is deleted, and so are the directories it created (those left empty). ``outermost`` and
    ``had_lock`` (the directory held a ``.lock`` before) describe the entry.
    """

    _held: ClassVar[dict[Path, _Holding]] = {}  # resolved run dir -> what this process holds

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.outermost = self.had_lock = False

    def __enter__(self) -> RunLock:
        key = self._key = self.run_dir.resolve()
        if key in self._held:
            self._held[key].depth += 1
            return self
        made = _make_dirs(self.run_dir)
        try:
            before = frozenset(os.listdir(self.run_dir))
            fd = self._lock()
        except BaseException:
            _remove_empty(made)
            raise
        self.outermost, self.had_lock = True, LOCK_NAME in before
        self._held[key] = _Holding(fd, 1, made, before)
        return self

    def _lock(self) -> int:
        """Open and ``flock`` the lock file, record this process in it; return its descriptor.
        A lock file deleted by a refused run while we took it is taken again."""
        path = self.run_dir / LOCK_NAME
        for _ in range(10):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            if fcntl is None:
                break
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise RunDirectoryInUse(
                    f"run directory {self.run_dir} is in use by {holder}; wait for it to finish, "
                    f"or choose another directory"
                ) from None
            with contextlib.suppress(FileNotFoundError):
                if os.path.samestat(os.fstat(fd), os.stat(path)):
                    break
            os.close(fd)
        else:
            raise RunDirectoryInUse(f"run directory {self.run_dir}: its {LOCK_NAME} keeps disappearing")
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        line = f"PID {os.getpid()} on {socket.gethostname()} since {stamp}: {command_line(sys.argv)}\n"
        os.pwrite(fd, line.encode(errors="backslashreplace"), 0)
        return fd

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        held = self._held[self._key]
        held.depth -= 1
        if held.depth > 0:
            return
        del self._held[self._key]
        try:
            if kind is not None and LOCK_NAME not in held.before:
                with contextlib.suppress(OSError):  # never hide the error that ended the run
                    if set(os.listdir(self.run_dir)) - {LOCK_NAME} == held.before:  # it wrote nothing:
                        (self.run_dir / LOCK_NAME).unlink()  # take back what it created
                        _remove_empty(held.made)
        finally:
            os.close(held.fd)  # closing the descriptor releases the flock


def _make_dirs(run_dir: Path) -> list[Path]:
    """``mkdir -p run_dir``; returns the directories it created, outermost first."""
    missing = [p for p in (run_dir, *run_dir.parents) if not p.exists()][::-1]
    made = []
    try:
        for directory in missing:
            with contextlib.suppress(FileExistsError):
                directory.mkdir()
                made.append(directory)
        run_dir.mkdir(exist_ok=True)  # a file there: FileExistsError naming it
    except BaseException:
        _remove_empty(made)
        raise
    return made


def _remove_empty(made: list[Path]) -> None:
    """Remove the directories ``made`` (outermost first) from the innermost out, stopping at
    the first one that is not empty."""
    for directory in reversed(made):
        try:
            directory.rmdir()
        except OSError:
            return


def command_line(argv: Sequence[str], limit: int = COMMAND_LIMIT) -> str:
    """``argv`` as a shell would take it (program name, then the quoted words), whole, or cut
    after the last whole word that fits in ``limit`` characters, with `` …``."""
    words = [Path(argv[0]).name if argv else "python", *(shlex.quote(a) for a in argv[1:])]
    line = " ".join(words)
    if len(line) <= limit:
        return line
    kept = words[:1]
    for word in words[1:]:
        if len(" ".join([*kept, word])) + 2 > limit:
            break
        kept.append(word)
    return " ".join([*kept, "…"])


@contextlib.contextmanager
def writing_run(
    run_dir: str | Path | None, *, resume: str | Path | None = None, overwrite: bool = False,
    writer: bool = True, flag: str = "--run-dir",
) -> Iterator[None]:
    """Hold ``run_dir`` (nothing when ``None``) for a new run, or for the run ``resume``
    continues, after checking that it may be written (see the module docstring), and repair
    what a killed writer left there (:func:`~attnlab.checkpoint.clean_leftovers`). Only the
    ``writer`` (rank 0 under torchrun) locks, checks the contents and repairs, and only in its
    outermost entry: the task driver's, when it calls the trainer inside. ``flag`` is the
    option the messages name for the directory."""
    if run_dir is None:
        yield
        return
    run_dir = Path(run_dir)
    check_name(run_dir, flag)
    if resume is not None:
        if overwrite:
            raise ValueError("--overwrite starts a new run and --resume continues one: give one of them")
        check_own_run(run_dir, resume)
    if not writer:
        yield
        return
    with RunLock(run_dir) as lock:
        if lock.outermost:
            if resume is None:
                claim(run_dir, overwrite=overwrite, earlier_run=lock.had_lock, flag=flag)
            clean_leftovers(run_dir)
            for sub in sorted(run_dir.iterdir()):  # checkpoints/, tokenizer/, plots/, ...
                if sub.is_dir() and not sub.is_symlink():
                    clean_leftovers(sub)
        yield


def check_name(run_dir: Path, flag: str = "--run-dir") -> None:
    """Refuse a run directory whose name is not valid UTF-8 (it could not be printed), or that
    cannot be a directory (a file is there, or where a parent must be:
    :func:`~attnlab.atomic.check_target`)."""
    try:
        str(run_dir).encode()
    except UnicodeEncodeError:
        raise ValueError(
            f"run directory {os.fsencode(run_dir)!r} is not a valid UTF-8 name: choose another {flag}"
        ) from None
    try:
        check_target(run_dir, directory=True)
    except ValueError as err:
        raise ValueError(f"run directory: {err}; choose another {flag}") from None


def check_own_run(run_dir: Path, resume: str | Path) -> Path:
    """The checkpoint ``resume`` names (:func:`~attnlab.checkpoint.resolve_resume`), after
    refusing a ``run_dir`` other than the run that checkpoint belongs to."""
    checkpoint = resolve_resume(resume)
    own = run_dir_of(checkpoint)
    if own.resolve() != run_dir.resolve():
        raise ValueError(
            f"--resume {resume} continues the run in {own}, not --run-dir {run_dir}: a resume "
            f"writes only into its own run; drop --run-dir, or copy the run first "
            f"(cp -r {own} {run_dir}) and resume the copy"
        )
    return checkpoint


def claim(run_dir: Path, *, overwrite: bool, earlier_run: bool, flag: str = "--run-dir") -> None:
    """Let a new run write ``run_dir``: it must hold nothing but a ``.lock`` and half-written
    ``.NAME.tmp-*`` files, or, with ``overwrite`` and an ``earlier_run`` (its ``.lock`` was
    there), its entries are deleted (links removed, never followed). Otherwise ``ValueError``
    naming what is there."""
    entries = sorted(e for e in run_dir.iterdir() if e.name != LOCK_NAME)
    if not [e for e in entries if not _HALF_WRITTEN.match(e.name)]:
        return
    names = [e.name + "/" * (e.is_dir() and not e.is_symlink()) for e in entries]
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    what = f"run directory {run_dir} is not empty ({', '.join(names[:6])}{more})"
    if overwrite and earlier_run:
        print(f"replacing the earlier run in {run_dir}: deleting {', '.join(names)}", flush=True)
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    elif overwrite:
        raise ValueError(
            f"{what} and no run wrote it (it has no {LOCK_NAME}): --overwrite replaces only an "
            f"earlier run; choose another {flag}, or empty it yourself"
        )
    else:
        resume = f"resume it with --resume {run_dir}, " if list_checkpoints(run_dir) else ""
        raise ValueError(f"{what}: {resume}choose another {flag}, or pass --overwrite to replace it")


def check_steps_left(
    checkpoint: Path, config: TrainConfig, state: TrainerState | None = None
) -> TrainerState:
    """Refuse to resume ``checkpoint`` (whose trainer ``state`` is read when not given) when
    ``config.max_steps`` / ``max_epochs`` lie before it: training would do nothing. A
    checkpoint exactly at the end resumes to finish its run (evaluation, report)."""
    state = state or load_trainer_state(checkpoint / TRAINER_NAME)["state"]
    if config.max_steps is not None and state.step > config.max_steps:
        raise ValueError(
            f"train.max_steps={config.max_steps} but checkpoint {checkpoint} is already at step "
            f"{state.step}: raise train.max_steps to train further"
        )
    epochs = state.epoch + (state.batch_in_epoch > 0)  # epochs begun
    if config.max_epochs is not None and epochs > config.max_epochs:
        raise ValueError(
            f"train.max_epochs={config.max_epochs} but checkpoint {checkpoint} is already in epoch "
            f"{epochs}: raise train.max_epochs to train further"
        )
    return state
