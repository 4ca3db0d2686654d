"""The translation task: train, translate and evaluate an encoder-decoder Transformer on
Multi30k (Ba (CSC413 Lecture 8), "Transformer Machine Translation"; Vaswani et al. 2017).

    attnlab train --config configs/multi30k_de_en.toml [key=value ...]
    attnlab translate RUN_DIR/final --beam 5 < in.de > out.en
    attnlab evaluate RUN_DIR/final --split test_2016_flickr

Training reads the corpus, learns BPE, trains with label-smoothed cross-entropy (validation:
loss and greedy BLEU), averages the last checkpoints into ``RUN_DIR/final``, decodes the test
split with beam search, prints sacreBLEU / chrF with their signatures and sample translations,
writes ``results.json`` and the alignment picture of one test sentence. Every checkpoint carries its tokenizer
files and ``recipe.json`` (language pair, decoding settings), so the other commands need only
the directory.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.checkpoint import ExtraFiles, resolve_resume
from attnlab.config import from_dict
from attnlab.data import SPLITS, TokenBatchSampler, TranslationDataset, load_tokenizers
from attnlab.data.presets import PAIR_PRESETS
from attnlab.data.tokenizers import SMALLEST_BPE, bpe_need, tokenizer_files
from attnlab.evaluation import bleu, chrf
from attnlab.generation.beam import beam_need
from attnlab.memory import Need
from attnlab.models import TransformerConfig
from attnlab.pipelines import DecodeConfig, TranslationPipeline
from attnlab.tasks.base import EvaluateRequest, Task, register_task
from attnlab.tasks.translation.corpus import prepare_translation
from attnlab.tasks.translation.recipe import TranslationData, TranslationEval, TranslationRecipe
from attnlab.training import (
    TrainConfig,
    TrainResult,
    average_checkpoints,
    label_smoothed_cross_entropy,
    last_checkpoints,
)
from attnlab.training.distributed import get_rank, get_world_size
from attnlab.training.losses import mean_loss
from attnlab.validation import counted

__all__ = ["TranslationTask", "score"]


def score(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """sacreBLEU and chrF (cased, detokenized) with details and signatures."""
    b, c = bleu(hypotheses, references), chrf(hypotheses, references)
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_signature": b.signature,
        "chrf_signature": c.signature,
        "bleu_details": b.details,
        "chrf_details": c.details,
    }


def _limit(pairs: list, n: int) -> list:
    return pairs[:n] if n else pairs


@register_task
class TranslationTask(Task):
    """Multi30k translation with the ``[model] type`` of the recipe: a
    :class:`~attnlab.models.Transformer` by default, or an RNN encoder-decoder (see the module
    doc)."""

    recipe_class = TranslationRecipe
    recipe: TranslationRecipe
    eval_splits = ("test", "val", "train", *(s for s in SPLITS if s.startswith("test_")))
    decodes = True

    def prepare(self, resume: Path | None) -> None:
        """The prepared training pairs (made once, then reused), the tokenizers (learned with
        them unless given or resumed), the validation and test pairs, and the batches."""
        self.start = time.perf_counter()
        d, ev = self.recipe.data, self.recipe.eval
        given = load_tokenizers(resolve_resume(resume)) if resume is not None else None
        self.corpus = prepare_translation(d, ev.test_split, self.data_dir, given,
                                          progress=self.recipe.train.progress)
        for line in self.corpus.notes():
            print(line, flush=True)
        src_tok, tgt_tok = self.src_tok, self.tgt_tok = self.corpus.src_tok, self.corpus.tgt_tok
        print(f"tokenizers: vocabulary {src_tok.vocab_size} (src) / {tgt_tok.vocab_size} (tgt)", flush=True)
        rows = self.corpus.rows("src"), self.corpus.rows("tgt")
        self.train_set = TranslationDataset.from_rows(*rows, tgt_tok, max_len=d.max_len)
        if self.train_set.too_long:
            share = self.train_set.too_long / len(rows[0])
            print(f"note: {counted(self.train_set.too_long, 'training pair')} ({share:.2%}) longer than "
                  f"data.max_len={d.max_len} subwords left out", flush=True)
        if not len(self.train_set):
            raise ValueError(f"every training pair is longer than data.max_len={d.max_len} subwords: "
                             "raise it")
        self.val_pairs = self.corpus.pairs("val")
        self.val_set = TranslationDataset.from_pairs(self.val_pairs, src_tok, tgt_tok)
        self.test_pairs = _limit(self.corpus.pairs("test"), ev.test_limit)
        self._check_lengths(src_tok.encode_batch([s for s, _ in self.test_pairs]))
        self.tokenizer_files = [self.run_file(f"tokenizer/{name}", text)
                                for name, text in tokenizer_files(src_tok, tgt_tok).items()]
        rank, world = get_rank(), get_world_size()
        self.sampler = TokenBatchSampler(self.train_set.lengths, d.max_tokens, seed=d.seed, rank=rank,
                                         world_size=world)
        val_sampler = TokenBatchSampler(self.val_set.lengths, d.max_tokens, shuffle=False)
        self.val_loader = self._loader(self.val_set, val_sampler)

    def memory_needs(self) -> list[Need]:
        """BPE's token table, the model (at the smallest vocabulary BPE can learn: bytes and
        specials; it learns at most ``data.vocab_size``) and the test decoding's beam."""
        return [bpe_need(self.recipe.data.vocab_size, "data.vocab_size"), self.recipe.model.training_need(),
                beam_need(1, self.recipe.eval.beam_size, SMALLEST_BPE, 1, name="eval.beam_size")]

    def _check_lengths(self, test_sources: list[list[int]]) -> None:
        """Learned positions cannot extrapolate: every training, validation and test sentence
        (in subwords; a target counts its ``<bos>``) must fit ``model.max_len`` — checked before
        the first step, not at the first evaluation."""
        config = self.recipe.model.resolve(**self._vocabularies())
        if not isinstance(config, TransformerConfig) or config.positional != "learned":
            return
        sides = {
            "training source": self.train_set.side_lengths("src"),
            "training target": self.train_set.side_lengths("tgt"),
            "validation source": self.val_set.side_lengths("src"),
            "validation target": self.val_set.side_lengths("tgt"),
            "test source": np.array([len(r) for r in test_sources], np.int64),
        }
        for what, lengths in sides.items():
            extra = 1 if what.endswith("target") else 0
            longest = int(lengths.max()) + extra if len(lengths) else 0
            if longest > config.max_len:
                raise ValueError(
                    f"model.max_len={config.max_len} is shorter than the longest {what} ({longest} "
                    f"subwords) and learned positions cannot extrapolate: raise model.max_len, "
                    f"lower data.max_len, or use positional = \"sinusoidal\""
                )

    @staticmethod
    def _loader(data: TranslationDataset, sampler: TokenBatchSampler) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=data.collate)

    def build_model(self) -> nn.Module:
        """The recipe's ``[model] type`` (a Transformer by default) for the tokenizers."""
        return self.recipe.model.build_model(**self._vocabularies())

    def _vocabularies(self) -> dict[str, int]:
        """The model fields the tokenizers decide: their vocabulary sizes."""
        sizes = {"src_vocab_size": self.src_tok.vocab_size, "tgt_vocab_size": self.tgt_tok.vocab_size}
        return {**sizes, "pad_id": self.tgt_tok.pad_id} if "pad_id" in self.recipe.model.pending else sizes

    def describe(self, model: nn.Module) -> str:
        return (
            f"model: {model.num_parameters():,} parameters; {len(self.train_set):,} training "
            f"pairs, {counted(len(self.sampler), 'batch', 'batches')}/epoch"
        )

    def train_data(self) -> torch.utils.data.DataLoader:
        return self._loader(self.train_set, self.sampler)

    def checkpoint_files(self) -> ExtraFiles:
        return {**super().checkpoint_files(), **{p.name: p for p in self.tokenizer_files}}

    def loss(self, model: nn.Module, batch: Any, *, epsilon: float | None = None) -> tuple[Tensor, Tensor]:
        """Label-smoothed cross-entropy summed over the target tokens (ε from the recipe)."""
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        eps = self.recipe.optim.label_smoothing if epsilon is None else epsilon
        pad = self.tgt_tok.pad_id
        return label_smoothed_cross_entropy(logits, batch.tgt_out, epsilon=eps, ignore_index=pad)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Token-level cross-entropy (no smoothing) and greedy BLEU on the validation pairs."""
        val_loss = mean_loss(
            model, lambda m, b: self.loss(m, b, epsilon=0.0), self.val_loader, bf16=self.recipe.train.bf16
        )
        metrics = {"val_loss": val_loss}
        ev = self.recipe.eval
        if ev.val_bleu:
            pairs = _limit(self.val_pairs, ev.val_limit)
            greedy = dataclasses.replace(_decoding(ev), beam_size=1)
            hyps = self.pipeline(model).translate([s for s, _ in pairs], greedy)
            metrics["val_bleu"] = bleu(hyps, [t for _, t in pairs]).score
        return metrics

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """Average the last checkpoints into ``final/``, beam-decode the test split, print the
        scores and samples, write ``results.json`` and the alignment picture."""
        print(f"training stopped ({result.stopped}) at step {result.step}; last eval {result.last_eval}")
        found = last_checkpoints(self.run_dir, self.recipe.eval.average_last)
        model.load_state_dict(average_checkpoints(found))  # paper §6.1
        final = model.save_pretrained(self.run_dir / "final", extra=self.checkpoint_files())
        print(f"final model: mean of {counted(len(found), 'checkpoint')} -> {final}", flush=True)
        return self._report_test(self.pipeline(model), final)

    def pipeline(self, model: nn.Module) -> TranslationPipeline:
        """``model`` with this run's tokenizers and its ``[eval]`` decoding settings."""
        return TranslationPipeline(model, self.src_tok, self.tgt_tok, decoding=_decoding(self.recipe.eval))

    def _report_test(self, translator: TranslationPipeline, final: Path) -> dict[str, Any]:
        d, ev, pairs = self.recipe.data, self.recipe.eval, self.test_pairs
        test_name = ev.test_split if d.corpus in PAIR_PRESETS else "test"  # a Multi30k test set, or yours
        decoding = counted(len(pairs), f"{test_name} sentence")
        print(f"decoding {decoding} (beam {ev.beam_size}) ...", flush=True)
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        hyps = translator.translate(sources, progress=self.recipe.train.progress)
        scores = score(hyps, refs)
        print(self.format_scores({**scores, "split": test_name, "pair": f"{d.src_lang}-{d.tgt_lang}"}))
        samples = [
            {"source": s, "reference": t, "hypothesis": h}
            for s, t, h in list(zip(sources, refs, hyps, strict=True))[: ev.sample_count]
        ]
        for sample in samples:
            print(f"  SRC {sample['source']}\n  REF {sample['reference']}\n  HYP {sample['hypothesis']}")
        index = min(ev.heatmap_index, len(pairs) - 1)
        picture = None
        if translator.draws_attention:
            picture = translator.plot_attention(sources[index], hyps[index], self.run_dir / "alignment.png")
        results = {
            "split": test_name, "src_lang": d.src_lang, "tgt_lang": d.tgt_lang,
            "beam_size": ev.beam_size, "length_penalty": ev.length_penalty, "sentences": len(pairs),
            **scores,
            "checkpoint": str(final), "alignment": None if picture is None else str(picture),
            "wall_s": round(time.perf_counter() - self.start, 1),  # data + BPE + training + decoding
            "samples": samples,
        }
        text = json.dumps(results, indent=2, ensure_ascii=False) + "\n"
        path = write_atomic(self.run_dir / "results.json", text)
        drawn = f"alignment picture: {picture}\n" if picture else "alignment picture: none (no attention)\n"
        print(f"results: {path}\n{drawn}checkpoint: {final}", flush=True)
        print(f"wall time: {results['wall_s'] / 60:.1f} min (data, BPE, training, averaging, decoding)")
        return results

    @classmethod
    def prepare_data(cls, raw: Mapping[str, Any], data_dir: str | None) -> list[str]:
        recipe = cls.recipe_class.from_dict(raw)
        corpus = prepare_translation(recipe.data, recipe.eval.test_split, data_dir,
                                     progress=recipe.train.progress)
        return corpus.notes()

    @classmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """sacreBLEU and chrF of ``checkpoint`` on a split of the corpus it was trained on:
        ``test`` (its recipe's test pairs), ``val``, ``train``, or a Multi30k test split."""
        translator = TranslationPipeline.from_checkpoint(checkpoint, device=request.device)
        recipe = translator.recipe
        if "src_lang" not in recipe.get("data", {}) or "tgt_lang" not in recipe.get("data", {}):
            raise ValueError(
                f"checkpoint {checkpoint} has no recipe.json naming its language pair "
                "(data.src_lang / data.tgt_lang)"
            )
        data = from_dict(TranslationData, recipe["data"], where="[data]")
        split = cls.eval_split(request)
        test_split = recipe.get("eval", {}).get("test_split", TranslationEval.test_split)
        if split not in ("test", "val", "train"):
            if data.corpus not in PAIR_PRESETS:
                raise ValueError(f"--split {split} is a Multi30k split; {checkpoint} was trained on "
                                 f"{data.corpus}: use test, val or train")
            split, test_split = "test", split
        tokenizers = (translator.src_tok, translator.tgt_tok)
        pairs = prepare_translation(data, test_split, request.data_dir, tokenizers).pairs(split)
        decoding = translator.settings(beam_size=request.beam_size, length_penalty=request.length_penalty)
        progress = recipe.get("train", {}).get("progress", TrainConfig.progress)  # as in training
        hyps = translator.translate([s for s, _ in pairs], decoding, progress=progress)
        pair = f"{data.src_lang}-{data.tgt_lang}"
        shown = test_split if split == "test" and data.corpus in PAIR_PRESETS else split
        return {**score(hyps, [t for _, t in pairs]), "split": shown, "pair": pair}

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        where = f"{scores['pair']} {scores['split']}"
        return (
            f"{where}: {scores['bleu_details']} | {scores['bleu_signature']}\n"
            f"{where}: {scores['chrf_details']} | {scores['chrf_signature']}"
        )


def _decoding(ev: DecodeConfig) -> DecodeConfig:
    """The :class:`DecodeConfig` part of an ``[eval]`` table."""
    return DecodeConfig(**{f.name: getattr(ev, f.name) for f in dataclasses.fields(DecodeConfig)})
