"""The ``attnlab`` command. Subcommands import their heavy modules lazily so ``--help`` is fast.

    attnlab train --config configs/multi30k_de_en.toml [key=value ...]
    attnlab translate CHECKPOINT [--beam 5] < in.txt > out.txt
    attnlab evaluate CHECKPOINT [--split test_2016_flickr]
    attnlab generate CHECKPOINT --prompt "ROMEO:" --max-new-tokens 500
    attnlab plot RUN_DIR
    attnlab demo
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from attnlab import __version__
from attnlab.runtime import keep_freed_memory


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="TOML recipe, e.g. configs/multi30k_de_en.toml")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides: train.max_steps=100")
    p.add_argument("--run-dir", default=None, help="output directory (default: runs/<config name>)")
    p.add_argument("--resume", default=None, help="checkpoint or run directory to continue exactly")
    p.add_argument("--data-dir", default=None, help="corpora directory (default: $ATTNLAB_DATA)")
    _device_arg(p)


def _device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 or mps (default: cpu)")


def _translate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a translation model")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1 = greedy (default 5)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha")
    p.add_argument("--batch-size", type=int, default=64, help="sentences decoded together")
    p.add_argument("--max-len", type=int, default=None, help="longest output in tokens")
    _device_arg(p)


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory (translation or language model)")
    p.add_argument("--split", default=None, help="data split (default: test_2016_flickr / val)")
    p.add_argument("--beam", type=int, default=5, help="beam size for translation (default 5)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha")
    p.add_argument("--data-dir", default=None, help="corpora directory (default: $ATTNLAB_DATA)")
    _device_arg(p)


def _generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a GPT")
    p.add_argument("--prompt", default="\n", help="text to continue")
    p.add_argument("--max-new-tokens", type=int, default=500)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=200)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    _device_arg(p)


def _finetune_args(p: argparse.ArgumentParser) -> None:
    # The checkpoint is an option so the key=value overrides are the only positionals.
    p.add_argument("--checkpoint", required=True, help="the pretrained GPT checkpoint (with tokenizer.json)")
    p.add_argument("--config", default=None, help="TOML recipe (e.g. configs/shakespeare_vs_kjv.toml)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides: finetune.steps=300")
    p.add_argument("--out", default=None, help="directory for the runs and report.json")
    p.add_argument("--data-dir", default=None, help="corpora directory (default $ATTNLAB_DATA)")
    p.add_argument("--sword-dir", default=None, help="SWORD library (default $SWORD_PATH, /usr/share/sword)")
    p.add_argument("--no-install", action="store_true", help="never apt-get install sword-text-kjv")


def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a training run directory holding metrics.jsonl")


def _demo_args(p: argparse.ArgumentParser) -> None:
    from attnlab.labs.demo import add_arguments

    add_arguments(p)


# name -> (help, "module:function", argument adder). Each function takes the parsed namespace.
SUBCOMMANDS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = {
    "train": ("train a model from a TOML recipe", "attnlab.tasks.commands:train", _train_args),
    "translate": ("translate stdin to stdout with a checkpoint", "attnlab.tasks.commands:translate",
                  _translate_args),
    "evaluate": ("score a checkpoint: BLEU/chrF or perplexity", "attnlab.tasks.commands:evaluate",
                 _evaluate_args),
    "generate": ("sample text from a GPT checkpoint", "attnlab.tasks.commands:generate", _generate_args),
    "finetune": ("fine-tune a GPT checkpoint as a classifier (Shakespeare vs KJV) against scratch",
                 "attnlab.tasks.finetune:cli", _finetune_args),
    "plot": ("draw loss, lr and BLEU curves of a run to PNG", "attnlab.tasks.commands:plot", _plot_args),
    "demo": ("train the demo translator (or --pooling) and save its pictures",
             "attnlab.labs.demo:cli", _demo_args),
}


def _load(target: str) -> Callable[[argparse.Namespace], int | None]:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnlab",
        description="attnlab: the Transformer and the attention family, from the lecture equations up.",
    )
    parser.add_argument("--version", action="version", version=f"attnlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, target, add_args) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_target=target)
        add_args(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    keep_freed_memory()  # glibc: reuse freed activations instead of page-faulting them in again
    try:
        result = _load(args._target)(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"attnlab {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
