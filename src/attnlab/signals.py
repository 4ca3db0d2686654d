"""Ctrl-C and SIGTERM stop work the same way: save what can be resumed, say where, exit.

Python turns SIGINT (Ctrl-C) into ``KeyboardInterrupt``; schedulers, ``kill`` and ``docker
stop`` send SIGTERM, whose default action kills the process with nothing saved.
:func:`terminate_as_interrupt` makes SIGTERM raise :class:`Terminated`, a ``KeyboardInterrupt``,
so one handler (the trainer's: save a resumable checkpoint) serves both. The command then
exits with the shell's code for the signal, :func:`exit_code`: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was, like Ctrl-C's ``KeyboardInterrupt``."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(f"received signal {signum} (SIGTERM)")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (main thread only; elsewhere, and
    where a program installed its own handler, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None, _raise_terminated):
        yield  # the program handles SIGTERM itself
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def signal_of(interrupt: BaseException) -> int:
    """The signal an interruption stands for: SIGTERM for :class:`Terminated`, else SIGINT."""
    return signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT


def exit_code(signum: int) -> int:
    """The shell's exit status for a process stopped by ``signum``: ``128 + signum``."""
    return 128 + int(signum)


def reraise(signum: int) -> None:
    """Raise the interruption ``signum`` stands for (after its work was saved)."""
    if signum == signal.SIGTERM:
        raise Terminated(f"received signal {signum} (SIGTERM)")
    raise KeyboardInterrupt
