"""Tiny models for the attention explorer's tests, built in about a second.

* :func:`translator_checkpoint` — a random 2-decoder-layer, 2-head :class:`Transformer` with a
  word-level tokenizer of a few Multi30k-like sentences (so every subword is a readable word),
  saved as a checkpoint directory (``recipe.json`` asks for beam 3 and short outputs);
* :func:`gpt_checkpoint` — :func:`generation_toys.tiny_gpt` (2 layers, 2 heads, block 16) over
  a character vocabulary, saved with its :class:`CharTokenizer`;
* :func:`tiny_encoder` — a 2-layer, 2-head BERT-style :class:`Encoder` with a word-level
  Hugging Face tokenizer that adds ``[CLS]`` and ``[SEP]`` like MiniLM's (an
  :class:`EncoderPipeline`);
* :func:`tiny_models` — the three as the :class:`ModelSet` a server answers with;
* :func:`serving` — the explorer's uvicorn server over a model set, on a free loopback port, in
  a thread (``create_app``'s keywords, ``access`` and ``limits``, passed on);
* :func:`half_body` — a client that sends a request's head and half its body, and waits;
  :func:`wait_until` — a bounded wait for something the server does.
"""

from __future__ import annotations

import json
import socket
import string
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, normalizers, pre_tokenizers, processors

from attnlab.data import CharTokenizer
from attnlab.data.tokenizers import WordTokenizer, save_tokenizers
from attnlab.explorer.models import ModelSet, load_gpt, load_translator, served_encoder
from attnlab.models import Encoder, EncoderConfig, Transformer, TransformerConfig
from attnlab.pipelines import EncoderPipeline
from generation_toys import tiny_gpt

GERMAN = [
    "Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball im Park.",
    "Eine Frau liest ein Buch.", "Ein Kind spielt mit einem Ball.", "Die Katze schläft auf dem Sofa.",
]
ENGLISH = [
    "A dog runs across the grass.", "Two men play soccer in the park.", "A woman reads a book.",
    "A child plays with a ball.", "The cat sleeps on the sofa.",
]
CHARS = string.ascii_letters + string.digits + " \n.,;:!?'-"
WORDS = "the animal did n't cross street because it was too tired wide bank of river a dog".split()


def translator_checkpoint(directory: Path) -> Path:
    tokenizer = WordTokenizer.train(GERMAN + ENGLISH)
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_encoder_layers=1,
        num_decoder_layers=2, d_ff=64, dropout=0.0, share_embeddings=True,
    )
    Transformer(config).eval().save_pretrained(directory)
    save_tokenizers(directory, tokenizer, tokenizer)
    recipe = {"task": "translation", "eval": {"beam_size": 3, "max_len_a": 1.0, "max_len_b": 4}}
    (directory / "recipe.json").write_text(json.dumps(recipe), encoding="utf-8")
    return directory


def gpt_checkpoint(directory: Path) -> Path:
    tokenizer = CharTokenizer.train(CHARS)
    tiny_gpt(vocab_size=tokenizer.vocab_size, block_size=16, sharpen=4.0).save_pretrained(directory)
    tokenizer.save(directory)
    return directory


def tiny_encoder() -> EncoderPipeline:
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS, "."])}
    hf = HFTokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.normalizer = normalizers.Lowercase()
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=len(vocab), num_layers=2, max_len=128, d_model=16, num_heads=2, d_ff=32,
                           dropout=0.0)
    return EncoderPipeline(Encoder(config).eval(), hf)


def tiny_models(directory: Path) -> ModelSet:
    translator = load_translator(str(translator_checkpoint(directory / "translator")))
    gpt = load_gpt(str(gpt_checkpoint(directory / "gpt")))
    return ModelSet([translator, gpt, served_encoder("tiny-bert", tiny_encoder())])


LOCAL = "http://localhost"  # the test client's Host: a loopback name, as a browser's would be


def api_client(models: ModelSet, *, raise_errors: bool = False, **settings: Any):
    """Starlette's test client over ``create_app(models, **settings)``, sending requests as a
    browser on this machine would (``Host: localhost``); a defect answers 500 unless
    ``raise_errors``."""
    from starlette.testclient import TestClient

    from attnlab.explorer.app import create_app

    return TestClient(create_app(models, **settings), base_url=LOCAL, raise_server_exceptions=raise_errors)


@contextmanager
def serving(models: ModelSet, *, grace: float | None = None, **settings: Any) -> Iterator[str]:
    """Run the explorer over ``models`` (``create_app(models, **settings)``) on 127.0.0.1 (a
    free port) in a thread, as ``attnlab serve`` runs it (:func:`.server.explorer_server`, its
    stop giving the requests in flight ``grace`` seconds, default its own); yield its base URL
    (no trailing slash); stop it on exit."""
    from attnlab.explorer.app import create_app
    from attnlab.explorer.commands import listen, url_of
    from attnlab.explorer.server import GRACE_S, explorer_server

    sock = listen("127.0.0.1", 0)
    server = explorer_server(create_app(models, **settings), grace=GRACE_S if grace is None else grace)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the explorer's test server did not start")
        time.sleep(0.02)
    try:
        yield url_of(sock).rstrip("/")
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def half_body(port: int) -> socket.socket:
    """A connection to the explorer on ``port`` that has sent a translate request's head and
    the start of its body, which its ``Content-Length`` says is longer: a client that is
    still sending, or one that will hang up mid-body. Left open."""
    head = (f"POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n").encode()
    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    connection.sendall(head + b'{"text": "Ein Hund')
    return connection


def wait_until(condition, what: str) -> None:
    """Poll ``condition`` (a bounded wait, not a measurement)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"waited 30 s for {what}"
        time.sleep(0.01)
