"""Ctrl-C and SIGTERM stop work the same way: save what can be resumed, say where, exit.

Python turns SIGINT (Ctrl-C) into ``KeyboardInterrupt``; schedulers, ``kill`` and ``docker
stop`` send SIGTERM, whose default action kills the process with nothing saved.
:func:`terminate_as_interrupt` makes SIGTERM raise :class:`Terminated`, a ``KeyboardInterrupt``,
so one handler (the trainer's: save a resumable checkpoint) serves both. The command then
exits with the shell's code for the signal, :func:`exit_code`: 130 for SIGINT, 143 for SIGTERM.

Only the first signal interrupts. An impatient user presses Ctrl-C four times; the second to
fourth arrive while the first one's checkpoint is being saved, or while the interpreter runs
its exit callbacks (torch's library finalizers among them), and each would raise there: a
half-saved checkpoint and an ``Exception ignored in atexit callback`` traceback. So within
the block every later SIGINT or SIGTERM is ignored, and the command itself
(``until_exit=True``) leaves both ignored once interrupted, to the end of the process.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was, like Ctrl-C's ``KeyboardInterrupt``."""


_first: list[int] = []  # the signal that interrupted the outermost block, while it runs


def _interrupt(signum: int, frame: object) -> None:
    """The handler: the first signal raises, a later one is ignored (the first's work goes on)."""
    if _first:
        return
    _first.append(signum)
    reraise(signum)


def _taken_over(signum: int, handler: object) -> bool:
    """Whether the block replaces ``handler``: Python's own (or none), or an outer block's.
    An ignored signal stays ignored; a program's own handler stays."""
    default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
    return handler in (default, None, _interrupt)


@contextlib.contextmanager
def terminate_as_interrupt(*, until_exit: bool = False) -> Iterator[None]:
    """Within the block, the first SIGINT raises ``KeyboardInterrupt`` and the first SIGTERM
    :class:`Terminated`; later ones are ignored (main thread only; elsewhere, and for a signal
    the program handles or ignores itself, nothing changes). On leaving, the handlers are
    restored, except that with ``until_exit`` (the command, whose process ends next) a block
    left after a signal leaves SIGINT and SIGTERM ignored, so nothing interrupts the exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in HANDLED}
    mine = [s for s in HANDLED if _taken_over(s, previous[s])]
    outermost = _interrupt not in previous.values()
    for s in mine:
        signal.signal(s, _interrupt)
    try:
        yield
    finally:
        stopping = bool(_first)
        for s in mine:
            signal.signal(s, signal.SIG_IGN if until_exit and stopping else previous[s])
        if outermost:
            _first.clear()


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
