"""``attnlab export-html``: the explorer's views written into one self-contained HTML file.

The file holds the page's script and style inline and the views as JSON (:mod:`.page`), so it
opens from disk, offline, in any browser, or in a notebook cell as an ``srcdoc`` frame (nothing
served, nothing fetched)::

    import html
    from IPython.display import HTML
    page = open("explorer.html", encoding="utf-8").read()
    HTML(f'<iframe srcdoc="{html.escape(page)}" width="100%" height="900"></iframe>')

Each view is computed exactly as the API computes it (:mod:`.views`, :mod:`.readings`) for one
input of the command line: a German sentence (translation + cross-attention), a prompt (the
GPT's continuation, every token with its attention; seeded, so the file is reproducible), a
text the GPT reads (its attention map: every layer and head, up to 512 tokens, embedded
compressed, :meth:`.readings.Reading.embedded` says why all of it) and an English sentence
(MiniLM's head view). A model that is not given leaves its tab saying so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from attnlab.atomic import write_atomic
from attnlab.explorer import bounds, views
from attnlab.explorer.models import ModelSet
from attnlab.explorer.page import render_page
from attnlab.explorer.readings import read_text
from attnlab.explorer.requests import (
    DEFAULT_PROMPT,
    DEFAULT_READING,
    DEFAULT_SENTENCE,
    DEFAULT_SOURCE,
    generate_request,
    heads_request,
    read_request,
    translate_request,
)


def export_views(
    models: ModelSet, *, source: str = DEFAULT_SOURCE, beam: int | None = None,
    prompt: str = DEFAULT_PROMPT, max_new_tokens: int = 60, temperature: float = 0.8, seed: int = 0,
    sentence: str = DEFAULT_SENTENCE, text: str = DEFAULT_READING,
) -> dict[str, Any]:
    """The data of an exported page: ``{"note", "translate", "generate", "attention", "heads"}``, each view
    ``{"request": ..., "view": ...}`` from the first model of its kind, ``None`` without one.
    Inputs are checked with the API's own caps (a ``ValueError`` naming the field)."""
    by_kind = {kind: next(iter(models.by_kind[kind].values()), None) for kind in models.by_kind}
    data: dict[str, Any] = {
        "note": f"Written by attnlab export-html on {time.strftime('%Y-%m-%d %H:%M')}: these views were "
                "computed then; run attnlab serve to try your own input.",
        "translate": None, "generate": None, "attention": None, "heads": None,
    }
    if (served := by_kind["translator"]) is not None:
        req = translate_request({"text": source, "beam": beam})
        view = bounds.translation(served.pipeline, req.text, req.beam)
        data["translate"] = {"request": {"text": req.text, "beam": view["beam"], "checkpoint": served.name},
                             "view": view}
    if (served := by_kind["gpt"]) is not None:
        fields = {"prompt": prompt, "max_new_tokens": max_new_tokens, "temperature": temperature,
                  "seed": seed}
        req = generate_request(fields)
        events: list[dict[str, Any]] = []
        views.generate(served.pipeline, req.prompt, events.append,
                       max_new_tokens=req.max_new_tokens, temperature=req.temperature, top_k=req.top_k,
                       top_p=req.top_p, seed=req.seed)
        data["generate"] = {"request": {**fields, "checkpoint": served.name}, "view": {"events": events}}
        read = read_request({"text": text})
        data["attention"] = {"request": {"text": read.text, "checkpoint": served.name},
                             "view": read_text(served.pipeline, read.text, served.name).embedded()}
    if (served := by_kind["bert"]) is not None:
        req = heads_request({"text": sentence})
        data["heads"] = {"request": {"text": req.text}, "view": bounds.heads(served.pipeline, req.text)}
    return data


def write_page(path: str | Path, data: dict[str, Any]) -> Path:
    """Write the self-contained page holding ``data`` to ``path`` atomically (parents created;
    a failed write leaves the old page or none)."""
    return write_atomic(path, render_page(data))
