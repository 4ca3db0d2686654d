"""What the explorer's API accepts: the input caps and the checks of every request body.

A body is one JSON object of at most :data:`MAX_BODY_BYTES` bytes, UTF-8, sent as
``Content-Type: application/json`` (anything else: 415, :mod:`.app`). Caps (over one: 413):

* :data:`MAX_BODY_BYTES` = 16,384 — the whole request body;
* :data:`MAX_TEXT_CHARS` = 400 — the German to translate, a GPT prompt, a head-view sentence;
* :data:`MAX_READ_CHARS` = 4,000 — a text for the attention map;
* :data:`MAX_SOURCE_TOKENS` = 128 — the subwords of the German to translate, after its
  tokenization (400 characters may be 1,600 byte-level tokens);
* :data:`MAX_SENTENCE_TOKENS` = 64 — MiniLM word pieces of a head-view sentence, ``[CLS]`` and
  ``[SEP]`` included (both token caps are checked by :mod:`.bounds`, which holds the tokenizers);
* :data:`MAX_READ_TOKENS` = 512 — the tokens of a text for the attention map, after its
  tokenization (checked by :mod:`.readings`).

Bounds on the work of one request: a translation's output has at most
:data:`MAX_OUTPUT_TOKENS` = 160 subwords (fewer when the checkpoint's recipe says so), so a beam
search runs at most ``beam × 160`` hypothesis steps; a generation at most ``max_new_tokens``.
Each model takes at most :data:`MAX_QUEUE` = 64 requests at a time, running or waiting (more:
503 with ``Retry-After``), and stops a request after :data:`MODEL_SECONDS` = 60 s on the
model (503) — checked at each decoding step (:mod:`.jobs`).

Ranges (outside one: 422): ``beam`` 1..:data:`MAX_BEAM` (10); ``max_new_tokens``
1..:data:`MAX_NEW_TOKENS` (300); ``temperature`` 0 (greedy) or
:data:`MIN_TEMPERATURE`..:data:`MAX_TEMPERATURE` (0.001..10); ``top_k`` ≥ 1 or null; ``top_p``
in [:data:`MIN_TOP_P`, 1] (0.001..1) or null; ``seed`` 0..2⁶³−1 or null. (Nearer 0 than 0.001,
either is greedy decoding in effect; below float32's smallest number it would be 0 in the
model's arithmetic, a division by zero.)

Also 422: a body that is not UTF-8, nested more than :data:`MAX_JSON_DEPTH` = 16 levels deep
(found by a scan of its brackets before it is parsed, so no parser recursion), not JSON
(``NaN`` and ``Infinity`` included), not an object; an integer of more than
:data:`MAX_INTEGER_DIGITS` = 100 digits anywhere in it (Python refuses to convert one of over
4,300), a number too large for a float (``1e999``); an unknown field; a missing, empty (blank)
or non-string text; a text with a lone surrogate (``"\\ud800"``); a number where a string
belongs and so on — each message names the field and what it got.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from attnlab.explorer.errors import invalid, too_long
from attnlab.parsing import nesting_depth

MAX_BODY_BYTES = 16_384
MAX_TEXT_CHARS = 400
MAX_READ_CHARS = 4000
MAX_SOURCE_TOKENS = 128
MAX_OUTPUT_TOKENS = 160
MAX_SENTENCE_TOKENS = 64
MAX_READ_TOKENS = 512
MAX_JSON_DEPTH = 16
MAX_INTEGER_DIGITS = 100
MAX_QUEUE = 64
MODEL_SECONDS = 60.0
RETRY_AFTER_S = 5
MAX_BEAM = 10
MAX_NEW_TOKENS = 300
MAX_TEMPERATURE = 10.0
MIN_TEMPERATURE = 0.001
MIN_TOP_P = 0.001
MAX_SEED = 2**63 - 1

DEFAULT_SOURCE = "Ein Hund läuft über die Wiese."
DEFAULT_PROMPT = "ROMEO:"
DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."
DEFAULT_READING = ("The animal didn't cross the street because it was too tired. It lay down by the "
                   "river bank and slept until the sun rose over the hills.")
"""The inputs ``attnlab export-html`` shows when given none (the page's own defaults too)."""

LIMITS = {
    "max_body_bytes": MAX_BODY_BYTES, "max_json_depth": MAX_JSON_DEPTH, "max_text_chars": MAX_TEXT_CHARS,
    "max_read_chars": MAX_READ_CHARS, "max_read_tokens": MAX_READ_TOKENS,
    "max_source_tokens": MAX_SOURCE_TOKENS, "max_output_tokens": MAX_OUTPUT_TOKENS,
    "max_sentence_tokens": MAX_SENTENCE_TOKENS, "max_beam": MAX_BEAM,
    "max_new_tokens": MAX_NEW_TOKENS, "min_temperature": MIN_TEMPERATURE, "max_temperature": MAX_TEMPERATURE,
    "min_top_p": MIN_TOP_P,
    "max_queue": MAX_QUEUE, "model_seconds": MODEL_SECONDS,
}
"""The caps, as ``GET /api/models`` reports them to the page (a server started with other
``max_queue`` or ``model_seconds`` reports its own)."""


@dataclass(frozen=True)
class TranslateRequest:
    """``POST /api/translate``: German ``text``; ``beam`` (default: the checkpoint recipe's)."""

    text: str
    beam: int | None = None
    checkpoint: str | None = None


@dataclass(frozen=True)
class GenerateRequest:
    """``POST /api/generate``: a ``prompt`` and how to sample its continuation."""

    prompt: str
    max_new_tokens: int = 100
    temperature: float = 0.8
    top_k: int | None = 200
    top_p: float | None = None
    seed: int | None = None
    checkpoint: str | None = None


@dataclass(frozen=True)
class ReadRequest:
    """``POST /api/attention``: a ``text`` for a GPT to read (its attention map)."""

    text: str
    checkpoint: str | None = None


@dataclass(frozen=True)
class HeadsRequest:
    """``POST /api/heads``: one English sentence ``text`` for MiniLM's head view."""

    text: str


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _refuse_constant(name: str) -> None:
    raise invalid(f"request body is not JSON: {name} is not a JSON number")


def _bounded_int(text: str) -> int:
    """A JSON integer of at most :data:`MAX_INTEGER_DIGITS` digits (``int()`` of a longer one
    costs time quadratic in its length, and Python refuses one of over 4,300 digits)."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise invalid(f"request body has an integer of {digits} digits; the limit is {MAX_INTEGER_DIGITS}")
    return int(text)


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or an exponent, refused when it is too large for a float
    (``1e999`` would be infinity)."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:20]}… ({len(text)} characters)"
        raise invalid(f"request body has a number too large for a float: {shown}")
    return value


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request body (413 over :data:`MAX_BODY_BYTES`, else 422 when bad)."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_long(f"request body has {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise invalid(f"request body is not valid UTF-8 ({err.reason} at byte {err.start})") from None
    if (depth := nesting_depth(text)) > MAX_JSON_DEPTH:
        raise invalid(f"request body nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        body = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float,
                          parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        where = f"line {err.lineno} column {err.colno}"
        raise invalid(f"request body is not JSON: {err.msg} at {where}") from None
    if not isinstance(body, dict):
        raise invalid(f"request body must be a JSON object, got {json_kind(body)}")
    return body


def text_field(body: dict[str, Any], name: str, limit: int = MAX_TEXT_CHARS) -> str:
    """A required, non-blank string of at most ``limit`` characters."""
    value = body.get(name)
    if value is None:
        raise invalid(f"{name} is required: a non-empty string")
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, got {json_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise invalid(f"{name} is not valid Unicode (a lone surrogate at character {err.start})") from None
    if not value.strip():
        raise invalid(f"{name} must not be empty")
    if len(value) > limit:
        raise too_long(f"{name} has {len(value)} characters; the limit is {limit}")
    return value


def number_field(
    body: dict[str, Any], name: str, default: Any, *, kind: type, low: float, high: float,
    or_zero: bool = False, nullable: bool = False,
) -> Any:
    """An optional ``int`` (``kind=int``) or number in ``[low, high]`` (or 0 when ``or_zero``);
    ``null`` only when ``nullable``; absent: ``default``."""
    if name not in body:
        return default
    value = body[name]
    if value is None and nullable:
        return None
    wrong = isinstance(value, bool) or not isinstance(value, (int, float))
    if wrong or (kind is int and not isinstance(value, int)):
        what = "an integer" if kind is int else "a number"
        also = " or null" if nullable else ""
        raise invalid(f"{name} must be {what}{also}, got {json_kind(value)} {json.dumps(value)}")
    if not (low <= value <= high or (or_zero and value == 0)):
        zero = "0 or " if or_zero else ""
        raise invalid(f"{name} must be {zero}in [{low:g}, {high:g}], got {value}")
    return kind(value)


def optional_string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid(f"{name} must be a string or null, got {json_kind(value)}")
    return value


def _check_fields(body: dict[str, Any], request: type) -> None:
    names = [f.name for f in dataclasses.fields(request)]
    unknown = sorted(set(body) - set(names))
    if unknown:
        raise invalid(f"unknown field {unknown[0]!r}; this endpoint takes {', '.join(names)}")


def translate_request(body: dict[str, Any]) -> TranslateRequest:
    """The checked fields of a translate request (a body from :func:`parse_body`)."""
    _check_fields(body, TranslateRequest)
    return TranslateRequest(
        text=text_field(body, "text"),
        beam=number_field(body, "beam", None, kind=int, low=1, high=MAX_BEAM, nullable=True),
        checkpoint=optional_string(body, "checkpoint"),
    )


def generate_request(body: dict[str, Any]) -> GenerateRequest:
    """The checked fields of a generate request."""
    _check_fields(body, GenerateRequest)
    defaults = GenerateRequest(prompt="")
    return GenerateRequest(
        prompt=text_field(body, "prompt"),
        max_new_tokens=number_field(body, "max_new_tokens", defaults.max_new_tokens, kind=int, low=1,
                                    high=MAX_NEW_TOKENS),
        temperature=number_field(body, "temperature", defaults.temperature, kind=float, low=MIN_TEMPERATURE,
                                 high=MAX_TEMPERATURE, or_zero=True),
        top_k=number_field(body, "top_k", defaults.top_k, kind=int, low=1, high=MAX_SEED, nullable=True),
        top_p=number_field(body, "top_p", None, kind=float, low=MIN_TOP_P, high=1, nullable=True),
        seed=number_field(body, "seed", None, kind=int, low=0, high=MAX_SEED, nullable=True),
        checkpoint=optional_string(body, "checkpoint"),
    )


def heads_request(body: dict[str, Any]) -> HeadsRequest:
    """The checked fields of a head-view request."""
    _check_fields(body, HeadsRequest)
    return HeadsRequest(text=text_field(body, "text"))


def read_request(body: dict[str, Any]) -> ReadRequest:
    """The checked fields of an attention-map request."""
    _check_fields(body, ReadRequest)
    return ReadRequest(text=text_field(body, "text", MAX_READ_CHARS),
                       checkpoint=optional_string(body, "checkpoint"))
