"""The ``attnlab`` command. Subcommands import their heavy modules lazily so ``--help`` is fast."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from attnlab import __version__

# name -> (help, module:function). Each function takes the parsed argparse namespace.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("run the attention-pooling demo and save its picture", "attnlab.demo:cli"),
}


def _load(target: str) -> Callable[[argparse.Namespace], int | None]:
    import importlib

    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnlab",
        description="attnlab: the Transformer and the attention family, from the lecture equations up.",
    )
    parser.add_argument("--version", action="version", version=f"attnlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, target) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_target=target)
        adder = SUBCOMMAND_ARGS.get(name)
        if adder is not None:
            adder(p)
    return parser


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/demo", help="directory for the pictures (default: runs/demo)")


SUBCOMMAND_ARGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {"demo": _demo_args}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    result = _load(args._target)(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
