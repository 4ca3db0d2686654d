"""The explorer's HTTP API through Starlette's ASGI test client (and, for concurrency, a real
uvicorn server on a loopback port): every endpoint, and every kind of bad input answered with
its documented status and a one-line JSON error — never a 500. (Hostile clients:
``test_explorer_hostile.py``.)"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch

from attnlab.explorer import app as explorer_app
from attnlab.explorer import views
from attnlab.explorer.models import ModelSet
from attnlab.explorer.requests import LIMITS, MAX_BODY_BYTES, MAX_SOURCE_TOKENS, MAX_TEXT_CHARS
from explorer_toys import api_client, serving

SOURCE = "Ein Kind spielt mit einem Ball."
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import|url\(\s*["']?(?:https?:)?//""", re.I)




def post(client, path: str, body) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(f"/api/{path}", content=content, headers={"content-type": "application/json"})


def test_page_and_its_files_are_served_and_reach_for_nothing_outside(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="static/explorer.css"' in page.text
    names = ("attention.js", "tip.js", "draw.js", "explorer.js")
    places = [page.text.index(f'src="static/{name}"') for name in names]
    assert places == sorted(places)
    scripts = [(name, "javascript") for name in names]
    for name, kind in [*scripts, ("explorer.css", "css")]:
        response = client.get(f"/static/{name}")
        assert response.status_code == 200 and kind in response.headers["content-type"]
        assert not EXTERNAL.search(response.text), name
    assert not EXTERNAL.search(page.text)
    for name, _ in scripts:  # the one URL: the SVG namespace, a name, never fetched
        assert "http://" not in client.get(f"/static/{name}").text.replace("http://www.w3.org/2000/svg", "")


def test_health_and_models(client, models):
    assert client.get("/api/health").json() == {"status": "ok"}
    described = client.get("/api/models").json()
    assert described["limits"] == LIMITS
    (translator,) = described["translator"]
    assert translator["model_type"] == "transformer" and translator["beam"] == 3
    assert (translator["layers"], translator["heads"], translator["attention"]) == (2, 2, True)
    assert described["gpt"][0]["block_size"] == 16 and described["bert"][0]["checkpoint"] == "tiny-bert"
    assert (translator["checkpoint"], described["gpt"][0]["checkpoint"]) == ("translator", "gpt")  # ids


def test_translate(client, models):
    response = post(client, "translate", {"text": SOURCE, "beam": 2})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    view = response.json()
    served = models.get("translator")
    expected = served.pipeline.translate([SOURCE], served.pipeline.settings(beam_size=2))[0]
    assert view["translation"] == expected and view["beam"] == 2
    T, S = len(view["target_tokens"]), len(view["source_tokens"])
    assert torch.tensor(view["attention"]).shape == (2, 2, T, S)
    default = post(client, "translate", {"text": SOURCE}).json()  # the recipe's beam
    assert default["beam"] == 3 and default == views.translation_view(served.pipeline, SOURCE)
    named = post(client, "translate", {"text": SOURCE, "checkpoint": served.name, "beam": None}).json()
    assert named == default


def test_generate_streams_ndjson(client, models):
    body = {"prompt": "Hi", "max_new_tokens": 12, "temperature": 0.9, "seed": 5, "top_k": None}
    with client.stream("POST", "/api/generate", content=json.dumps(body),
                       headers={"content-type": "application/json"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        events = [json.loads(line) for line in response.iter_lines() if line]
    served, expected = models.get("gpt"), []
    views.generate(served.pipeline, "Hi", expected.append, max_new_tokens=12, temperature=0.9,
                   top_k=None, top_p=None, seed=5)
    assert events == json.loads(json.dumps(expected))
    assert [e["event"] for e in events] == ["prompt", *["token"] * 12, "done"]


def test_heads(client):
    view = post(client, "heads", {"text": "It was too wide."}).json()
    assert view["tokens"] == ["[CLS]", "it", "was", "too", "wide", ".", "[SEP]"]
    assert torch.tensor(view["attention"]).shape == (2, 2, 7, 7)


LONG = "a" * (MAX_TEXT_CHARS + 1)
BAD = [
    # (endpoint, body, status, the message starts with)
    ("translate", {"text": ""}, 422, "text must not be empty"),
    ("translate", {"text": " \n\t "}, 422, "text must not be empty"),
    ("translate", {}, 422, "text is required: a non-empty string"),
    ("translate", {"text": None}, 422, "text is required"),
    ("translate", {"text": LONG}, 413,
     f"text has {MAX_TEXT_CHARS + 1} characters; the limit is {MAX_TEXT_CHARS}"),
    ("translate", {"text": "a " * 199}, 413, f"text has 199 subwords; the limit is {MAX_SOURCE_TOKENS}"),
    ("translate", {"text": "x" * (MAX_BODY_BYTES + 10)}, 413, "request body has"),
    ("translate", {"text": 5}, 422, "text must be a string, got number"),
    ("translate", {"text": ["Ein", "Hund"]}, 422, "text must be a string, got array"),
    ("translate", {"text": SOURCE, "beam": "5"}, 422, 'beam must be an integer or null, got string "5"'),
    ("translate", {"text": SOURCE, "beam": True}, 422, "beam must be an integer or null, got boolean"),
    ("translate", {"text": SOURCE, "beam": 2.5}, 422, "beam must be an integer or null, got number 2.5"),
    ("translate", {"text": SOURCE, "beam": 0}, 422, "beam must be in [1, 10], got 0"),
    ("translate", {"text": SOURCE, "beam": 11}, 422, "beam must be in [1, 10], got 11"),
    ("translate", {"text": SOURCE, "bem": 2}, 422,
     "unknown field 'bem'; this endpoint takes text, beam, checkpoint"),
    ("translate", {"text": SOURCE, "checkpoint": "runs/nope"}, 404,
     "unknown checkpoint 'runs/nope'; this server's translators: translator"),
    ("translate", {"text": SOURCE, "checkpoint": 3}, 422, "checkpoint must be a string or null, got number"),
    ("translate", b'text=Ein Hund', 422, "request body is not JSON: Expecting value at line 1 column 1"),
    ("translate", b"", 422, "request body is not JSON"),
    ("translate", b'{"text": "Ein Hund"', 422, "request body is not JSON"),
    ("translate", b'["Ein Hund"]', 422, "request body must be a JSON object, got array"),
    ("translate", b'"Ein Hund"', 422, "request body must be a JSON object, got string"),
    ("translate", b'{"text": "Ein", "beam": NaN}', 422, "request body is not JSON: NaN is not a JSON number"),
    ("translate", b'{"text": "Ein Hund l\xe4uft."}', 422,
     "request body is not valid UTF-8 (invalid continuation"),
    ("translate", b'\xff\xfe{"text": "x"}', 422,
     "request body is not valid UTF-8 (invalid start byte at byte 0)"),
    ("translate", b'{"text": "Ein \\ud800 Hund"}', 422,
     "text is not valid Unicode (a lone surrogate at character 4)"),
    ("generate", {"prompt": ""}, 422, "prompt must not be empty"),
    ("generate", {"prompt": LONG}, 413, "prompt has 401 characters"),
    ("generate", {"prompt": "Grüße"}, 422,
     "prompt cannot be encoded: text has 2 characters not in the vocabulary"),
    ("generate", {"prompt": "Hi", "max_new_tokens": 0}, 422, "max_new_tokens must be in [1, 300], got 0"),
    ("generate", {"prompt": "Hi", "max_new_tokens": 301}, 422, "max_new_tokens must be in [1, 300]"),
    ("generate", {"prompt": "Hi", "max_new_tokens": None}, 422,
     "max_new_tokens must be an integer, got null"),
    ("generate", {"prompt": "Hi", "temperature": -0.5}, 422,
     "temperature must be 0 or in [0.001, 10], got -0.5"),
    ("generate", {"prompt": "Hi", "temperature": "hot"}, 422, "temperature must be a number, got string"),
    ("generate", {"prompt": "Hi", "top_p": 0}, 422, "top_p must be in [0.001, 1], got 0"),
    ("generate", {"prompt": "Hi", "top_k": 0}, 422, "top_k must be in [1, "),
    ("generate", {"prompt": "Hi", "seed": -1}, 422, "seed must be in [0, "),
    ("generate", {"prompt": "Hi", "seed": 2**70}, 422, "seed must be in [0, "),
    ("generate", {"prompt": "Hi", "checkpoint": "other"}, 404,
     "unknown checkpoint 'other'; this server's gpts: "),
    ("generate", {"text": "Hi"}, 422, "unknown field 'text'"),
    ("heads", {"text": ""}, 422, "text must not be empty"),
    ("heads", {"text": "it was too wide . " * 13}, 413, "text has 67 word pieces; the limit is 64"),
    ("heads", {"text": LONG}, 413, "text has 401 characters"),
    ("heads", {"sentence": "it"}, 422, "unknown field 'sentence'; this endpoint takes text"),
]


@pytest.mark.parametrize(("endpoint", "body", "status", "message"), BAD,
                         ids=[f"{e}-{i}" for i, (e, *_) in enumerate(BAD)])
def test_bad_input_is_a_json_error_with_its_status(client, endpoint, body, status, message):
    response = post(client, endpoint, body)
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"] == "application/json"
    error = response.json()
    assert list(error) == ["error"] and "\n" not in error["error"]
    assert error["error"].startswith(message), error["error"]


def test_wrong_routes_and_methods_are_json_too(client):
    missing = client.get("/api/nope")
    assert missing.status_code == 404 and missing.json() == {"error": "no such page: /api/nope"}
    wrong = client.get("/api/translate")
    assert wrong.status_code == 405 and wrong.json() == {"error": "GET is not allowed on /api/translate"}
    assert client.get("/static/nope.js").status_code == 404


def test_a_model_not_loaded_is_a_503_naming_its_flag(models):
    only = ModelSet([models.get("translator")])
    with api_client(only, raise_errors=True) as lonely:
        gpt = post(lonely, "generate", {"prompt": "Hi"})
        assert gpt.status_code == 503
        assert gpt.json()["error"] == "no gpt is loaded: start attnlab serve with --gpt MODEL"
        heads = post(lonely, "heads", {"text": "it"})
        assert heads.status_code == 503 and "--bert DIR" in heads.json()["error"]
        assert lonely.get("/api/models").json()["gpt"] == []


def test_a_defect_is_a_json_500_not_a_crash(models, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(explorer_app.views, "head_view", broken)
    with api_client(models) as test_client:
        response = post(test_client, "heads", {"text": "it"})
    assert response.status_code == 500 and response.json() == {"error": "internal error: RuntimeError: boom"}


def test_concurrent_requests_take_turns_on_a_model_off_the_event_loop(models, monkeypatch):
    """A real server, 12 concurrent translations: each answer equals the one computed alone;
    the view runs in worker threads (no event loop there), one at a time (the model's lock);
    the health endpoint answers while they wait."""
    original, active, seen = views.translation_view, [0], {"max": 0, "loop_threads": 0}
    lock, busy = threading.Lock(), threading.Event()

    def watched(*args, **kwargs):
        busy.set()
        with lock:
            active[0] += 1
            seen["max"] = max(seen["max"], active[0])
        try:
            import asyncio

            try:
                asyncio.get_running_loop()
                seen["loop_threads"] += 1
            except RuntimeError:
                pass
            time.sleep(0.02)
            return original(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(explorer_app.views, "translation_view", watched)
    served = models.get("translator")
    sentences = ["Ein Hund läuft.", "Die Katze schläft.", "Eine Frau liest ein Buch.", "Zwei Männer."] * 3
    alone = {s: original(served.pipeline, s, beam=2) for s in set(sentences)}
    with serving(models) as base, httpx.Client(base_url=base, timeout=60) as http:
        with ThreadPoolExecutor(max_workers=len(sentences)) as pool:
            futures = [pool.submit(http.post, "/api/translate", json={"text": s, "beam": 2})
                       for s in sentences]
            assert busy.wait(timeout=30)  # a translation is running (the rest wait for the lock)
            start = time.perf_counter()
            health = http.get("/api/health")
            health_s = time.perf_counter() - start
            answers = [f.result() for f in futures]
    assert health.json() == {"status": "ok"} and health_s < 1.0
    assert [a.status_code for a in answers] == [200] * len(sentences)
    assert [a.json() for a in answers] == [alone[s] for s in sentences]
    assert seen == {"max": 1, "loop_threads": 0}


def test_generation_is_streamed_and_stops_when_the_client_leaves(models, monkeypatch):
    """A stand-in generation that waits, after its first event, until the client has read that
    event: it only finishes if the event left the server before the rest were made. The client
    then reads three more and hangs up; the generation stops at its next token."""
    gate, stopped_at = threading.Event(), []

    def slow_generate(pipeline, prompt, emit, **settings):
        emit({"event": "prompt"})
        assert gate.wait(timeout=30), "the first event was not streamed"
        for index in range(100_000):
            try:
                emit({"event": "token", "index": index})
            except explorer_app.Cancelled:
                stopped_at.append(index)
                raise
            time.sleep(0.002)

    monkeypatch.setattr(explorer_app.views, "generate", slow_generate)
    with serving(models) as base, httpx.Client(base_url=base, timeout=30) as http:
        with http.stream("POST", "/api/generate", json={"prompt": "Hi"}) as response:
            lines = response.iter_lines()
            assert json.loads(next(lines)) == {"event": "prompt"}
            gate.set()
            assert [json.loads(next(lines))["index"] for _ in range(3)] == [0, 1, 2]
        deadline = time.monotonic() + 20
        while not stopped_at and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stopped_at and stopped_at[0] < 1_000, stopped_at  # within ~2 s of the hang-up (seen: 3)
