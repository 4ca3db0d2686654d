"""The speech recognition task: an attention-based recognizer trained on the synthetic corpus
(or your WAV files) and scored by character and word error rates (Hasegawa-Johnson, ECE 417
Lecture 21; Chorowski, Bahdanau, Serdyuk, Cho & Bengio 2015, "Attention-Based Models for Speech
Recognition"; Zeyer et al. 2019, "A Comparison of Transformer and LSTM Encoder Decoder Models
for ASR").

    attnlab prepare configs/speech_las.toml        # speak the corpus into the cache (optional)
    attnlab train --config configs/speech_las.toml
    attnlab transcribe RUN_DIR/final a.wav b.wav [--attention out.png]
    attnlab evaluate RUN_DIR/final [--split valid]

``prepare`` speaks the corpus (cached; a re-run reads it back) or reads your folder, computes
every utterance's normalised log-mel features once, and builds the character tokenizer (the
alphabet of :func:`~attnlab.data.speech.normalize_transcript`). The loss is the label-smoothed
cross-entropy of the characters, the features of each training batch masked by SpecAugment.
Validation: loss and greedy CER. The report saves ``RUN_DIR/final``, beam-decodes valid and
test, prints CER and WER and a few transcripts, draws the alignment of one test utterance over
its spectrogram and writes ``results.json``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.checkpoint import ExtraFiles, resolve_resume
from attnlab.data.speech import LogMel, SpeechBatch, SpeechCorpus, SpeechSet, speech_folder, synthetic_speech
from attnlab.data.tokenizers import TOKENIZER_FILE, CharTokenizer, load_tokenizer
from attnlab.evaluation import cer, wer
from attnlab.pipelines import DecodeConfig, SpeechPipeline
from attnlab.tasks.base import EvaluateRequest, Task, load_saved_recipe, register_task
from attnlab.tasks.speech.recipe import SpeechData, SpeechEval, SpeechRecipe
from attnlab.training import TrainResult, label_smoothed_cross_entropy
from attnlab.training.losses import mean_loss
from attnlab.validation import counted

ALPHABET = "abcdefghijklmnopqrstuvwxyz' "
"""Every character a normalised transcript holds (:func:`~attnlab.data.speech.normalize_transcript`)."""


def speech_corpus(data: SpeechData, data_dir: str | None, *, progress: bool = False) -> SpeechCorpus:
    """The corpus of a ``[data]`` table: spoken (cached) or read from its folder."""
    if data.source == "folder":
        return speech_folder(data.folder)
    return synthetic_speech(data.synthetic(), data_dir=data_dir, progress=progress)


def speech_loss(model: nn.Module, batch: SpeechBatch, pad_id: int, epsilon: float) -> tuple[Tensor, Tensor]:
    """Label-smoothed cross-entropy summed over the batch's characters and ``<eos>``."""
    logits = model(batch.features, batch.lengths, batch.tgt_in)  # (B, T, V)
    return label_smoothed_cross_entropy(logits, batch.tgt_out, epsilon=epsilon, ignore_index=pad_id)


def error_rates(hypotheses: list[str], references: list[str]) -> dict[str, Any]:
    """CER and WER (fractions) with their counts."""
    c, w = cer(hypotheses, references), wer(hypotheses, references)
    return {"cer": c.rate, "wer": w.rate, "cer_detail": str(c), "wer_detail": str(w),
            "utterances": len(references)}


def speech_decoding(ev: SpeechEval) -> DecodeConfig:
    """The :class:`DecodeConfig` part of an ``[eval]`` table."""
    return DecodeConfig(**{f.name: getattr(ev, f.name) for f in dataclasses.fields(DecodeConfig)})


@register_task
class SpeechTask(Task):
    """A recognizer of the recipe's ``[model] type`` (see the module docstring)."""

    recipe_class = SpeechRecipe
    recipe: SpeechRecipe
    eval_splits = ("test", "valid")
    decodes = True

    def prepare(self, resume: Path | None) -> None:
        self.start = time.perf_counter()
        d = self.recipe.data
        corpus = speech_corpus(d, self.data_dir, progress=self.recipe.train.progress)
        self.tok = load_tokenizer(resolve_resume(resume)) if resume is not None else CharTokenizer(ALPHABET)
        self.tokenizer_file = self.run_file(f"tokenizer/{TOKENIZER_FILE}", self.tok.to_json())
        front_end = LogMel(sample_rate=corpus.sample_rate, n_mels=d.n_mels)
        self.sets = {split: SpeechSet.from_corpus(corpus, corpus[split], front_end, self.tok)
                     for split in corpus.splits if corpus[split]}
        if "train" not in self.sets:
            raise ValueError(f"the corpus of [data] has no training utterances: {corpus.summary()}")
        frames = sum(self.sets["train"].frames())
        print(f"{corpus.summary()}\ntraining audio: {frames / 100 / 60:.1f} min, "
              f"{counted(d.n_mels, 'log-mel channel')}", flush=True)

    def build_model(self) -> nn.Module:
        size = self.tok.vocab_size
        return self.recipe.model.build_model(src_vocab_size=size, tgt_vocab_size=size)

    def describe(self, model: nn.Module) -> str:
        score = getattr(model.config, "score", None)
        kind = model.model_type + (f" ({score} score)" if score else "")
        return (f"{kind}: {model.num_parameters():,} parameters, keys every {model.reduction} frames; "
                f"{len(self.sets['train']):,} training utterances")

    def train_data(self) -> Callable[[int], Any]:
        d, train = self.recipe.data, self.sets["train"]
        masks = d.specaugment()
        return lambda epoch: train.batches(d.batch_size, shuffle=True, seed=d.seed * 1_000_003 + epoch,
                                           augment=masks)

    def checkpoint_files(self) -> ExtraFiles:
        return {**super().checkpoint_files(), TOKENIZER_FILE: self.tokenizer_file}

    def loss(self, model: nn.Module, batch: SpeechBatch) -> tuple[Tensor, Tensor]:
        return speech_loss(model, batch, self.tok.pad_id, self.recipe.optim.label_smoothing)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Cross-entropy per character (no smoothing) and greedy CER on the validation utterances."""
        val = self.sets.get("valid") or self.sets["train"]
        ev = self.recipe.eval
        batches = val.batches(ev.batch_size)
        metrics = {"val_loss": mean_loss(model, lambda m, b: speech_loss(m, b, self.tok.pad_id, 0.0), batches,
                                         bf16=self.recipe.train.bf16)}
        limit = ev.val_limit or len(val)
        greedy = dataclasses.replace(speech_decoding(ev), beam_size=1)
        hyps = SpeechPipeline(model, self.tok).transcribe_ids(val.features[:limit], greedy)
        metrics["val_cer"] = cer([self.tok.decode(h) for h in hyps], val.texts[:limit]).rate
        return metrics

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """Save ``final/``, beam-decode valid and test, score, draw, write ``results.json``."""
        final = model.save_pretrained(self.run_dir / "final", extra=self.checkpoint_files())
        recognizer = SpeechPipeline(model, self.tok, decoding=speech_decoding(self.recipe.eval))
        ev, scores, samples, picture = self.recipe.eval, {}, [], None
        for split in ("valid", "test"):
            if split not in self.sets:
                continue
            data = self.sets[split]
            ids = recognizer.transcribe_ids(data.features, progress=self.recipe.train.progress)
            hyps = [self.tok.decode(i) for i in ids]
            scores[split] = error_rates(hyps, data.texts)
            shown = {**scores[split], "split": split, "beam_size": ev.beam_size}
            print(self.format_scores(shown), flush=True)
            if split == "test":
                samples = [{"reference": r, "hypothesis": h}
                           for r, h in list(zip(data.texts, hyps, strict=True))[: ev.sample_count]]
                index = min(ev.heatmap_index, len(data) - 1)
                picture = recognizer.plot_attention(data.features[index], ids[index],
                                                    self.run_dir / "alignment.png")
        for s in samples:
            print(f"  REF {s['reference']}\n  HYP {s['hypothesis']}")
        results = {
            **scores, "model_type": model.model_type, "score": getattr(model.config, "score", None),
            "parameters": model.num_parameters(), "beam_size": ev.beam_size, "steps": result.step,
            "train_s": result.seconds, "stopped": result.stopped, "last_eval": result.last_eval,
            "checkpoint": str(final), "alignment": None if picture is None else str(picture),
            "wall_s": round(time.perf_counter() - self.start, 1), "samples": samples,
        }
        path = write_atomic(self.run_dir / "results.json", json.dumps(results, indent=2) + "\n")
        print(f"results: {path}\nalignment picture: {picture}\n{counted(result.step, 'step')} in "
              f"{result.seconds / 60:.1f} min ({result.stopped}); final model: {final}", flush=True)
        return results

    @classmethod
    def prepare_data(cls, raw: Mapping[str, Any], data_dir: str | None) -> list[str]:
        """``attnlab prepare``: the recipe's corpus spoken into the cache (what is missing of it),
        so that training only reads it; a folder of your own is read and its WAV headers checked."""
        recipe = cls.recipe_class.from_dict(raw)
        corpus = speech_corpus(recipe.data, data_dir, progress=recipe.train.progress)
        if "synthesized" in corpus.info:
            done = (f"spoke {counted(corpus.info['synthesized'], 'utterance')} of {len(corpus):,} into "
                    f"{corpus.info['cache']} (the rest were there)")
        else:
            done = f"read {counted(len(corpus), 'utterance')} from {recipe.data.folder}"
        return [done, *corpus.summary().splitlines()]

    @classmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """CER and WER of ``checkpoint`` on a split of its recipe's corpus (spoken again: seeded
        and cached), beam settings from its recipe unless the request gives them."""
        split = cls.eval_split(request)
        recipe = load_saved_recipe(checkpoint, SpeechRecipe)
        recognizer = SpeechPipeline.from_checkpoint(checkpoint, device=request.device)
        corpus = speech_corpus(recipe.data, request.data_dir, progress=recipe.train.progress)
        if split not in corpus.splits or not corpus[split]:
            raise ValueError(f"the corpus of {checkpoint} has no {split} utterances: {corpus.summary()}")
        front_end = LogMel(sample_rate=corpus.sample_rate, n_mels=recipe.data.n_mels)
        data = SpeechSet.from_corpus(corpus, corpus[split], front_end, recognizer.tokenizer)
        decoding = recognizer.settings(beam_size=request.beam_size, length_penalty=request.length_penalty)
        ids = recognizer.transcribe_ids(data.features, decoding, progress=recipe.train.progress)
        hyps = [recognizer.tokenizer.decode(i) for i in ids]
        return {**error_rates(hyps, data.texts), "split": split, "beam_size": decoding.beam_size}

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        return (f"{scores['split']} (beam {scores['beam_size']}, {scores['utterances']} utterances): "
                f"{scores['cer_detail']} | {scores['wer_detail']}")
