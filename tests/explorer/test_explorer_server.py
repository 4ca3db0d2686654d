"""The explorer's server under uvicorn, on a loopback port: what it logs and how it stops.

A client that hangs up mid-body is ordinary (a closed tab, a lost network): the server's log
shows nothing of it. A stop gives the requests in flight their grace and then cuts what is
still open, and a request cancelled while it waits for its model leaves its work undone.
(Signals to a real ``attnlab serve`` process: ``test_explorer_cli.py``.)"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from attnlab.explorer import app
from attnlab.explorer.jobs import Job
from explorer_toys import half_body, serving, wait_until


@contextmanager
def serving_logged(models, **settings) -> Iterator[tuple[str, list[logging.LogRecord]]]:
    """:func:`explorer_toys.serving`, with the list of the records uvicorn logs (its
    ``uvicorn.error`` logger, which does not propagate to the root logger pytest's ``caplog``
    listens to) from its start until it has stopped."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("uvicorn.error")
    try:
        with serving(models, **settings) as base:
            logger.addHandler(handler)  # after uvicorn set its logging up, which drops every handler
            yield base, records
    finally:
        logger.removeHandler(handler)


def shown(records: list[logging.LogRecord]) -> list[str]:
    """The warnings and errors among ``records``, as uvicorn prints them."""
    return [f"{one.levelname}: {one.getMessage()}" for one in records if one.levelno >= logging.WARNING]


def test_clients_that_leave_mid_body_are_no_error_of_the_server(models):
    """Each used to be an ``Exception in ASGI application`` traceback (``ClientDisconnect``)."""
    with serving_logged(models) as (base, records):
        for connection in [half_body(int(base.rsplit(":", 1)[1])) for _ in range(5)]:
            connection.close()
        answer = httpx.post(base + "/api/translate", json={"text": "Ein Hund."}, timeout=60)
        assert answer.status_code == 200
    # leaving serving() stopped the server, which waited for the five requests to end
    assert shown(records) == []


def test_a_stop_cuts_what_is_still_open_after_its_grace(models):
    """A client that keeps its request half sent does not hold the stop up: after the grace the
    server closes its connection, and logs no error about it."""
    with serving_logged(models, grace=0.2) as (base, records):
        stalled = half_body(int(base.rsplit(":", 1)[1]))
    assert stalled.recv(100) == b""  # closed by the server, unanswered
    stalled.close()
    assert shown(records) == []


def test_a_request_cancelled_while_its_model_works_leaves_its_job(models):
    """The server's stop may cancel a request whose model is running it: the work is dropped at
    its next decoding step, not run to its end (a non-daemon worker thread the process would
    wait for)."""
    served, job, running = models.get("translator"), Job(), threading.Event()

    def held() -> None:
        running.set()
        wait_until(lambda: job.left, "the cancelled request to leave its job")

    class Connection:  # a client that neither sends nor leaves
        async def receive(self) -> dict:
            await asyncio.Event().wait()
            return {}

    async def cancel_while_held() -> None:
        request = asyncio.ensure_future(app.answer(Connection(), served, job, held))
        assert await asyncio.to_thread(running.wait, 30)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request

    asyncio.run(cancel_while_held())
    assert job.left
    wait_until(lambda: served.queued == 0, "the translator's line to empty")
