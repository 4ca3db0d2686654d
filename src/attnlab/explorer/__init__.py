"""The attention explorer: one offline web page and a JSON API over attnlab's own models.

``attnlab serve`` starts it (:mod:`.commands`, :mod:`.app`); ``attnlab export-html`` writes the
same views into one self-contained HTML file (:mod:`.export`). The pieces:

* :mod:`.requests` — the API's input caps and the checks that turn bad input into 413 / 422;
* :mod:`.models` — loading the translator, the GPT and MiniLM, one lock per model;
* :mod:`.views` — what the page draws and the API returns, computed by attnlab;
* :mod:`.page` — the page from its vendored script and style (``static/``), linked or inline;
* :mod:`.app` — the Starlette routes, streaming and JSON errors.

Nothing here is imported by ``import attnlab``: the server needs ``pip install 'attnlab[serve]'``.
"""
