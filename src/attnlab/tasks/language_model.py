"""Language modelling task: train a GPT on tinyshakespeare, sample from it, score it.

Seed 004, "Transformer Language Pre-training": a decoder-only Transformer trained to
predict the next token, ``L1 = Σ_t log P(u_t | u_<t)`` (Radford et al. 2018, eq. 1). The
recipe follows nanoGPT's ``train_shakespeare_char``: the first ``train_fraction`` (90 %) of
the text trains, the rest validates; training batches are random contiguous windows
(:class:`~attnlab.data.LMDataset`); AdamW with decay / no-decay groups, warmup + cosine,
gradient clipping (the :class:`~attnlab.training.Trainer`).

A recipe (``configs/shakespeare_char.toml``) maps 1:1 onto :class:`LMRecipe`::

    task = "language_model"
    [data]   corpus, tokenizer ("char" | "bpe"), vocab_size (bpe), train_fraction,
             block_size, batch_size, seed
    [model]  GPTConfig fields except vocab_size (from the tokenizer) and block_size (from data)
    [optim]  lr, min_lr, warmup, decay_steps (default train.max_steps), weight_decay,
             decay_embeddings, betas
    [train]  TrainConfig fields (max_steps is required: the windows never run out)
    [eval]   eval_iters (random val windows per periodic eval), sample_chars

The final ``val_loss`` in ``results.json`` (and ``attnlab evaluate``) covers the whole
validation text in non-overlapping ``block_size`` windows; perplexity is ``exp`` of it, per
token (per character for ``tokenizer = "char"``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.config import GPTConfig, from_dict
from attnlab.data import CharTokenizer, LMDataset, Tokenizer, load_tinyshakespeare, load_tokenizer
from attnlab.data.tokenizers import SPECIAL_TOKENS, AnyTokenizer
from attnlab.evaluation import perplexity
from attnlab.generation import sample
from attnlab.models import GPT
from attnlab.training import TrainConfig, Trainer, adamw, lambda_lr, resolve_resume, warmup_cosine

RECIPE_FILE = "recipe.json"
TOKENIZERS = ("char", "bpe")
CORPORA = ("tinyshakespeare",)


@dataclass
class LMData:
    """``[data]``: corpus, tokenizer and windows."""

    corpus: str = "tinyshakespeare"
    tokenizer: str = "char"
    vocab_size: int = 2048  # BPE only
    train_fraction: float = 0.9
    block_size: int = 256
    batch_size: int = 64
    seed: int = 1337

    def __post_init__(self) -> None:
        if self.corpus not in CORPORA:
            raise ValueError(f"data.corpus must be one of {', '.join(CORPORA)}, got {self.corpus!r}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"data.tokenizer must be 'char' or 'bpe', got {self.tokenizer!r}")
        if not 0.0 < self.train_fraction < 1.0:
            raise ValueError(f"data.train_fraction must be in (0, 1), got {self.train_fraction}")
        for name in ("block_size", "batch_size", "vocab_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"data.{name} must be > 0, got {getattr(self, name)}")


# [model]: every GPTConfig field except the two that come from the data and the tokenizer.
LMModel = dataclasses.make_dataclass(
    "LMModel",
    [
        (f.name, f.type, field(default=f.default))
        for f in dataclasses.fields(GPTConfig)
        if f.name not in ("vocab_size", "block_size")
    ],
)
LMModel.__doc__ = "``[model]``: GPTConfig fields; vocab_size and block_size are filled in."


@dataclass
class LMOptim:
    """``[optim]``: AdamW (decay / no-decay groups) with linear warmup and cosine decay."""

    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    decay_steps: int | None = None  # None: train.max_steps (nanoGPT lr_decay_iters)
    weight_decay: float = 0.1
    decay_embeddings: bool = False  # true: nanoGPT's rule, embedding tables decay too
    betas: list[float] = field(default_factory=lambda: [0.9, 0.99])


@dataclass
class LMEval:
    """``[eval]``: random validation windows per periodic evaluation; sample length."""

    eval_iters: int = 20
    sample_chars: int = 300
    sample_seed: int = 0
    temperature: float = 0.8
    top_k: int | None = 200


@dataclass
class LMRecipe:
    """A whole language-model recipe (one TOML file)."""

    task: str
    train: TrainConfig
    data: LMData = field(default_factory=LMData)
    model: Any = field(default_factory=LMModel)
    optim: LMOptim = field(default_factory=LMOptim)
    eval: LMEval = field(default_factory=LMEval)

    @classmethod
    def from_dict(cls, recipe: dict[str, Any]) -> LMRecipe:
        """Map the TOML tables onto the dataclasses; unknown keys raise by name."""
        tables = {"data": LMData, "model": LMModel, "optim": LMOptim, "eval": LMEval}
        allowed = {"task", "train", *tables}
        unknown = sorted(set(recipe) - allowed)
        if unknown:
            raise ValueError(f"unknown table(s) {unknown} in recipe (allowed: {sorted(allowed)})")
        if recipe.get("task") != "language_model":
            raise ValueError(f"task must be 'language_model', got {recipe.get('task')!r}")
        if "train" not in recipe:
            raise ValueError("recipe must have a [train] table with max_steps")
        train = from_dict(TrainConfig, recipe["train"], where="train")
        if train.max_steps is None:
            raise ValueError("train.max_steps must be set: language-model windows never run out")
        parts = {k: from_dict(c, recipe.get(k, {}), where=k) for k, c in tables.items()}
        return cls(task="language_model", train=train, **parts)

    def gpt_config(self, vocab_size: int) -> GPTConfig:
        fields = dataclasses.asdict(self.model)
        return GPTConfig(vocab_size=vocab_size, block_size=self.data.block_size, **fields)


# ----------------------------------------------------------------------------- data
def split_text(text: str, train_fraction: float) -> tuple[str, str]:
    """The first ``train_fraction`` of the characters, and the rest (nanoGPT's 90/10 split)."""
    n = int(len(text) * train_fraction)
    return text[:n], text[n:]


def build_tokenizer(data: LMData, text: str, train_text: str) -> AnyTokenizer:
    """Characters of the whole text (as nanoGPT), or byte-level BPE learned on the train part."""
    if data.tokenizer == "char":
        return CharTokenizer.train(text)
    return Tokenizer.train(train_text.splitlines(keepends=True), data.vocab_size)


def encode(tokenizer: AnyTokenizer, text: str) -> Tensor:
    return torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)


def train_windows(tokens: Tensor, data: LMData):
    """``train_data(epoch)`` for the Trainer: an endless stream of ``(x, y)`` windows drawn by
    a fresh :class:`LMDataset` seeded by ``(seed, epoch)``, so a resumed run replays it."""

    def epoch_batches(epoch: int) -> Iterator[tuple[Tensor, Tensor]]:
        windows = LMDataset(tokens, data.block_size, seed=data.seed * 1_000_003 + epoch)
        while True:
            yield windows.get_batch(data.batch_size)  # (B, n), (B, n)

    return epoch_batches


def lm_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, int]:
    """Next-token cross-entropy **summed** over the batch's tokens, and the token count."""
    x, y = batch  # (B, n), (B, n)
    logits = model(x)  # (B, n, V)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), reduction="sum")
    return loss, y.numel()


@torch.no_grad()
def mean_loss(model: nn.Module, batches: list[tuple[Tensor, Tensor]]) -> float:
    """Mean next-token loss (nats per token) over ``batches``."""
    total, count = 0.0, 0
    for batch in batches:
        loss, n = lm_loss(model, batch)
        total, count = total + float(loss), count + n
    return total / count


def val_windows(tokens: Tensor, block_size: int, batch_size: int) -> list[tuple[Tensor, Tensor]]:
    """The whole validation stream as non-overlapping windows, in batches (deterministic)."""
    n = (tokens.numel() - 1) // block_size
    if n < 1:
        raise ValueError(f"validation text has {tokens.numel()} tokens, fewer than block_size + 1")
    x = tokens[: n * block_size].view(n, block_size)  # (W, n)
    y = tokens[1 : n * block_size + 1].view(n, block_size)  # (W, n)
    return [(x[i : i + batch_size], y[i : i + batch_size]) for i in range(0, n, batch_size)]


def full_val_loss(model: nn.Module, val_tokens: Tensor, block_size: int) -> dict[str, float]:
    was_training = model.training
    model.eval()
    loss = mean_loss(model, val_windows(val_tokens, block_size, 64))
    model.train(was_training)
    return {"val_loss": loss, "perplexity": perplexity(loss)}


# ----------------------------------------------------------------------------- generation
class _NoSpecials(nn.Module):
    """Generation view of a GPT that never draws ``<pad>/<bos>/<eos>/<unk>``: plain text
    has none of them as targets, so they are masked out of the next-token logits."""

    def __init__(self, gpt: GPT) -> None:
        super().__init__()
        self.gpt, self.config = gpt, gpt.config

    def new_cache(self):
        return self.gpt.new_cache()

    def forward(self, idx: Tensor, *, cache=None) -> Tensor:
        logits = self.gpt(idx, cache=cache)  # (B, n, V)
        return logits.index_fill(-1, torch.arange(len(SPECIAL_TOKENS), device=idx.device), -math.inf)


def generate_text(
    model: GPT,
    tokenizer: AnyTokenizer,
    prompt: str,
    max_new_tokens: int,
    *,
    temperature: float = 0.8,
    top_k: int | None = 200,
    top_p: float | None = None,
    seed: int | None = None,
) -> str:
    """The continuation (without the prompt) of ``max_new_tokens`` tokens, KV-cached."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be non-empty text, got {prompt!r}")
    if max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    try:
        ids = tokenizer.encode(prompt)
    except ValueError as err:  # names the characters outside the vocabulary
        raise ValueError(f"prompt cannot be encoded: {err}") from None
    new = sample(
        _NoSpecials(model),
        ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        use_cache=True,
    )[0]
    return tokenizer.decode(new)


def load_lm(checkpoint: str | Path) -> tuple[GPT, AnyTokenizer]:
    model = GPT.from_pretrained(checkpoint)
    return model, load_tokenizer(checkpoint)


# ----------------------------------------------------------------------------- commands
def train(recipe: dict[str, Any], *, run_dir: str | Path, resume=None, data_dir=None) -> Path:
    """Train a GPT from ``recipe``; checkpoints, metrics and ``results.json`` go to ``run_dir``."""
    r = LMRecipe.from_dict(recipe)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    text = load_tinyshakespeare(data_dir)
    train_text, val_text = split_text(text, r.data.train_fraction)
    if resume is not None:
        tokenizer = load_tokenizer(resolve_resume(resume))
    else:
        tokenizer = build_tokenizer(r.data, text, train_text)
    tokenizer_file = tokenizer.save(run_dir)
    train_ids, val_ids = encode(tokenizer, train_text), encode(tokenizer, val_text)  # (N,), (M,)

    torch.manual_seed(r.train.seed)
    model = GPT(r.gpt_config(tokenizer.vocab_size))
    o = r.optim
    optimizer = adamw(
        model, o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas), decay_embeddings=o.decay_embeddings
    )
    total = o.decay_steps or r.train.max_steps
    scheduler = lambda_lr(optimizer, warmup_cosine(o.warmup, total, o.lr, o.min_lr))

    eval_set = LMDataset(val_ids, r.data.block_size, seed=r.data.seed)
    eval_batches = [eval_set.get_batch(r.data.batch_size) for _ in range(r.eval.eval_iters)]

    def eval_fn(m: nn.Module) -> dict[str, float]:
        loss = mean_loss(m, eval_batches)
        return {"val_loss": loss, "perplexity": perplexity(loss)}

    config = dataclasses.replace(r.train, run_dir=str(run_dir))
    files = {"tokenizer.json": tokenizer_file, RECIPE_FILE: json.dumps(recipe, indent=2).encode()}
    trainer = Trainer(
        model,
        optimizer,
        lm_loss,
        train_windows(train_ids, r.data),
        config,
        scheduler=scheduler,
        eval_fn=eval_fn,
        files=files,
    )
    print(
        f"GPT: {model.num_parameters():,} parameters, vocabulary {tokenizer.vocab_size}, "
        f"{train_ids.numel():,} train / {val_ids.numel():,} val tokens",
        flush=True,
    )
    start = time.perf_counter()
    result = trainer.fit(resume_from=resume)
    wall = time.perf_counter() - start
    _report(run_dir, r, model, tokenizer, val_ids, result, wall)
    return run_dir


def _report(run_dir: Path, r: LMRecipe, model: GPT, tokenizer, val_ids, result, wall: float) -> None:
    """Print and write ``results.json``: final full-validation loss, perplexity, time, sample."""
    final = full_val_loss(model, val_ids, r.data.block_size)
    text = generate_text(
        model,
        tokenizer,
        "\n",
        r.eval.sample_chars,
        temperature=r.eval.temperature,
        top_k=r.eval.top_k,
        seed=r.eval.sample_seed,
    )[: r.eval.sample_chars]
    results = {
        **final,
        "wall_time_s": wall,
        "steps": result.step,
        "stopped": result.stopped,
        "last_eval": result.last_eval,
        "checkpoint": str(result.last_checkpoint),
        "sample": text,
    }
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"val loss {final['val_loss']:.4f} (whole validation split), perplexity "
        f"{final['perplexity']:.3f}, {result.step} steps in {wall:.1f} s ({result.stopped})"
    )
    print(f"checkpoint: {result.last_checkpoint}\nsample:\n{text}", flush=True)


def _checkpoint_data(checkpoint: Path) -> LMData:
    file = checkpoint / RECIPE_FILE
    if not file.is_file():
        return LMData()
    return from_dict(LMData, json.loads(file.read_text()).get("data", {}), where="data")


def evaluate_cli(args: argparse.Namespace) -> int:
    """``attnlab evaluate CHECKPOINT``: loss and perplexity on the validation split."""
    split = getattr(args, "split", None)
    if split not in (None, "val"):
        raise ValueError(f"split must be 'val' for a language model, got {split!r}")
    checkpoint = Path(args.checkpoint)
    model, tokenizer = load_lm(checkpoint)
    data = _checkpoint_data(checkpoint)
    text = load_tinyshakespeare(getattr(args, "data_dir", None))
    _, val_text = split_text(text, data.train_fraction)
    scores = full_val_loss(model, encode(tokenizer, val_text), model.config.block_size)
    print(f"val loss {scores['val_loss']:.4f}  perplexity {scores['perplexity']:.4f}")
    return 0


def generate_cli(args: argparse.Namespace) -> int:
    """``attnlab generate CHECKPOINT --prompt ...``: print the prompt and its continuation."""
    model, tokenizer = load_lm(args.checkpoint)
    text = generate_text(
        model,
        tokenizer,
        args.prompt,
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
    )
    print(args.prompt + text, flush=True)
    return 0
