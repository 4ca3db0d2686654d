"""The one error the explorer's API answers with: an HTTP status and a one-line message.

Every refusal is JSON, ``{"error": "..."}``, with the status a program can branch on:
400 (a ``Host`` this server does not answer to), 401 (the API's token missing or wrong), 404
(no such route, or a checkpoint this server did not load), 405, 413 (input over a cap), 415
(a POST body that is not ``application/json``), 422 (empty, malformed, too deeply nested,
non-UTF-8 or wrongly typed input), 503 (the model is not loaded — the message names the
``attnlab serve`` flag that loads it —, its queue is full — with ``Retry-After`` —, or the
request ran out of time on it). No message holds a filesystem path: checkpoints are named by
their short ids, and a defect's message has its paths cut out (:func:`without_paths`).
"""

from __future__ import annotations

import re

# an absolute path: / or C:\ at the start of a word, then anything up to a blank or a quote
ABSOLUTE_PATH = re.compile(r"""(?<![\w.:/\\])(?:[A-Za-z]:)?[/\\][^\s'"`<>()]*""")


class ApiError(ValueError):
    """A request the API refuses: ``status``, a one-line ``message`` and any response
    ``headers`` (a ``ValueError``, so the same checks give ``attnlab export-html`` its
    one-line errors)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def too_long(message: str) -> ApiError:
    return ApiError(413, message)


def invalid(message: str) -> ApiError:
    return ApiError(422, message)


def without_paths(text: str) -> str:
    """``text`` with every absolute path in it replaced by ``<path>`` (for a defect's message,
    which may quote a file of the server's disk)."""
    return ABSOLUTE_PATH.sub("<path>", text)
