"""Language modelling task: train a GPT on tinyshakespeare, sample from it, score it.

Ba (CSC413 Lecture 8), "Transformer Language Pre-training": a decoder-only Transformer trained to
predict the next token, ``L1 = Σ_t log P(u_t | u_<t)`` (Radford et al. 2018, eq. 1). The
recipe follows nanoGPT's ``train_shakespeare_char``: the first ``train_fraction`` (90 %) of
the text trains, the rest validates; training batches are random contiguous windows
(:class:`~attnlab.data.LMDataset`); AdamW with decay / no-decay groups, warmup + cosine,
gradient clipping (the :class:`~attnlab.training.Trainer`).

A recipe (``configs/shakespeare_char.toml``) maps 1:1 onto :class:`LMRecipe`
(:mod:`attnlab.tasks.language_model.recipe`); its ``[model] type`` picks the model: a GPT by default, or
the recurrent ``lstm`` / ``lstmn`` of Cheng et al. (2016), trained the same way.

The final ``val_loss`` in ``results.json`` (and ``attnlab evaluate``) covers the whole
validation text in non-overlapping ``block_size`` windows; perplexity is ``exp`` of it, per
token (per character for ``tokenizer = "char"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.checkpoint import ExtraFiles, resolve_resume
from attnlab.config import from_dict
from attnlab.data import LMDataset, load_tokenizer
from attnlab.data.prepared import cache_dir
from attnlab.data.presets import TEXT_PRESETS, text_preset
from attnlab.data.sources import expand
from attnlab.data.text_corpus import PreparedText, TextSources, prepare_text
from attnlab.data.tokenizers import TOKENIZER_FILE, AnyTokenizer, bpe_need
from attnlab.evaluation import perplexity
from attnlab.memory import Need, sized
from attnlab.pipelines import LanguageModelPipeline
from attnlab.tasks.base import EvaluateRequest, Task, register_task
from attnlab.tasks.language_model.recipe import LMData, LMRecipe
from attnlab.training import TrainResult
from attnlab.training.distributed import get_rank, get_world_size
from attnlab.training.losses import mean_loss
from attnlab.validation import counted


# ----------------------------------------------------------------------------- data
def split_text(text: str, train_fraction: float) -> tuple[str, str]:
    """The first ``train_fraction`` of the characters, and the rest (nanoGPT's 90/10 split)."""
    n = int(len(text) * train_fraction)
    return text[:n], text[n:]


def text_sources(data: LMData, data_dir: str | None) -> TextSources:
    """The files ``data.corpus`` (a preset or your own) and ``data.val`` name."""
    preset = isinstance(data.corpus, str) and data.corpus in TEXT_PRESETS
    train = text_preset(data.corpus, data_dir) if preset else expand(data.corpus, "data.corpus")
    val = expand(data.val, "data.val") if data.val else []
    return TextSources(tuple(train), tuple(val), data.text_field, data.train_fraction, data.errors)


def prepare_corpus(data: LMData, data_dir: str | None, tokenizer: AnyTokenizer | None = None,
                   *, progress: bool = True) -> PreparedText:
    """The prepared token files of ``data``'s text (:func:`~attnlab.data.text_corpus.prepare_text`),
    tokenized by ``tokenizer``, else by ``data.tokenizer_file``, else by one learned here."""
    if tokenizer is None and data.tokenizer_file:
        tokenizer = load_tokenizer(Path(data.tokenizer_file).parent, Path(data.tokenizer_file).name)
    return prepare_text(text_sources(data, data_dir), kind=data.tokenizer, vocab_size=data.vocab_size,
                        tokenizer=tokenizer, cache=cache_dir(), progress=progress)


def train_windows(tokens: Tensor | np.ndarray, data: LMData):
    """``train_data(epoch)`` for the Trainer: an endless stream of ``(x, y)`` windows drawn by
    a fresh :class:`LMDataset` seeded by ``(seed, epoch)`` (and the rank, whose own part of
    the stream it reads under torchrun), so a resumed run replays it. Each batch is read from
    the (memory-mapped) tokens by a thread while the step before it runs: one at a time, in
    order, so the draws are those of a plain loop."""
    rank, world = get_rank(), get_world_size()

    def epoch_batches(epoch: int) -> Iterator[tuple[Tensor, Tensor]]:
        seed = data.seed * 1_000_003 + epoch + rank * 7_919_000_003
        windows = LMDataset(tokens, data.block_size, seed=seed, part=(rank, world))
        with ThreadPoolExecutor(1) as reader:  # the next batch is read while a step runs
            ahead = reader.submit(windows.get_batch, data.batch_size)
            while True:
                batch, ahead = ahead.result(), reader.submit(windows.get_batch, data.batch_size)
                yield batch  # (B, n), (B, n)

    return epoch_batches


def lm_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, int]:
    """Next-token cross-entropy **summed** over the batch's tokens, and the token count."""
    x, y = batch  # (B, n), (B, n)
    logits = model(x)  # (B, n, V)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), reduction="sum")
    return loss, y.numel()


def val_windows(tokens: Tensor | np.ndarray, block_size: int,
                batch_size: int) -> Iterator[tuple[Tensor, Tensor]]:
    """The whole validation stream as non-overlapping windows, in batches (deterministic),
    read a batch at a time."""
    n = (len(tokens) - 1) // block_size
    if n < 1:
        raise ValueError(f"validation text has {counted(len(tokens), 'token')}, fewer than block_size + 1")

    def batches() -> Iterator[tuple[Tensor, Tensor]]:
        for i in range(0, n, batch_size):
            rows = min(batch_size, n - i)
            span = tokens[i * block_size : (i + rows) * block_size + 1]
            chunk = torch.as_tensor(np.asarray(span, np.int64))  # (rows · n + 1,)
            yield chunk[:-1].view(rows, block_size), chunk[1:].view(rows, block_size)  # (b, n) each

    return batches()


def full_val_loss(model: nn.Module, val_tokens: Tensor, block_size: int) -> dict[str, float]:
    """Loss and perplexity over the whole validation stream (non-overlapping windows)."""
    loss = mean_loss(model, lm_loss, val_windows(val_tokens, block_size, 64))
    return {"val_loss": loss, "perplexity": perplexity(loss)}


# ----------------------------------------------------------------------------- pictures
PICTURE_TOKENS = 20_000  # the start of the validation text, where the picture's line is found


def attention_line(text: str, shortest: int = 30, longest: int = 60) -> str:
    """The first line of ``text`` of ``shortest`` to ``longest`` characters (else its start)."""
    for line in text.splitlines():
        if shortest <= len(line.strip()) <= longest:
            return line.strip()
    return text[:longest]


def sample_prompt(tokenizer: AnyTokenizer, text: str) -> str:
    """The sample's prompt: a newline (nanoGPT's), or where the tokenizer drops newlines (words)
    the first token of ``text``."""
    return "\n" if tokenizer.encode("\n") else tokenizer.decode(tokenizer.encode(text)[:1])


# ----------------------------------------------------------------------------- the task
@register_task
class LanguageModelTask(Task):
    """A GPT on tinyshakespeare (see the module docstring)."""

    recipe_class = LMRecipe
    recipe: LMRecipe
    eval_splits = ("val",)

    def prepare(self, resume: Path | None) -> None:
        """The prepared token files of the text (made once, then reused), its tokenizer (or the
        resumed run's) and the fixed random validation windows of the periodic evaluations."""
        d = self.recipe.data
        given = load_tokenizer(resolve_resume(resume)) if resume is not None else None
        self.corpus = prepare_corpus(d, self.data_dir, given, progress=self.recipe.train.progress)
        for line in self.corpus.notes():
            print(line, flush=True)
        self.tokenizer = self.corpus.tokenizer
        self.train_ids, self.val_ids = self.corpus.tokens("train"), self.corpus.tokens("val")
        for name, ids in (("training", self.train_ids), ("validation", self.val_ids)):
            if len(ids) < d.block_size + 1:
                raise ValueError(
                    f"the {name} text has {counted(len(ids), 'token')}, fewer than data.block_size + 1 = "
                    f"{d.block_size + 1}: lower data.block_size or give more text"
                )
        self.tokenizer_file = self.run_file(TOKENIZER_FILE, self.tokenizer.to_json())  # checked: written
        self.val_text = self.tokenizer.decode(self.val_ids[:PICTURE_TOKENS], skip_special=False)
        windows = LMDataset(self.val_ids, d.block_size, seed=d.seed)
        self.eval_batches = [windows.get_batch(d.batch_size) for _ in range(self.recipe.eval.eval_iters)]

    def build_model(self) -> nn.Module:
        """The recipe's ``[model] type`` (a GPT by default; ``lstm``, ``lstmn``)."""
        return self.recipe.model.build_model(vocab_size=self.tokenizer.vocab_size)

    def describe(self, model: nn.Module) -> str:
        return (
            f"{model.model_type}: {model.num_parameters():,} parameters, "
            f"vocabulary {self.tokenizer.vocab_size}, "
            f"{len(self.train_ids):,} train / {len(self.val_ids):,} val tokens"
        )

    def memory_needs(self) -> list[Need]:
        """The model; the windows and targets (int64) of a training batch and of the
        ``eval.eval_iters`` validation batches :meth:`prepare` keeps; one layer's activations for
        a training batch (``d_model`` of a GPT, ``hidden_dim`` of an LSTM)."""
        d, model = self.recipe.data, self.recipe.model
        windows = {"data.batch_size": d.batch_size, "data.block_size": d.block_size}
        width = "d_model" if model.type == "gpt" else "hidden_dim"  # the recurrent models' state
        batches = {"(1 + eval.eval_iters)": 1 + self.recipe.eval.eval_iters, **windows, "ids and targets": 2}
        activations = {**windows, f"model.{width}": model.settings[width]}
        needs = [*super().memory_needs(), sized("one layer's activations", activations, 4),
                 sized("the training and validation windows", batches, 8, "ids", host=True)]
        return needs + ([bpe_need(d.vocab_size, "data.vocab_size")] if d.tokenizer == "bpe" else [])

    def train_data(self) -> Callable[[int], Iterator[tuple[Tensor, Tensor]]]:
        return train_windows(self.train_ids, self.recipe.data)

    def checkpoint_files(self) -> ExtraFiles:
        return {**super().checkpoint_files(), self.tokenizer_file.name: self.tokenizer_file}

    def loss(self, model: nn.Module, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, int]:
        return lm_loss(model, batch)

    def validate(self, model: nn.Module) -> dict[str, float]:
        loss = mean_loss(model, lm_loss, self.eval_batches)
        return {"val_loss": loss, "perplexity": perplexity(loss)}

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """Print and write ``results.json``: whole-split validation loss, perplexity, time, a sample."""
        ev = self.recipe.eval
        final = full_val_loss(model, self.val_ids, self.recipe.data.block_size)
        pipeline = LanguageModelPipeline(model, self.tokenizer)
        prompt = sample_prompt(self.tokenizer, self.val_text)
        text = pipeline.generate(
            prompt, ev.sample_chars, temperature=ev.temperature, top_k=ev.top_k, seed=ev.sample_seed
        )[: ev.sample_chars]
        picture = None
        if pipeline.draws_attention:  # an LSTM has none
            picture = pipeline.plot_attention(attention_line(self.val_text), self.run_dir / "attention.png")
        results = {
            **final,
            "model_type": model.model_type,
            "parameters": model.num_parameters(),
            "attention_picture": None if picture is None else str(picture),
            "wall_time_s": result.seconds,
            "steps": result.step,
            "stopped": result.stopped,
            "last_eval": result.last_eval,
            "checkpoint": str(result.last_checkpoint),
            "sample": text,
        }
        write_atomic(self.run_dir / "results.json", json.dumps(results, indent=2) + "\n")
        print(
            f"val loss {final['val_loss']:.4f} (whole validation split), perplexity "
            f"{final['perplexity']:.3f}, {counted(result.step, 'step')} in {result.seconds:.1f} s "
            f"({result.stopped})"
        )
        if picture is not None:
            print(f"attention over a line of the validation text: {picture}")
        print(f"checkpoint: {result.last_checkpoint}\nsample:\n{text}", flush=True)
        return results

    @classmethod
    def prepare_data(cls, raw: Mapping[str, Any], data_dir: str | None) -> list[str]:
        recipe = cls.recipe_class.from_dict(raw)
        return prepare_corpus(recipe.data, data_dir, progress=recipe.train.progress).notes()

    @classmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """Loss and perplexity of ``checkpoint`` on the whole validation split."""
        cls.eval_split(request)
        pipeline = LanguageModelPipeline.from_checkpoint(checkpoint, device=request.device)
        # The [data] table it was trained with (defaults for an older checkpoint without one).
        data = from_dict(LMData, pipeline.recipe.get("data", {}), where="[data]")
        corpus = prepare_corpus(data, request.data_dir, pipeline.tokenizer)
        model = pipeline.model
        return full_val_loss(model, corpus.tokens("val"), model.config.block_size)

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        return f"val loss {scores['val_loss']:.4f}  perplexity {scores['perplexity']:.4f}"
