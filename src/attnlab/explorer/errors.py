"""The one error the explorer's API answers with: an HTTP status and a one-line message.

Every refusal is JSON, ``{"error": "..."}``, with the status a program can branch on:
404 (no such route, or a checkpoint this server did not load), 405, 413 (input over a cap),
422 (empty, malformed, non-UTF-8 or wrongly typed input), 503 (the model is not loaded: the
message names the ``attnlab serve`` flag that loads it).
"""

from __future__ import annotations


class ApiError(ValueError):
    """A request the API refuses: ``status`` and a one-line ``message`` (a ``ValueError``, so
    the same checks give ``attnlab export-html`` its one-line errors)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def too_long(message: str) -> ApiError:
    return ApiError(413, message)


def invalid(message: str) -> ApiError:
    return ApiError(422, message)
