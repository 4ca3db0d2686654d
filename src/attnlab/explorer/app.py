"""The explorer's web server: the page, its files and the JSON API (Starlette; uvicorn runs it).

    GET  /                the page (``static/explorer.html``, linking ``static/explorer.{css,js}``)
    GET  /static/NAME     the vendored script and style
    GET  /api/health      ``{"status": "ok"}``, answered on the event loop: never waits for a model
    GET  /api/models      the models loaded (``translator``, ``gpt``, ``bert`` lists, each model
                          named by its short id, ``checkpoint``) and ``limits``
    POST /api/translate   ``{"text": "Ein Hund läuft.", "beam": 5, "checkpoint": null}`` → the
                          translation and its cross-attention (:func:`.views.translation_view`)
    POST /api/generate    ``{"prompt": "ROMEO:", "max_new_tokens": 100, "temperature": 0.8,
                          "top_k": 200, "top_p": null, "seed": null, "checkpoint": null}`` →
                          NDJSON, one event a line, streamed as sampled (:func:`.views.generate`)
    POST /api/heads       ``{"text": "..."}`` → MiniLM's head view (:func:`.views.head_view`)
    POST /api/attention   ``{"text": "...", "checkpoint": null}`` → a GPT's attention map of the
                          text: its tokens, shapes and every head's thumbnail, named by an
                          ``id`` (:meth:`.readings.Reading.describe`); ``Server-Timing`` says
                          how long the model took
    GET  /api/attention/ID/LAYER/HEAD   one head's weights, a binary record
                          (``application/octet-stream``, :mod:`.quantize`), answered on the
                          event loop from the readings the server keeps (:class:`.readings.Readings`)

Who may ask (:mod:`.access`, before any route): a ``Host`` that is not on the allow-list gets
400 (DNS rebinding); with a token, an API request without ``Authorization: Bearer TOKEN`` gets
401. A POST body must be ``Content-Type: application/json`` (else 415: an HTML form of another
site cannot post to the API) of at most ``MAX_BODY_BYTES`` = 16,384 bytes, nested at most 16
deep; texts and prompts of at most 400 characters (a text for the attention map 4,000 and 512
tokens); a German source of at most 128 subwords and
a head-view sentence of at most 64 word pieces, counted after tokenization — over a cap: 413
(:mod:`.requests`, :mod:`.bounds`). Beam 1..10, max_new_tokens 1..300, temperature 0 or
0.001..10, top_k ≥ 1, top_p 0.001..1, seed ≥ 0; empty, malformed, non-UTF-8 or wrongly typed
input, an integer of over 100 digits, a number too large for a float: 422.
An unknown checkpoint: 404; a kind of model not loaded: 503, naming the flag. Every error is
``{"error": "one line"}`` (:mod:`.errors`) and no answer holds a filesystem path.

Model calls run on each model's own worker thread, in the order the requests came, under the
model's lock (:mod:`.models`): requests are served concurrently, one at a time per model, and
the event loop stays free. At most 64 requests per model are running or waiting (more: 503
with ``Retry-After``); a request whose client disconnects while it waits never runs, a
translation or generation whose client disconnects stops at its next decoding step, and one
that runs 60 s on the model is stopped with a 503 (:mod:`.jobs`). A client that disconnects
before its body ends is no error of the server's: nothing is logged (:mod:`.server`: how the
server stops).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from attnlab.explorer import bounds, views
from attnlab.explorer.access import Access, Guard
from attnlab.explorer.errors import ApiError, invalid, too_long, without_paths
from attnlab.explorer.jobs import Bounds, Cancelled, ClientLeft, Job, watch_disconnect
from attnlab.explorer.models import ModelSet, Served
from attnlab.explorer.page import STATIC, render_page
from attnlab.explorer.readings import Readings, read_text, reading_id
from attnlab.explorer.requests import (
    LIMITS,
    MAX_BODY_BYTES,
    GenerateRequest,
    generate_request,
    heads_request,
    parse_body,
    read_request,
    translate_request,
)

JSON_TYPE = "application/json"


async def read_body(request: Request) -> bytes:
    """The request body: 415 unless it is declared JSON, 413 as soon as it is longer than
    ``MAX_BODY_BYTES``, 400 (an answer no one reads) when its client leaves before its end."""
    declared_type = request.headers.get("content-type", "")
    if declared_type.partition(";")[0].strip().lower() != JSON_TYPE:
        got = repr(declared_type[:80]) if declared_type else "none"
        raise ApiError(415, f"the request body must be JSON, sent with Content-Type: {JSON_TYPE}; got {got}")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_long(f"request body has {int(declared)} bytes; the limit is {MAX_BODY_BYTES}")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise too_long(f"request body has more than {MAX_BODY_BYTES} bytes; that is the limit")
            chunks.append(chunk)
    except ClientDisconnect:  # a client may leave at any time: no error of the server's
        raise ApiError(400, "the client left before its request body ended") from None
    return b"".join(chunks)


def internal_message(err: BaseException) -> str:
    """A defect's one line, its paths cut out."""
    return without_paths(f"internal error: {type(err).__name__}: {err}")


async def answer(request: Request, served: Served, job: Job, view: Callable[..., Any], *args: Any) -> Any:
    """``view(*args)`` on ``served``'s worker thread as ``job``, dropped or stopped when the
    client disconnects; a ``ValueError`` (input the model cannot take) becomes a 422, a job
    stopped a 503."""
    future = served.call(job, view, *args)  # 503 when the model's queue is full
    watcher = asyncio.create_task(watch_disconnect(request.receive, job))
    try:
        return await future
    except ApiError:
        raise
    except Cancelled as why:
        raise ApiError(503, str(why)) from None
    except ValueError as err:
        raise invalid(str(err)) from None
    finally:  # answered, failed, or cancelled (the server stopping): the work is no one's now
        watcher.cancel()
        job.leave()


def stream_generation(served: Served, job: Job, req: GenerateRequest) -> AsyncIterator[str]:
    """Queue :func:`.views.generate` (503 now when the model's queue is full) and return its
    events as NDJSON lines, sent as the worker thread emits them; closing the stream (a client
    that left) stops the sampling at its next token, or before its first when it still waits."""
    loop, queue = asyncio.get_running_loop(), asyncio.Queue()

    def emit(event: dict[str, Any] | None) -> None:
        if job.left:
            raise ClientLeft
        try:
            loop.call_soon_threadsafe(queue.put_nowait, event)
        except RuntimeError:  # the loop is closed: the server is shutting down
            job.leave()
            raise ClientLeft from None

    def work() -> None:
        try:
            views.generate(served.pipeline, req.prompt, emit, max_new_tokens=req.max_new_tokens,
                           temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, seed=req.seed,
                           before_step=job.check)
        except ClientLeft:
            return
        except Cancelled as why:  # out of time: the client sees why as the last event
            emit({"event": "error", "error": str(why)})
        except Exception as err:  # a defect: the client sees it as the last event
            emit({"event": "error", "error": internal_message(err)})
        emit(None)

    worker = served.call(job, work)

    async def lines() -> AsyncIterator[str]:
        try:
            while (event := await queue.get()) is not None:
                yield json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
        finally:
            job.leave()
            worker.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved

    return lines()


def create_app(models: ModelSet, *, access: Access | None = None, limits: Bounds | None = None) -> Starlette:
    """The explorer over ``models`` (see the module docstring for the routes), answering as
    ``access`` allows (default: loopback names, no token) within ``limits`` (default:
    :class:`.jobs.Bounds`)."""
    limits = limits or Bounds()
    readings = Readings()

    async def page(request: Request) -> Response:
        return HTMLResponse(render_page())

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def describe(request: Request) -> Response:
        caps = {**LIMITS, "max_queue": limits.max_queue, "model_seconds": limits.model_seconds}
        return JSONResponse({**models.describe(), "limits": caps})

    async def translate(request: Request) -> Response:
        req = translate_request(parse_body(await read_body(request)))
        served = models.get("translator", req.checkpoint)
        job = Job(limits)
        view = await answer(request, served, job, bounds.translation, served.pipeline, req.text,
                            req.beam, job.check)
        return JSONResponse(view)

    async def generate(request: Request) -> Response:
        req = generate_request(parse_body(await read_body(request)))
        served = models.get("gpt", req.checkpoint)
        try:
            served.pipeline.prompt_ids(req.prompt)  # refused with a 422 before the stream starts
        except ValueError as err:
            raise invalid(str(err)) from None
        lines = stream_generation(served, Job(limits), req)
        return StreamingResponse(lines, media_type="application/x-ndjson")

    async def heads(request: Request) -> Response:
        req = heads_request(parse_body(await read_body(request)))
        served = models.get("bert")
        view = await answer(request, served, Job(limits), bounds.heads, served.pipeline, req.text)
        return JSONResponse(view)

    async def attention(request: Request) -> Response:
        req = read_request(parse_body(await read_body(request)))
        served = models.get("gpt", req.checkpoint)
        found, seconds = readings.find(reading_id(served.name, req.text)), 0.0
        if found is None:  # a text read before costs nothing
            found = readings.add(await answer(request, served, Job(limits), read_text, served.pipeline,
                                              req.text, served.name))
            seconds = found.seconds
        return JSONResponse(found.describe(), headers={"Server-Timing": f"model;dur={seconds * 1000:.1f}"})

    async def attention_head(request: Request) -> Response:
        params = request.path_params
        record = readings.get(params["reading"]).record(params["layer"], params["head"])
        return Response(record, media_type="application/octet-stream")

    routes = [
        Route("/", page),
        Route("/api/health", health),
        Route("/api/models", describe),
        Route("/api/translate", translate, methods=["POST"]),
        Route("/api/generate", generate, methods=["POST"]),
        Route("/api/heads", heads, methods=["POST"]),
        Route("/api/attention", attention, methods=["POST"]),
        Route("/api/attention/{reading}/{layer:int}/{head:int}", attention_head),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(Guard, access=access or Access())],
                     exception_handlers={ApiError: api_error, HTTPException: http_error,
                                         Exception: internal_error})


async def api_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, ApiError)
    return JSONResponse({"error": err.message}, status_code=err.status, headers=err.headers)


async def http_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, HTTPException)
    message = {404: f"no such page: {request.url.path}",
               405: f"{request.method} is not allowed on {request.url.path}"}.get(err.status_code, err.detail)
    return JSONResponse({"error": message}, status_code=err.status_code, headers=err.headers)


async def internal_error(request: Request, err: Exception) -> Response:
    return JSONResponse({"error": internal_message(err)}, status_code=500)
