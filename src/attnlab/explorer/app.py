"""The explorer's web server: the page, its files and the JSON API (Starlette; uvicorn runs it).

    GET  /                the page (``static/explorer.html``, linking ``static/explorer.{css,js}``)
    GET  /static/NAME     the vendored script and style
    GET  /api/health      ``{"status": "ok"}``, answered on the event loop: never waits for a model
    GET  /api/models      the models loaded (``translator``, ``gpt``, ``bert`` lists) and ``limits``
    POST /api/translate   ``{"text": "Ein Hund läuft.", "beam": 5, "checkpoint": null}`` → the
                          translation and its cross-attention (:func:`.views.translation_view`)
    POST /api/generate    ``{"prompt": "ROMEO:", "max_new_tokens": 100, "temperature": 0.8,
                          "top_k": 200, "top_p": null, "seed": null, "checkpoint": null}`` →
                          NDJSON, one event a line, streamed as sampled (:func:`.views.generate`)
    POST /api/heads       ``{"text": "..."}`` → MiniLM's head view (:func:`.views.head_view`)

Input caps (:mod:`.requests`): a body of at most ``MAX_BODY_BYTES`` = 16,384 bytes; texts and
prompts of at most ``MAX_TEXT_CHARS`` = 400 characters; a head-view sentence of at most
``MAX_SENTENCE_TOKENS`` = 64 word pieces — over a cap: 413. Beam 1..10, max_new_tokens 1..300,
temperature 0..10, top_k ≥ 1, top_p in (0, 1], seed ≥ 0; empty, malformed, non-UTF-8 or
wrongly typed input: 422. An unknown checkpoint: 404; a kind of model not loaded: 503, naming
the flag. Every error is ``{"error": "one line"}`` (:mod:`.errors`).

Model calls run on each model's own worker thread, in the order the requests came, under the
model's lock (:mod:`.models`): requests are served concurrently, one at a time per model, and
the event loop stays free. A streamed generation stops when its client disconnects.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from attnlab.explorer import views
from attnlab.explorer.errors import ApiError, invalid, too_long
from attnlab.explorer.models import ModelSet, Served, check_sentence_length
from attnlab.explorer.page import STATIC, render_page
from attnlab.explorer.requests import (
    LIMITS,
    MAX_BODY_BYTES,
    MAX_SENTENCE_TOKENS,
    GenerateRequest,
    generate_request,
    heads_request,
    parse_body,
    translate_request,
)


async def read_body(request: Request) -> bytes:
    """The request body, refused (413) as soon as it is longer than ``MAX_BODY_BYTES``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_long(f"request body has {int(declared)} bytes; the limit is {MAX_BODY_BYTES}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_long(f"request body has more than {MAX_BODY_BYTES} bytes; that is the limit")
        chunks.append(chunk)
    return b"".join(chunks)


async def run_view(served: Served, view: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``view(*args)`` on ``served``'s worker thread; a ``ValueError`` (input the model cannot
    take) becomes a 422."""
    try:
        return await served.call(view, *args, **kwargs)
    except ApiError:
        raise
    except ValueError as err:
        raise invalid(str(err)) from None


class Cancelled(Exception):
    """The client of a streamed generation went away."""


async def stream_generation(served: Served, req: GenerateRequest) -> AsyncIterator[str]:
    """The events of :func:`.views.generate` as NDJSON lines, sent as the worker thread emits
    them; closing the stream (a client that left) stops the sampling at its next token."""
    loop, queue, cancelled = asyncio.get_running_loop(), asyncio.Queue(), threading.Event()

    def emit(event: dict[str, Any] | None) -> None:
        if cancelled.is_set():
            raise Cancelled
        try:
            loop.call_soon_threadsafe(queue.put_nowait, event)
        except RuntimeError:  # the loop is closed: the server is shutting down
            cancelled.set()
            raise Cancelled from None

    def work() -> None:
        try:
            views.generate(served.model, served.extra, req.prompt, emit, max_new_tokens=req.max_new_tokens,
                           temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, seed=req.seed)
        except Cancelled:
            return
        except Exception as err:  # a defect: the client sees it as the last event
            emit({"event": "error", "error": f"internal error: {type(err).__name__}: {err}"})
        emit(None)

    worker = served.call(work)
    try:
        while (event := await queue.get()) is not None:
            yield json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
    finally:
        cancelled.set()
        worker.add_done_callback(lambda done: done.cancelled() or done.exception())  # never "not retrieved"


def create_app(models: ModelSet) -> Starlette:
    """The explorer over ``models`` (see the module docstring for the routes)."""

    async def page(request: Request) -> Response:
        return HTMLResponse(render_page())

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def describe(request: Request) -> Response:
        return JSONResponse({**models.describe(), "limits": LIMITS})

    async def translate(request: Request) -> Response:
        req = translate_request(parse_body(await read_body(request)))
        served = models.get("translator", req.checkpoint)
        view = await run_view(served, views.translation_view, served.model, served.extra, req.text,
                              beam=req.beam)
        return JSONResponse(view)

    async def generate(request: Request) -> Response:
        req = generate_request(parse_body(await read_body(request)))
        served = models.get("gpt", req.checkpoint)
        try:
            views.prompt_ids(served.extra, req.prompt)  # refused with a 422 before the stream starts
        except ValueError as err:
            raise invalid(str(err)) from None
        return StreamingResponse(stream_generation(served, req), media_type="application/x-ndjson")

    async def heads(request: Request) -> Response:
        req = heads_request(parse_body(await read_body(request)))
        served = models.get("bert")

        def checked_view(encoder: Any, text: str) -> dict[str, Any]:
            check_sentence_length(encoder, text, MAX_SENTENCE_TOKENS)
            return views.head_view(encoder, text)

        return JSONResponse(await run_view(served, checked_view, served.model, req.text))

    routes = [
        Route("/", page),
        Route("/api/health", health),
        Route("/api/models", describe),
        Route("/api/translate", translate, methods=["POST"]),
        Route("/api/generate", generate, methods=["POST"]),
        Route("/api/heads", heads, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={
        ApiError: api_error, HTTPException: http_error, Exception: internal_error,
    })


async def api_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, ApiError)
    return JSONResponse({"error": err.message}, status_code=err.status)


async def http_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, HTTPException)
    message = {404: f"no such page: {request.url.path}",
               405: f"{request.method} is not allowed on {request.url.path}"}.get(err.status_code, err.detail)
    return JSONResponse({"error": message}, status_code=err.status_code, headers=err.headers)


async def internal_error(request: Request, err: Exception) -> Response:
    return JSONResponse({"error": f"internal error: {type(err).__name__}: {err}"}, status_code=500)
