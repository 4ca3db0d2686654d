"""The attention map: a GPT reads a text, every layer and head kept for the page to ask for.

Ba (CSC413 Lecture 8), "Transformer Language Pre-training": a decoder-only model reads a text
left to right, each token attending to the tokens before it. :func:`read_text` runs
:meth:`~attnlab.pipelines.LanguageModelPipeline.attention` once — ``(L, H, n, n)``, at most
:data:`MAX_READ_TOKENS` = 512 tokens (a model with a shorter context reads the last
``block_size``) — and keeps it as a :class:`Reading`: one compact record per head and a
thumbnail of each (:mod:`.quantize`). The page gets the overview first (:meth:`Reading.describe`:
tokens, shapes, thumbnails, ~370 KB of JSON for SmolLM2 at 512 tokens) and then one head at a
time, as it is picked (:meth:`Reading.record`, 133 KB at 512 tokens), never the 283 MB of
float32 weights.

The server keeps the last :data:`KEPT_READINGS` readings (:class:`Readings`; each up to 36 MB at
512 tokens × 30 layers × 9 heads), named by a digest of the model and the text, so reading a
text again costs nothing. ``attnlab export-html`` embeds a reading whole (:meth:`Reading.embedded`):
every record zlib-compressed (the quantized weights are mostly 0: about a quarter of their size)
and base64-encoded, which the page inflates with the browser's ``DecompressionStream`` as each
head is shown. At the cap that is about 12 MB of page for SmolLM2 (36 MB of records,
``benchmarks/explorer_llm.py``): big for a web page, fine for a file opened from disk, and it
draws as fast as the served page, so the file keeps all 512 tokens rather than a shorter cap.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from attnlab.explorer.errors import ApiError, too_long
from attnlab.explorer.quantize import quantize_heads, record_size, thumbnails
from attnlab.explorer.requests import MAX_READ_TOKENS
from attnlab.pipelines import LanguageModelPipeline

KEPT_READINGS = 4
COMPRESSION_LEVEL = 6


@dataclass
class Reading:
    """One text as a GPT read it: ``tokens`` (the ``n`` read), ``layers`` × ``heads`` records
    (layer-major), the thumbnails (``thumbnail`` blocks a side), ``dropped`` tokens before the
    model's context, and the ``seconds`` its attention took (which the server sends as its
    ``Server-Timing``, never in the view: an exported file is the same however fast it was made)."""

    id: str
    checkpoint: str
    tokens: list[str]
    layers: int
    heads: int
    causal: bool
    records: list[bytes] = field(repr=False)
    thumbnail: int
    thumbnail_data: bytes = field(repr=False)
    dropped: int = 0
    seconds: float = 0.0

    def record(self, layer: int, head: int) -> bytes:
        """The record of ``layer``'s ``head`` (0-based; 404 outside the model)."""
        if not (0 <= layer < self.layers and 0 <= head < self.heads):
            raise ApiError(404, f"no layer {layer}, head {head}: this model has {self.layers} layers × "
                                f"{self.heads} heads, counted from 0")
        return self.records[layer * self.heads + head]

    def describe(self) -> dict[str, Any]:
        """The overview the page draws first: JSON-ready, the thumbnails base64-encoded."""
        n = len(self.tokens)
        return {"id": self.id, "checkpoint": self.checkpoint, "tokens": self.tokens, "n": n,
                "layers": self.layers, "heads": self.heads, "causal": self.causal, "dropped": self.dropped,
                "record_bytes": record_size(n, self.causal),
                "thumbnail": {"size": self.thumbnail,
                              "data": base64.b64encode(self.thumbnail_data).decode("ascii")}}

    def embedded(self) -> dict[str, Any]:
        """:meth:`describe` with every record in it, zlib-compressed and base64-encoded
        (``"records"``, layer-major), for a page that has no server to ask."""
        return {**self.describe(), "records": packed(self.records), "compressed": "deflate"}


def packed(records: list[bytes]) -> list[str]:
    """``records`` as a page embeds them: each zlib-compressed (``"deflate"`` to the browser's
    ``DecompressionStream``) and base64-encoded (the notebook views, :mod:`attnlab.views`, too)."""
    return [base64.b64encode(zlib.compress(r, COMPRESSION_LEVEL)).decode("ascii") for r in records]


def reading_id(checkpoint: str, text: str) -> str:
    """The name of ``checkpoint``'s reading of ``text``: the same text, the same reading."""
    return hashlib.sha256(f"{checkpoint}\0{text}".encode()).hexdigest()[:20]


def read_text(pipeline: LanguageModelPipeline, text: str, checkpoint: str,
              limit: int = MAX_READ_TOKENS) -> Reading:
    """``checkpoint``'s reading of ``text`` (413 over ``limit`` tokens; a ``ValueError`` for
    text the tokenizer cannot encode)."""
    count = len(pipeline.prompt_ids(text, "text"))
    if count > limit:
        raise too_long(f"text has {count} tokens; the limit is {limit}")
    start = time.perf_counter()
    found = pipeline.attention(text)
    seconds = time.perf_counter() - start
    layers, heads, n = found.weights.shape[:3]
    size, data = thumbnails(found.weights)
    records = quantize_heads(found.weights, causal=True)
    return Reading(reading_id(checkpoint, text), checkpoint, found.tokens, layers, heads, True, records, size,
                   data, dropped=count - n, seconds=seconds)


class Readings:
    """The last ``kept`` readings, by id (thread-safe: the model's worker adds, the event loop
    reads)."""

    def __init__(self, kept: int = KEPT_READINGS) -> None:
        self.kept, self._held, self._lock = kept, OrderedDict(), threading.Lock()

    def add(self, reading: Reading) -> Reading:
        with self._lock:
            self._held[reading.id] = reading
            self._held.move_to_end(reading.id)
            while len(self._held) > self.kept:
                self._held.popitem(last=False)
        return reading

    def find(self, reading: str) -> Reading | None:
        """The reading called ``reading``, or ``None``."""
        with self._lock:
            found = self._held.get(reading)
            if found is not None:
                self._held.move_to_end(reading)
            return found

    def get(self, reading: str) -> Reading:
        """The reading called ``reading``; 404 when it is not (or no longer) held."""
        found = self.find(reading)
        if found is None:
            raise ApiError(404, f"no reading {reading[:40]!r} is held (the server keeps the last "
                                f"{self.kept}); read the text again")
        return found
