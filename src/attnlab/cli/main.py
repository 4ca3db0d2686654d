"""The ``attnlab`` command's parser and its one way to run a subcommand: threads, signals,
broken pipes and errors (see :mod:`attnlab.cli` for what each means to a user)."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from attnlab import __version__, allocator
from attnlab.cli import arguments as a
from attnlab.cli.arguments import utf8_text
from attnlab.runtime import bound_kernel_caches, keep_freed_memory

# name -> (help, "module:function", argument adder). Each function takes the parsed namespace and
# is imported only when its subcommand runs (attnlab.cli.commands, .explorer, .labs).
SUBCOMMANDS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = {
    "train": ("train a model from a TOML recipe", "attnlab.cli.commands:train", a.train_args),
    "prepare": ("read and tokenize a recipe's corpus into the cache of token files that train reuses",
                "attnlab.cli.commands:prepare", a.prepare_args),
    "translate": ("translate stdin to stdout with a checkpoint", "attnlab.cli.commands:translate",
                  a.translate_args),
    "evaluate": ("score a checkpoint: BLEU/chrF, perplexity, bit errors, caption accuracy or CER/WER",
                 "attnlab.cli.commands:evaluate", a.evaluate_args),
    "generate": ("sample text from a GPT checkpoint", "attnlab.cli.commands:generate", a.generate_args),
    "export": ("write a GPT, translator or encoder checkpoint as a Hugging Face folder (GPT-2, Llama, "
               "Marian, Pegasus or BERT)",
               "attnlab.cli.commands:export", a.export_args),
    "finetune": ("fine-tune a GPT checkpoint as a classifier (Shakespeare vs KJV) against scratch",
                 "attnlab.cli.commands:finetune", a.finetune_args),
    "plot": ("draw loss, lr and BLEU curves of a run to PNG", "attnlab.cli.commands:plot", a.plot_args),
    "plot-alignment": ("translate one sentence and draw its alignment (source x target)",
                       "attnlab.cli.commands:plot_alignment", a.plot_alignment_args),
    "caption": ("caption images with a captioning checkpoint (and draw its attention)",
                "attnlab.cli.commands:caption", a.caption_args),
    "transcribe": ("transcribe WAV files with a speech checkpoint (and draw an alignment)",
                   "attnlab.cli.commands:transcribe", a.transcribe_args),
    "lab": ("list the lecture labs, or run one (or all) into PNGs and a Markdown report",
            "attnlab.cli.labs:lab", a.lab_args),
    "serve": ("the attention explorer: a web page and JSON API over a translator, a GPT and MiniLM",
              "attnlab.cli.explorer:serve", a.serve_args),
    "export-html": ("write the explorer's views into one offline HTML file (no server needed)",
                    "attnlab.cli.explorer:export_html", a.export_html_args),
    "demo": ("train the demo translator (or --pooling) and save its pictures",
             "attnlab.cli.labs:demo", a.demo_args),
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
        a.common_args(p)
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
            if argv is None:  # the command itself: bounded kernel caches, a caching allocator
                bound_kernel_caches()  # before torch compiles a kernel; the relaunch inherits it
                allocator.relaunch(sys.argv[1:])
            set_threads(args.threads)
            if allocator.in_use() == "glibc":
                keep_freed_memory()  # reuse freed activations instead of page-faulting them in again
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
