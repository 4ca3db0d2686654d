"""The command line's task and pipeline commands: each reads its Namespace and calls typed
functions of :mod:`attnlab.tasks` and :mod:`attnlab.pipelines`.

``train`` dispatches on the recipe's ``task``; ``evaluate`` on the checkpoint's ``model_type``
(the task its model registered with); ``translate``, ``plot-alignment``, ``generate``
``caption`` and ``transcribe`` go through one pipeline each, which refuses the other checkpoints in one line
naming the command. ``translate`` reads stdin chunk by chunk (:func:`read_chunks`), so output
follows input.
"""

from __future__ import annotations

import argparse
import select
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from attnlab.checkpoint import RECIPE_FILE, resolve_resume, run_dir_of
from attnlab.config import apply_overrides
from attnlab.pipelines import CaptioningPipeline, LanguageModelPipeline, TranslationPipeline
from attnlab.tasks import EvaluateRequest, load_recipe, task_class, task_for_checkpoint
from attnlab.tasks import train as train_task
from attnlab.tasks.base import load_saved_recipe, saved_recipe


def _overrides(args: argparse.Namespace) -> list[str]:
    """The command line's ``key=value`` overrides, ``--errors`` among them."""
    return [*args.overrides, *([f"data.errors={args.errors}"] if args.errors else [])]


def prepare(args: argparse.Namespace) -> int:
    """``attnlab prepare RECIPE``: the recipe's corpus read, its tokenizer learned and its token
    files written into the cache (``$ATTNLAB_CACHE``), where ``train`` finds them."""
    recipe = load_recipe(args.config, _overrides(args))
    for line in task_class(recipe["task"]).prepare_data(recipe, args.data_dir):
        print(line, flush=True)
    return 0


def train(args: argparse.Namespace) -> int:
    """A new run from ``--config`` (into an empty directory, or ``--overwrite`` an earlier run),
    or ``--resume`` a run, into its own directory with its own recipe (``--config`` then must
    agree with it; overrides apply to either)."""
    args.overrides = _overrides(args)
    if args.config is not None:
        recipe = load_recipe(args.config, args.overrides)
    elif args.resume is not None:
        checkpoint = resolve_resume(args.resume)
        load_saved_recipe(checkpoint)  # a bad recipe.json is refused naming it, before the overrides
        recipe = apply_overrides(saved_recipe(checkpoint), args.overrides)
    else:
        raise ValueError("train needs --config RECIPE, or --resume RUN to continue a run")
    if args.run_dir:
        run_dir = Path(args.run_dir)
    else:
        run_dir = run_dir_of(args.resume) if args.resume else Path("runs") / Path(args.config).stem
    train_task(recipe, run_dir=run_dir, resume=args.resume, data_dir=args.data_dir, device=args.device,
               overwrite=args.overwrite)
    return 0


def translate(args: argparse.Namespace) -> int:
    """``attnlab translate CHECKPOINT``: stdin lines → stdout translations, one per line, written
    (and flushed) chunk by chunk as they are decoded, so Ctrl-C keeps every finished line."""
    TranslationPipeline.check_checkpoint(args.checkpoint, "translate")
    translator = TranslationPipeline.from_checkpoint(args.checkpoint, device=args.device)
    decoding = translator.settings(beam_size=args.beam, length_penalty=args.length_penalty,
                                   batch_size=args.batch_size, max_len=args.max_len)
    stdin = getattr(sys.stdin, "buffer", sys.stdin)  # bytes, so undecodable input is named
    for chunk in read_chunks(stdin, 16 * decoding.batch_size, errors=args.errors):
        sys.stdout.write("".join(line + "\n" for line in translator.translate(chunk, decoding)))
        sys.stdout.flush()
    return 0


def plot_alignment(args: argparse.Namespace) -> int:
    """``attnlab plot-alignment CKPT --src TEXT``: translate TEXT and draw where each output
    token attended (Bahdanau et al. 2015, Figure 3)."""
    from attnlab.visualize.figure import picture_format

    picture_format(args.out)  # a picture it could not save is refused before any work
    TranslationPipeline.check_checkpoint(args.checkpoint, "plot-alignment")
    translator = TranslationPipeline.from_checkpoint(args.checkpoint, device=args.device)
    decoding = translator.settings(beam_size=args.beam, length_penalty=args.length_penalty)
    source = args.src.strip()
    if not source:
        raise ValueError("--src must hold a sentence to translate, got an empty one")
    (translation,) = translator.translate([source], decoding)
    path = translator.plot_attention(source, translation, args.out, layer=args.layer)
    print(f"{translation}\nalignment picture: {path}", flush=True)
    return 0


def evaluate(args: argparse.Namespace) -> int:
    task = task_for_checkpoint(args.checkpoint)
    request = EvaluateRequest(
        split=args.split, data_dir=args.data_dir, device=args.device,
        beam_size=args.beam, length_penalty=args.length_penalty,
    )
    print(task.format_scores(task.evaluate(Path(args.checkpoint), request)), flush=True)
    return 0


def export(args: argparse.Namespace) -> int:
    """``attnlab export CKPT OUT --format hf``: a GPT, translator or BERT-style encoder checkpoint
    as the Hugging Face folder of its class (:func:`attnlab.interop.export.save_hf`), with its
    tokenizer as files ``AutoTokenizer`` loads (a translator's target side, when its vocabulary
    is not joint, in ``OUT/target_tokenizer/``)."""
    from attnlab.checkpoint import load_config
    from attnlab.data.tokenizers import SPECIAL_TOKENS, CharTokenizer
    from attnlab.interop.export import save_hf
    from attnlab.interop.hf_folders import char_tokenizer_json
    from attnlab.pipelines import EncoderPipeline

    def hf_json(tok) -> str:  # attnlab's BPE and word tokenizers are Hugging Face files already
        return char_tokenizer_json(tok.itos, SPECIAL_TOKENS) if isinstance(tok, CharTokenizer) \
            else tok.to_json()

    model_type = load_config(args.checkpoint).get("model_type")
    tokenizers = {}
    if model_type == "transformer":
        pipeline = TranslationPipeline.from_checkpoint(args.checkpoint)
        src, tgt = pipeline.src_tok, pipeline.tgt_tok
        tokenizers = {"bos_id": tgt.bos_id, "eos_id": tgt.eos_id, "tokenizer_json": hf_json(src)}
        if src is not tgt:
            tokenizers["target_tokenizer_json"] = hf_json(tgt)
    elif model_type == "encoder":
        pipeline = EncoderPipeline.from_checkpoint(args.checkpoint)
        tokenizers["tokenizer_json"] = (Path(args.checkpoint) / "tokenizer.json").read_text()
    elif model_type == "gpt":
        pipeline = LanguageModelPipeline.from_checkpoint(args.checkpoint)
        tokenizers["tokenizer_json"] = hf_json(pipeline.tokenizer)
    else:
        raise ValueError(f"checkpoint {args.checkpoint} has model_type {model_type!r}; export takes gpt, "
                         "transformer and encoder checkpoints")
    out, name = save_hf(pipeline.model, args.out, **tokenizers)
    print(f"{out}: {name} and its tokenizer", flush=True)
    return 0


def generate(args: argparse.Namespace) -> int:
    """``attnlab generate MODEL --prompt ...``: print the prompt and its continuation (with
    ``--chat``, the answer alone), streamed as it is drawn (Ctrl-C keeps what was printed). MODEL
    is a checkpoint, a GGUF file or a pretrained name (:meth:`LanguageModelPipeline.from_pretrained`)."""
    pipeline = LanguageModelPipeline.from_pretrained(args.checkpoint, device=args.device, taker="generate")
    shown = [] if args.chat else [args.prompt]  # the prompt goes out with the first piece, once known good

    def write(text: str) -> None:
        sys.stdout.write("".join(shown) + text)
        sys.stdout.flush()
        shown.clear()

    pipeline.generate(args.prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                      top_p=args.top_p, seed=args.seed, write=write, chat=args.chat)
    write("\n")
    return 0


def plot(args: argparse.Namespace) -> int:
    from attnlab.training.plots import plot_run

    for path in plot_run(args.run_dir, args.out):
        print(path)
    return 0


def caption(args: argparse.Namespace) -> int:
    """``attnlab caption CKPT IMAGE ... [--attention PNG] [--beam N]``: each image converted to
    the model's channels and size, captioned with the checkpoint recipe's beam settings, one line
    an image; ``--attention PNG`` draws the attention that wrote each word (Xu et al. 2015,
    Figure 3)."""
    from attnlab.tasks.captioning.recipe import CaptionRecipe
    from attnlab.visualize.figure import picture_format

    if args.attention:
        picture_format(args.attention)  # a picture it could not save is refused before any work
    CaptioningPipeline.check_checkpoint(args.checkpoint, "caption")
    load_saved_recipe(args.checkpoint, CaptionRecipe)  # its decoding settings: refused naming it if bad
    captioner = CaptioningPipeline.from_checkpoint(args.checkpoint, device=args.device)
    images = captioner.read_images(args.images)
    ids = captioner.caption_ids(images, captioner.settings(beam_size=args.beam))
    for path, caption in zip(args.images, ids, strict=True):
        print(f"{path}\t{captioner.tokenizer.decode(caption)}", flush=True)
    if args.attention:
        if not captioner.draws_attention:
            raise ValueError(f"checkpoint {args.checkpoint} has no attention to draw (attention = false)")
        texts = [captioner.tokenizer.decode(c) for c in ids]
        titles = [f"{Path(path).name}: {text}" for path, text in zip(args.images, texts, strict=True)]
        picture = captioner.plot_attention(images, ids, args.attention, titles)
        print(f"attention picture: {picture}", flush=True)
    return 0


def transcribe(args: argparse.Namespace) -> int:
    """``attnlab transcribe CKPT A.wav ... [--attention PNG] [--beam N]``: each WAV file's
    transcript, one line a file (``PATH<TAB>TEXT``), decoded with the checkpoint recipe's beam
    settings; ``--attention PNG`` draws the first file's alignment over its spectrogram
    (Chorowski et al. 2015, Figure 1)."""
    from attnlab.pipelines import SpeechPipeline
    from attnlab.tasks.speech.recipe import SpeechRecipe
    from attnlab.visualize.figure import picture_format

    if args.attention:
        picture_format(args.attention)  # a picture it could not save is refused before any work
    SpeechPipeline.check_checkpoint(args.checkpoint, "transcribe")
    if (Path(args.checkpoint) / RECIPE_FILE).is_file():  # its decoding settings: refused naming it if bad
        load_saved_recipe(args.checkpoint, SpeechRecipe)
    recognizer = SpeechPipeline.from_checkpoint(args.checkpoint, device=args.device)
    features = recognizer.features(args.wavs)
    decoding = recognizer.settings(beam_size=args.beam, length_penalty=args.length_penalty)
    ids = recognizer.transcribe_ids(features, decoding)
    for path, transcript in zip(args.wavs, ids, strict=True):
        print(f"{path}\t{recognizer.tokenizer.decode(transcript)}", flush=True)
    if args.attention:
        picture = recognizer.plot_attention(features[0], ids[0], args.attention)
        print(f"alignment picture: {picture}", flush=True)
    return 0


def finetune(args: argparse.Namespace) -> int:
    """``attnlab finetune``: the classification recipe trained from ``--checkpoint``
    (``model.init_from``) and from scratch, each an ``attnlab train`` run under ``--out``, and
    the two compared (:func:`attnlab.tasks.compare_transfer`)."""
    from attnlab.tasks import compare_transfer

    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    compare_transfer(load_recipe(args.config, args.overrides), args.checkpoint, out_dir=out,
                     data_dir=args.data_dir, device=args.device, overwrite=args.overwrite)
    return 0


def read_chunks(stream: IO, max_lines: int, *, errors: str = "strict") -> Iterator[list[str]]:
    """The lines of ``stream`` (split on ``\\n`` only, line ends removed), in chunks of at most
    ``max_lines``. A chunk also ends when no more input is waiting, so lines typed at a terminal
    are answered one by one. A binary stream is decoded as UTF-8: a line that is not valid
    UTF-8 raises ``ValueError`` naming its number, unless ``errors="replace"`` replaces the
    undecodable bytes with U+FFFD."""
    chunk: list[str] = []
    end = stream.read(0)  # "" or b"": what readline returns at the end of the stream
    for number, line in enumerate(iter(stream.readline, end), start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8", errors=errors)
            except UnicodeDecodeError as err:
                if chunk:  # the lines before it are still answered
                    yield chunk
                raise ValueError(
                    f"input line {number} is not valid UTF-8 ({err.reason} at byte {err.start}); "
                    "--errors replace replaces the undecodable bytes"
                ) from None
        chunk.append(line.removesuffix("\n").removesuffix("\r"))
        if len(chunk) >= max_lines or not _more_waiting(stream):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _more_waiting(stream: IO) -> bool:
    """Whether reading ``stream`` now would not block (always true for files and buffers)."""
    try:
        ready, _, _ = select.select([stream], [], [], 0)
    except (OSError, ValueError, TypeError):  # no file descriptor: an in-memory stream
        return True
    return bool(ready)
