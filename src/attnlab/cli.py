"""The ``attnlab`` command. Subcommands import their heavy modules lazily so ``--help`` is fast.

Every subcommand takes ``--threads N`` (default: ``$OMP_NUM_THREADS``, else every core) and
``--debug`` (show the traceback of an error instead of its one line; also ``ATTNLAB_DEBUG=1``).
Errors print one line, ``attnlab COMMAND: error: ...``, and exit 2 (a run whose loss became
NaN: 1); Ctrl-C exits 130 and SIGTERM 143 (a training run saves a resumable checkpoint first;
more Ctrl-Cs are ignored until the process has exited). Every text argument must be UTF-8 (a
file name or sentence that is not is refused naming its argument, before anything runs). A
reader that stops reading (``attnlab generate ... | head -2``) ends the command quietly with
141, the shell's code for SIGPIPE.

    attnlab train --config configs/multi30k_de_en.toml [key=value ...]
    attnlab translate CHECKPOINT [--beam 5] < in.txt > out.txt
    attnlab evaluate CHECKPOINT [--split test_2016_flickr]
    attnlab generate CHECKPOINT --prompt "ROMEO:" --max-new-tokens 500
    attnlab plot RUN_DIR [--out DIR]
    attnlab plot-alignment CHECKPOINT --src "Ein Hund läuft." [--out alignment.png]
    attnlab caption CHECKPOINT image.png [--attention out.png]
    attnlab lab [NAME | all] [--out DIR] [--quick]
    attnlab serve [--translator CKPT] [--gpt CKPT] [--bert DIR] [--host 127.0.0.1 --port 8000]
    attnlab export-html [--translator CKPT] [--gpt CKPT] [--bert DIR] [--out explorer.html]
    attnlab demo
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from attnlab import __version__
from attnlab.options import COUNT, NON_NEGATIVE, PROBABILITY, SEED, THREADS, number
from attnlab.runtime import keep_freed_memory


def utf8_text(text: str) -> str:
    """The argparse type of every text argument (file names included): ``text`` when it is
    UTF-8. Python decodes other bytes of the command line to lone surrogates, which every
    encoder, tokenizer and JSON file refuses later, somewhere else each time; refused here,
    the error names the argument and the byte."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        byte = ord(text[err.start]) - 0xDC00  # surrogateescape keeps the byte as U+DC80..U+DCFF
        shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
        raise argparse.ArgumentTypeError(
            f"is not UTF-8 ({shown} at character {err.start}); attnlab takes text and file names "
            "in UTF-8"
        ) from None
    return text


def _common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=THREADS, default=None,
                   help="CPU threads for torch (default: $OMP_NUM_THREADS, else every core)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def _device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 or mps (default: cpu)")


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None,
                   help="TOML recipe, e.g. configs/multi30k_de_en.toml (resuming: default the run's own)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides: train.max_steps=100")
    p.add_argument("--run-dir", default=None,
                   help="output directory, new or empty (default: the resumed run's, else runs/<config>)")
    p.add_argument("--resume", default=None,
                   help="checkpoint or run directory to continue exactly, in that run's directory")
    _overwrite_arg(p, "--run-dir")
    p.add_argument("--data-dir", default=None, help="corpora directory (default: $ATTNLAB_DATA)")
    _device_arg(p)


def _overwrite_arg(p: argparse.ArgumentParser, where: str) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help=f"replace the earlier run in {where}: delete everything in it first (only in "
                        f"a directory a run wrote, holding its .lock; links are removed, not followed). "
                        f"Without it a {where} that is not empty is refused")


def _decoding_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=COUNT, default=None,
                   help="beam size; 1 = greedy (default: the checkpoint recipe's [eval], else 5)")
    p.add_argument("--length-penalty", type=NON_NEGATIVE, default=None,
                   help="GNMT length penalty alpha (default: the checkpoint recipe's, else 0.6)")


def _translate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a translation model")
    _decoding_args(p)
    p.add_argument("--batch-size", type=COUNT, default=64, help="sentences decoded together")
    p.add_argument("--max-len", type=COUNT, default=None, help="longest output in tokens")
    p.add_argument("--errors", choices=("strict", "replace"), default="strict",
                   help="stdin bytes that are not UTF-8: stop naming the line (strict) or replace them")
    _device_arg(p)


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of any task (translator, LM, NTM, captioner)")
    p.add_argument("--split", default=None,
                   help="split to score: a translator's test_2016_flickr (default), val or train; "
                        "a language model's val; an NTM's or captioner's test (their only split)")
    _decoding_args(p)  # translators and captioners; refused for the checkpoints that do not decode
    p.add_argument("--data-dir", default=None, help="corpora directory (default: $ATTNLAB_DATA)")
    _device_arg(p)


def _generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a GPT")
    p.add_argument("--prompt", default="\n", help="text to continue")
    p.add_argument("--max-new-tokens", type=COUNT, default=500)
    p.add_argument("--temperature", type=NON_NEGATIVE, default=0.8, help="0 = greedy")
    p.add_argument("--top-k", type=COUNT, default=200)
    p.add_argument("--top-p", type=PROBABILITY, default=None)
    p.add_argument("--seed", type=SEED, default=None)
    _device_arg(p)


def _finetune_args(p: argparse.ArgumentParser) -> None:
    # The checkpoint is an option so the key=value overrides are the only positionals.
    p.add_argument("--checkpoint", required=True, help="the pretrained GPT checkpoint (with tokenizer.json)")
    p.add_argument("--config", default=None, help="TOML recipe (e.g. configs/shakespeare_vs_kjv.toml)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides: finetune.steps=300")
    p.add_argument("--out", default=None, help="directory for the runs and report.json")
    _overwrite_arg(p, "--out")
    p.add_argument("--data-dir", default=None, help="corpora directory (default $ATTNLAB_DATA)")
    p.add_argument("--sword-dir", default=None, help="SWORD library (default $SWORD_PATH, /usr/share/sword)")


def _plot_alignment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a translation model")
    p.add_argument("--src", required=True, help="the source sentence to translate and draw")
    p.add_argument("--out", default="alignment.png", help="picture file (default alignment.png)")
    p.add_argument("--layer", type=number(int, -1024, 1023), default=-1,
                   help="Transformer: the decoder layer drawn (default the last); RNN: one layer")
    _decoding_args(p)
    _device_arg(p)


def _caption_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a captioning model")
    p.add_argument("images", nargs="+", help="image files (converted to the model's channels and size)")
    p.add_argument("--attention", default=None, metavar="PNG",
                   help="draw where the model looked for each word (one row an image) into PNG "
                        "(a .pdf, .svg, ... suffix picks that format)")
    p.add_argument("--beam", type=COUNT, default=None,
                   help="beam size; 1 = greedy (default: the checkpoint recipe's [eval])")
    _device_arg(p)


def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a training run directory holding metrics.jsonl")
    p.add_argument("--out", default=None, metavar="DIR", help="folder for the PNGs (default RUN_DIR/plots)")


def _lab_args(p: argparse.ArgumentParser) -> None:
    from attnlab.labs.registry import add_arguments

    add_arguments(p)


def _serve_args(p: argparse.ArgumentParser) -> None:
    from attnlab.explorer.commands import add_serve_arguments

    add_serve_arguments(p)


def _export_html_args(p: argparse.ArgumentParser) -> None:
    from attnlab.explorer.commands import add_export_arguments

    add_export_arguments(p)


def _demo_args(p: argparse.ArgumentParser) -> None:
    from attnlab.labs.demo import add_arguments

    add_arguments(p)


# name -> (help, "module:function", argument adder). Each function takes the parsed namespace.
SUBCOMMANDS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = {
    "train": ("train a model from a TOML recipe", "attnlab.tasks.commands:train", _train_args),
    "translate": ("translate stdin to stdout with a checkpoint", "attnlab.tasks.commands:translate",
                  _translate_args),
    "evaluate": ("score a checkpoint: BLEU/chrF, perplexity, bit errors or caption accuracy",
                 "attnlab.tasks.commands:evaluate", _evaluate_args),
    "generate": ("sample text from a GPT checkpoint", "attnlab.tasks.commands:generate", _generate_args),
    "finetune": ("fine-tune a GPT checkpoint as a classifier (Shakespeare vs KJV) against scratch",
                 "attnlab.tasks.finetune:cli", _finetune_args),
    "plot": ("draw loss, lr and BLEU curves of a run to PNG", "attnlab.tasks.commands:plot", _plot_args),
    "plot-alignment": ("translate one sentence and draw its alignment (source x target)",
                       "attnlab.tasks.commands:plot_alignment", _plot_alignment_args),
    "caption": ("caption images with a captioning checkpoint (and draw its attention)",
                "attnlab.tasks.commands:caption", _caption_args),
    "lab": ("list the lecture labs, or run one (or all) into PNGs and a Markdown report",
            "attnlab.labs.registry:cli", _lab_args),
    "serve": ("the attention explorer: a web page and JSON API over a translator, a GPT and MiniLM",
              "attnlab.explorer.commands:serve", _serve_args),
    "export-html": ("write the explorer's views into one offline HTML file (no server needed)",
                    "attnlab.explorer.commands:export_html", _export_html_args),
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
        p.register("type", None, utf8_text)  # every argument without a type of its own
        p.set_defaults(_target=target, _parser=p)
        add_args(p)
        _common_args(p)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that the ``key=value`` overrides of ``train`` and
    ``finetune`` may stand anywhere among the options (argparse takes a positional list only
    where it starts, and ``parse_intermixed_args`` refuses subcommands): a leftover token
    with ``=`` that is no option joins them, in order; anything else left over is refused in
    the subcommand's usage."""
    args, extra = parser.parse_known_args(argv)
    usage = getattr(args, "_parser", parser)
    takes_overrides = isinstance(getattr(args, "overrides", None), list)
    unknown = [a for a in extra if not takes_overrides or a.startswith("-") or "=" not in a]
    if unknown:
        usage.error(f"unrecognized arguments: {' '.join(unknown)}")
    for override in extra:
        try:
            args.overrides.append(utf8_text(override))
        except argparse.ArgumentTypeError as err:
            usage.error(f"argument key=value: {err}")
    return args


def describe_error(err: BaseException) -> str:
    """One line for an error a user can act on: the message, or for an OS error the file."""
    if isinstance(err, OSError) and not isinstance(err, FileNotFoundError) and err.filename:
        return f"{err.strerror or err}: {err.filename}"
    if isinstance(err, UnicodeDecodeError):
        return f"text is not valid UTF-8 ({err.reason} at byte {err.start})"
    return str(err) or type(err).__name__


def _diverged(err: BaseException) -> bool:
    """A training run whose loss became NaN or inf (imported only on this error path)."""
    from attnlab.training.config import NonFiniteLossError

    return isinstance(err, NonFiniteLossError)


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of what is still buffered
    does not fail on the closed pipe again (Python's documentation, "Note on SIGPIPE")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (captured in a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    if args.command is None:
        parser.print_help()
        return 0
    from attnlab.runtime import set_threads
    from attnlab.signals import exit_code, signal_of, terminate_as_interrupt

    debug = args.debug or os.environ.get("ATTNLAB_DEBUG", "") not in ("", "0")
    where = f"attnlab {args.command}"
    try:  # argv None: this is the command, whose process ends when main returns
        with terminate_as_interrupt(until_exit=argv is None):
            set_threads(args.threads)
            keep_freed_memory()  # glibc: reuse freed activations instead of page-faulting them in again
            result = _load(args._target)(args)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM
        signum = signal_of(interrupt)
        print(f"{where}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        return exit_code(signum)
    except BrokenPipeError:  # the reader of stdout went away (| head): stop quietly
        _discard_stdout()
        return exit_code(signal.SIGPIPE)
    except (ValueError, OSError, EOFError) as err:  # bad input, files, disks
        if debug:
            raise
        print(f"{where}: error: {describe_error(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # a defect in attnlab: one line, the traceback with --debug
        if debug:
            raise
        if _diverged(err):  # not a defect: the run says where its last good checkpoint is
            print(f"{where}: error: {err}", file=sys.stderr)
            return 1
        print(f"{where}: internal error: {type(err).__name__}: {err} (rerun with --debug for the "
              f"traceback, and please report it)", file=sys.stderr)
        return 1
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
