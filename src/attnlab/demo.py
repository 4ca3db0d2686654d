"""Run the demos (``python -m attnlab.demo``, ``attnlab demo --out DIR``) and print their paths.

Until the translator exists this is the attention-pooling demo of seed 002
(:mod:`attnlab.demos.pooling`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

DEFAULT_OUT = "runs/demo"


def run_demo(out_dir: str | Path = DEFAULT_OUT) -> Path:
    """Run the attention-pooling demo into ``out_dir``; print and return the picture's path."""
    from attnlab.demos import pooling

    print("Attention pooling (Nadaraya-Watson kernel regression), seed 002:\n")
    picture = pooling.run(out_dir).resolve()
    print(f"\npicture: {picture}")
    return picture


def cli(args: argparse.Namespace) -> int:
    """Entry for ``attnlab demo`` (see :mod:`attnlab.cli`); ``args.out`` is the output directory."""
    run_demo(getattr(args, "out", DEFAULT_OUT))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry for ``python -m attnlab.demo [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m attnlab.demo", description=__doc__)
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})"
    )
    return cli(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
