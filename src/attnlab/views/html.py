"""A notebook view: an object Jupyter shows inline, drawn by the explorer's vendored scripts.

Each view is a :class:`View`: ``_repr_html_`` is one self-contained HTML fragment — a ``<div>``
with a unique id, the view's data as ``<script type="application/json">``, the scripts of
``attnlab/explorer/static`` written inline — ``attention.js`` (the attention map), ``tip.js``
(the tooltip), ``views.js`` (the views' tools, buttons and mount) and the other drawings
(:data:`SCRIPTS`), each adding its part to one global (``window.attnlabAttention``; the tooltip
``window.attnlabTip``) only if the page has none yet, so ten views on a page run them once in
effect — and a line that mounts the view on its own element. No URL, no CDN,
no requirejs, no stylesheet (inline styles only), no widget comm: the same output draws in
JupyterLab, Notebook 7, VS Code and a static ``jupyter nbconvert --to html`` page, offline. A
notebook that is opened untrusted runs no script; the view then says so in place of the picture.

``_repr_png_`` is the same picture drawn by matplotlib (what a PNG-only front end, or
``view.save("x.png")``, shows); the view's PNG and SVG buttons save what is on screen.
"""

from __future__ import annotations

import html
import io
import uuid
from functools import cached_property
from pathlib import Path
from typing import Any

from attnlab.atomic import write_atomic
from attnlab.explorer.page import inline_script, json_for_html

SCRIPTS = ("attention.js", "tip.js", "views.js", "head_view.js", "neuron_view.js", "caption_memory.js")
ROOT_STYLE = ("font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;color:#111827;"
              "background:#ffffff;padding:8px 10px;border:1px solid #e5e7eb;border-radius:6px;"
              "max-width:100%;overflow-x:auto;box-sizing:border-box;position:relative")
UNDRAWN = ("This attnlab view is drawn by its own script, which has not run here: run the cell, or "
           "trust the notebook (its scripts then run).")
PNG_DPI = 100


def new_id() -> str:
    """A DOM id no other view on the page has: ``attnlab-view-`` and 16 random hex digits."""
    return f"attnlab-view-{uuid.uuid4().hex[:16]}"


def fragment(kind: str, payload: dict[str, Any], title: str | None, element_id: str | None = None) -> str:
    """The HTML of one view of ``kind`` drawing ``payload`` (JSON-ready) under ``title``."""
    element_id = element_id or new_id()
    heading = (f'<div class="attnlab-view-title" style="font-weight:600;margin-bottom:2px">'
               f"{html.escape(title)}</div>") if title else ""
    scripts = "".join(f"<script>{inline_script(name)}</script>" for name in SCRIPTS)
    boot = (f'<script>window.attnlabAttention.views.boot("{element_id}", document.currentScript);</script>')
    return (f'<div class="attnlab-view" id="{element_id}" data-view="{html.escape(kind)}" '
            f'style="{ROOT_STYLE}">{heading}'
            f'<div class="attnlab-view-body"><p style="color:#6b7280;margin:4px 0">{UNDRAWN}</p></div>'
            f'<script type="application/json" class="attnlab-view-data">{json_for_html(payload)}</script>'
            f"{scripts}{boot}</div>")


def page(body: str, title: str) -> str:
    """A whole HTML document holding view fragments ``body``."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<title>{html.escape(title)}</title></head><body style="margin:16px">{body}</body></html>\n')


def figure_png(figure: Any) -> bytes:
    """A matplotlib ``Figure`` as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=PNG_DPI)
    return buffer.getvalue()


class View:
    """One notebook view. A subclass sets :attr:`kind` (its drawing in the scripts), and
    computes :meth:`data` (its JSON, once) and :meth:`figure` (its matplotlib picture)."""

    kind = ""
    title: str | None = None

    def data(self) -> dict[str, Any]:
        raise NotImplementedError

    def figure(self) -> Any:
        raise NotImplementedError

    @cached_property
    def payload(self) -> dict[str, Any]:
        """:meth:`data` with the drawing's kind and a file name for its downloads, computed once."""
        name = "".join(c if c.isalnum() else "-" for c in (self.title or f"attnlab-{type(self).__name__}"))
        return {**self.data(), "kind": self.kind, "name": name.strip("-").lower()[:60] or "attention"}

    def _repr_html_(self) -> str:
        return fragment(self.kind, self.payload, self.title)

    def _repr_png_(self) -> bytes:
        return figure_png(self.figure())

    def html(self) -> str:
        """The view as one self-contained HTML document (a new element id each call)."""
        return page(self._repr_html_(), self.title or "attnlab view")

    def save(self, path: str | Path) -> Path:
        """Write the view to ``path`` atomically: ``.html`` the interactive page, any picture
        format matplotlib writes (``.png``, ``.svg``, ``.pdf``) its :meth:`figure`."""
        path = Path(path)
        if path.suffix.lower() in (".html", ".htm"):
            return write_atomic(path, self.html())
        from attnlab.visualize import save_figure

        return save_figure(self.figure(), path)

    def __repr__(self) -> str:
        return f"<attnlab view {type(self).__name__}{': ' + self.title if self.title else ''}>"
