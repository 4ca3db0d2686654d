"""The explorer's one page, from the files shipped in ``attnlab/explorer/static/``.

``explorer.html`` is the page with three slots: ``{{STYLE}}``, ``{{SCRIPT}}`` and ``{{DATA}}``;
``explorer.css`` its style; :data:`SCRIPTS` its scripts, in order (``attention.js`` the
attention map's self-contained canvas renderer, ``tip.js`` the tooltip (the notebook views' too),
``draw.js`` the heatmaps, lines and pickers,
``explorer.js`` the panels and the API). Served (:func:`render_page`
without data), the slots link them from the same server and the scripts ask the JSON API.
Exported (with data), the style and the scripts are written inline and the views go into a
``<script type="application/json">`` block, so the file needs no server and no network.
No slot ever points outside the page's own origin: no CDN, no web font.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

STATIC = Path(__file__).with_name("static")
SCRIPTS = ("attention.js", "tip.js", "draw.js", "explorer.js")
SLOT = re.compile(r"\{\{(STYLE|SCRIPT|DATA)\}\}")


def static_text(name: str) -> str:
    """A file of the vendored ``static/`` folder (``explorer.html``, ``.js``, ``.css``)."""
    return (STATIC / name).read_text(encoding="utf-8")


def json_for_html(data: Any) -> str:
    """``data`` as JSON that cannot end its ``<script>`` element: ``<``, ``>`` and ``&`` are
    written as ``\\u003c``-style escapes, which ``JSON.parse`` reads back unchanged."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def inline_script(name: str) -> str:
    """The script ``static/name`` to write inside a ``<script>`` element (this page, and the
    notebook views of :mod:`attnlab.views`); a ``ValueError`` if it could end that element."""
    script = static_text(name)
    if "</script" in script.lower():
        raise ValueError(f"static/{name} must not contain '</script' (it is written inline)")
    return script


def render_page(data: dict[str, Any] | None = None) -> str:
    """The page: linked to ``static/`` and the API when ``data`` is ``None``, else one
    self-contained document holding ``data`` (the views of :mod:`.export`)."""
    if data is None:
        parts = {
            "STYLE": '<link rel="stylesheet" href="static/explorer.css">',
            "SCRIPT": "\n".join(f'<script src="static/{name}"></script>' for name in SCRIPTS),
            "DATA": "",
        }
    else:
        parts = {
            "STYLE": f"<style>\n{static_text('explorer.css')}</style>",
            "SCRIPT": "\n".join(f"<script>\n{inline_script(name)}</script>" for name in SCRIPTS),
            "DATA": f'<script type="application/json" class="attnlab-data">{json_for_html(data)}</script>',
        }
    return SLOT.sub(lambda slot: parts[slot.group(1)], static_text("explorer.html"))
