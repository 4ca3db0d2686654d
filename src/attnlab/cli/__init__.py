"""The ``attnlab`` command: the only place that parses a command line.

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
    attnlab transcribe CHECKPOINT a.wav [b.wav ...] [--attention out.png]
    attnlab finetune --checkpoint CKPT --config configs/shakespeare_vs_kjv.toml
    attnlab lab [NAME | all] [--out DIR] [--quick]
    attnlab serve [--translator CKPT] [--gpt MODEL] [--bert DIR] [--host 127.0.0.1 --port 8000]
    attnlab export-html [--translator CKPT] [--gpt MODEL] [--bert DIR] [--out explorer.html]
    attnlab demo [--pooling]

The package: :mod:`.arguments` (every subcommand's arguments), :mod:`.options` (the bounded
number types), :mod:`.main` (the parser, and running a subcommand: threads, signals, broken
pipes, one-line errors) and the subcommands, each reading its Namespace and calling typed
functions of the tasks, pipelines, labs and explorer: :mod:`.commands` (train, evaluate,
translate, generate, plot, plot-alignment, caption, transcribe, finetune), :mod:`.labs` (lab, demo) and
:mod:`.explorer` (serve, export-html). Those are imported only when their subcommand runs, so
``attnlab --help`` imports neither torch nor any model. ``python -m attnlab.cli`` is the
command too.
"""

from attnlab.cli.arguments import utf8_text
from attnlab.cli.main import SUBCOMMANDS, build_parser, describe_error, main, parse_args

__all__ = ["SUBCOMMANDS", "build_parser", "describe_error", "main", "parse_args", "utf8_text"]
