"""One request's work on a model: queued in the model's line, dropped when its client leaves,
stopped when its time is up.

Each model has one worker thread that takes requests first come first served
(:meth:`.models.Served.call`); at most :attr:`Bounds.max_queue` of them at a time, running or
waiting, else 503 with ``Retry-After``. A :class:`Job` is one request's side of that line. The
event loop marks it :meth:`Job.leave` when the client disconnects (:func:`watch_disconnect` for
a JSON answer; the end of the stream for a generation). The worker thread checks it when the
job's turn comes — a job whose client has left never reaches the model — and then before every
decoding step (the view passes :meth:`Job.check` as the decoding's ``before_step``): a
beam search or a sampling whose client has left, or that has run :attr:`Bounds.model_seconds`
on the model, stops at its next step. (A head view is one forward pass over at most 64 word
pieces: it has no step to stop at.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from attnlab.explorer.requests import MAX_QUEUE, MODEL_SECONDS


@dataclass(frozen=True)
class Bounds:
    """How much a server lets its requests take: ``max_queue`` requests per model, running or
    waiting; ``model_seconds`` on the model per request."""

    max_queue: int = MAX_QUEUE
    model_seconds: float = MODEL_SECONDS


class Cancelled(Exception):
    """The work of a request stopped before its end."""


class ClientLeft(Cancelled):
    """Its client disconnected."""


class OutOfTime(Cancelled):
    """It ran longer than :attr:`Bounds.model_seconds` on the model."""


class Job:
    """One request's model work under ``bounds``; :meth:`leave` (from the event loop) and
    :meth:`check` (from the worker thread) share one flag, a plain attribute."""

    def __init__(self, bounds: Bounds = Bounds()) -> None:
        self.bounds, self.left, self.deadline = bounds, False, math.inf

    def leave(self) -> None:
        """The client is gone: the work does not start, or stops at its next step."""
        self.left = True

    def check(self) -> None:
        """Raise :class:`ClientLeft` or :class:`OutOfTime` when the work must stop."""
        if self.left:
            raise ClientLeft("the request was cancelled: its client left")
        if time.monotonic() >= self.deadline:
            raise OutOfTime(f"the request was stopped after {self.bounds.model_seconds:g} s on the model, "
                            "the limit per request: try a shorter text or a smaller beam")

    def run(self, view: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """On the worker thread: ``view(*args, **kwargs)`` unless the client has left, with the
        clock started now (a decoding view calls :meth:`check` before every step)."""
        self.check()
        self.deadline = time.monotonic() + self.bounds.model_seconds
        return view(*args, **kwargs)


async def watch_disconnect(receive: Callable[[], Awaitable[dict[str, Any]]], job: Job) -> None:
    """Read the ASGI ``receive`` channel of a request whose body has been read: its next message
    is ``http.disconnect``, when the client hangs up (or once the answer is sent); then
    :meth:`Job.leave`. Cancel it when the answer is ready."""
    while (await receive())["type"] != "http.disconnect":
        pass
    job.leave()
