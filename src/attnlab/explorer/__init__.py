"""The attention explorer: one offline web page and a JSON API over attnlab's own models.

``attnlab serve`` starts it (:mod:`.commands`, :mod:`.app`); ``attnlab export-html`` writes the
same views into one self-contained HTML file (:mod:`.export`). The pieces:

* :mod:`.requests` — the API's input caps and the checks that turn bad input into 413 / 422;
* :mod:`.bounds` — the caps counted in tokens (source, output, word pieces) around the views;
* :mod:`.access` — who may ask: the ``Host`` allow-list and the API's token;
* :mod:`.jobs` — a request's work: its model's bounded line, dropped or stopped when its
  client leaves or its time is up;
* :mod:`.models` — loading the translator, the GPT and MiniLM (named by short ids), one
  worker and lock per model;
* :mod:`.views` — what the page draws and the API returns, computed by attnlab;
* :mod:`.readings` — a GPT's attention map (every layer and head over up to 512 tokens), kept
  by the server and sent one head at a time, in the records of :mod:`.quantize`;
* :mod:`.page` — the page from its vendored script and style (``static/``), linked or inline;
* :mod:`.app` — the Starlette routes, streaming and JSON errors.

Nothing here is imported by ``import attnlab``: the server needs ``pip install 'attnlab[serve]'``.
"""
