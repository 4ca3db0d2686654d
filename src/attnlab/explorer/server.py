"""How the explorer runs under uvicorn and stops: quietly, with one line, however it is stopped.

``attnlab serve`` stops on Ctrl-C (SIGINT) or SIGTERM as every attnlab command does
(:mod:`attnlab.signals`): the first signal decides, and the command ends with its one line
(``attnlab serve: interrupted by SIGINT``) and the shell's exit code for it (130; 143 for
SIGTERM). uvicorn catches both signals while it serves (:meth:`uvicorn.Server.capture_signals`)
and raises the ones it caught again once it has stopped; on its own, a second Ctrl-C would
"force" the stop: it would skip the application's shutdown and leave its tasks to be cancelled
by the event loop's end, each cancelled task a logged traceback, and the signals would be raised
last first (SIGTERM then Ctrl-C: reported as SIGINT). :class:`ExplorerServer` changes that:

* the first signal stops the server: it takes no new connection and the requests in flight get
  :data:`GRACE_S` = 5 s to finish;
* a later signal, or the end of that grace, *cuts* the connections still open: each is closed,
  so its request sees its client leave (:mod:`.jobs`) — a body half read ends, a model call
  stops at its next decoding step, a stream ends — and finishes without an error logged;
* only the first signal is raised again, so it is the one reported.

The application has no startup or shutdown work, so uvicorn's *lifespan* protocol is off
(stopped early, its task was one of those cancelled tracebacks).
"""

from __future__ import annotations

import asyncio
import socket
from types import FrameType
from typing import Any

import uvicorn

GRACE_S = 5.0
BACKSTOP_S = 10.0  # uvicorn's own bound on the stop, should a cut request not finish


class ExplorerServer(uvicorn.Server):
    """A uvicorn server that stops as the module docstring says: the requests in flight get
    ``grace`` seconds, a second signal cuts them at once, the first signal is the one raised."""

    def __init__(self, config: uvicorn.Config, grace: float = GRACE_S) -> None:
        super().__init__(config)
        self.grace = grace

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The handler of SIGINT and SIGTERM while serving (on the event loop's thread)."""
        if not self.should_exit:
            super().handle_exit(sig, frame)  # remembered, to be raised again once stopped
            return
        try:  # a signal may come between two steps of the loop: cut at its next step
            asyncio.get_running_loop().call_soon_threadsafe(self.cut)
        except RuntimeError:  # the loop has ended: nothing left to cut
            pass

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's stop, with the open connections cut after ``grace`` seconds."""
        grace_over = asyncio.get_running_loop().call_later(self.grace, self.cut)
        try:
            await super().shutdown(sockets)
        finally:
            grace_over.cancel()

    def cut(self) -> None:
        """Close every open connection: its request finishes as one whose client left."""
        for connection in list(self.server_state.connections):
            connection.transport.close()


def explorer_server(app: Any, *, grace: float = GRACE_S) -> ExplorerServer:
    """The server ``attnlab serve`` runs ``app`` with: logging warnings and errors only, no
    lifespan, stopping as the module docstring says."""
    config = uvicorn.Config(app, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=grace + BACKSTOP_S)
    return ExplorerServer(config, grace)
