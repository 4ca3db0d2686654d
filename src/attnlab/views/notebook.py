"""A notebook as one HTML page that asks the network for nothing: nbconvert's ``lab`` page offline.

``jupyter nbconvert --to html`` writes a page whose ``<head>`` loads require.js and MathJax from
cdnjs (and mermaid, and the widgets' manager from unpkg, when a notebook uses them). The views
draw without any of them — their scripts are inline, plain ``<script>``, no requirejs — but the
page still reaches for the CDN each time it is opened, and waits on it where the network is slow
rather than absent. :func:`export_html` writes the same ``lab`` page without those ``<script>``
tags: no request at all (equations in Markdown cells then show as their TeX source).
Needs nbformat and nbconvert (Jupyter's own packages).
"""

from __future__ import annotations

from pathlib import Path

from attnlab.atomic import write_atomic

OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def notebook_html(notebook: str | Path, *, offline: bool = True) -> str:
    """The ``lab`` HTML page of the notebook file ``notebook`` (its outputs as saved), without
    the CDN scripts when ``offline``; what ``jupyter nbconvert --to html`` writes when not."""
    try:
        import nbformat
        from nbconvert import HTMLExporter
    except ImportError:
        raise ImportError("exporting a notebook needs nbformat and nbconvert: "
                          "pip install nbformat nbconvert") from None
    path = Path(notebook)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    exporter = HTMLExporter(template_name="lab")
    if offline:
        exporter.raw_template = OFFLINE_TEMPLATE
    body, _ = exporter.from_notebook_node(nbformat.read(path, as_version=4),
                                          resources={"metadata": {"name": path.stem}})
    return body


def export_html(notebook: str | Path, out: str | Path, *, offline: bool = True) -> Path:
    """Write :func:`notebook_html` of ``notebook`` to ``out`` atomically; returns ``out``."""
    return write_atomic(out, notebook_html(notebook, offline=offline))
