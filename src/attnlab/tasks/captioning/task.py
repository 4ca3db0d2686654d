"""The captioning task: Show, Attend and Tell on scenes of real handwriting (Xu et al. 2015,
"Show, Attend and Tell"; Ba (CSC413 Lecture 8), attention-based caption generation).

    attnlab train --config configs/digits_caption.toml
    attnlab caption RUN_DIR/final image.png --attention out.png
    attnlab evaluate RUN_DIR/final

``prepare`` composes the scenes of each split from that split's MNIST digits only and writes
them as a folder of images + ``captions.txt`` (+ ``digits.json``, their boxes) under
``RUN_DIR/data``; every source, a user's folder of photos too, is then read by the same code
(:class:`~attnlab.data.caption_set.CaptionSet`). The loss is the caption's cross-entropy summed
over its words plus the doubly stochastic regulariser of each image (eq. 14). Validation:
loss and greedy exact-match. The report beam-decodes the test split and gives exact-match
accuracy (overall and by digits in the scene), sacreBLEU, the attention mass inside the box
of the digit each number word names, the deck's figure for a few test scenes and a
"mistakes" page of wrong captions with their maps.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.checkpoint import ExtraFiles, resolve_resume
from attnlab.data.caption_set import CaptionBatch, CaptionSet
from attnlab.data.image_captions import write_scene_folder
from attnlab.data.scenes import make_scenes
from attnlab.data.tokenizers import SMALLEST_VOCABULARY, TOKENIZER_FILE, WordTokenizer, load_tokenizer
from attnlab.evaluation import bleu
from attnlab.generation.beam import beam_need
from attnlab.memory import Need, sized
from attnlab.pipelines import CaptioningPipeline, DecodeConfig
from attnlab.tasks.base import EvaluateRequest, Task, load_saved_recipe, register_task
from attnlab.tasks.captioning.boxes import attention_on_digits
from attnlab.tasks.captioning.recipe import CaptionData, CaptionEval, CaptionRecipe
from attnlab.training import TrainResult
from attnlab.training.losses import mean_loss
from attnlab.validation import counted

SPLIT_FOLDERS = {"train": "train", "validation": "val", "test": "test"}
"""The MNIST split each caption split's scenes come from, and its folder name."""


def split_folders(
    data: CaptionData, root: Path, data_dir: str | None, *, only: str | None = None
) -> dict[str, Path]:
    """The folder of each split (``only``: of that one): ``data.folder``'s ``train/``,
    ``val/``, ``test/``, or, for scenes, ``root/<split>`` composed here (kept when it exists:
    composing is seeded)."""
    if data.source == "folder":
        return {n: Path(data.folder) / n for n in SPLIT_FOLDERS.values() if only in (None, n)}
    sizes = {"train": data.train_scenes, "validation": data.val_scenes, "test": data.test_scenes}
    folders = {}
    for offset, (split, name) in enumerate(SPLIT_FOLDERS.items()):
        if only not in (None, name):
            continue
        folder = root / name
        if not (folder / "captions.txt").is_file():
            print(f"composing {sizes[split]:,} {split} scenes -> {folder}", flush=True)
            scenes = make_scenes(split, sizes[split], data.seed * 10 + offset, data_dir,
                                 canvas=data.canvas, counts=tuple(data.counts))
            write_scene_folder(scenes, folder)
        folders[name] = folder
    return folders


def caption_loss(
    model: nn.Module, batch: CaptionBatch, pad_id: int, *, penalty: bool = True
) -> tuple[Tensor, Tensor]:
    """``(Σ_words −log p(y_t) + Σ_images λ Σ_i (1 − Σ_t α_ti)², words)``: Xu et al. eq. 14 summed
    over the batch (the trainer divides by the word count)."""
    logits, weights = model(batch.images, batch.tgt_in, return_weights=True)  # (B, T, V), [(B, 1, T, L)]
    alphas = weights[0][:, 0] if weights else None  # (B, T, L); None without attention
    words = batch.tgt_out != pad_id  # (B, T)
    nll = F.cross_entropy(logits.float().transpose(1, 2), batch.tgt_out, ignore_index=pad_id, reduction="sum")
    if penalty and alphas is not None:
        nll = nll + model.doubly_stochastic_penalty(alphas.float(), words) * batch.images.shape[0]
    return nll, words.sum()


def score_captions(hypotheses: list[list[int]], data: CaptionSet, tok: Any) -> dict[str, Any]:
    """Exact match (whole caption, token for token), by number of digits when known, and
    sacreBLEU (cased, 13a) of the texts."""
    exact = [h == ref for h, ref in zip(hypotheses, data.ids, strict=True)]
    scores: dict[str, Any] = {"exact_match": sum(exact) / len(exact), "captions": len(exact)}
    if data.digits is not None:
        by_count: dict[str, list[bool]] = {}
        for ok, digits in zip(exact, data.digits, strict=True):
            by_count.setdefault(str(len(digits)), []).append(ok)
        scores["exact_match_by_digits"] = {k: sum(v) / len(v) for k, v in sorted(by_count.items())}
    texts = [tok.decode(h) for h in hypotheses]
    result = bleu(texts, data.captions)
    scores.update(bleu=result.score, bleu_signature=result.signature)
    return scores


@register_task
class CaptioningTask(Task):
    """A :class:`~attnlab.models.ShowAttendTell` captioner (see the module docstring)."""

    recipe_class = CaptionRecipe
    recipe: CaptionRecipe
    decodes = True

    def prepare(self, resume: Path | None) -> None:
        self.start = time.perf_counter()
        d = self.recipe.data
        folders = split_folders(d, self.run_dir / "data", self.data_dir)
        images, captions, digits = {}, {}, {}
        for name, folder in folders.items():
            read = CaptionSet.read_folder(folder, channels=d.channels, size=d.size)
            images[name], captions[name], digits[name] = read
        if resume is not None:
            self.tok = load_tokenizer(resolve_resume(resume))
        else:
            self.tok = WordTokenizer.train(captions["train"])
        self.tokenizer_file = self.run_file(f"tokenizer/{TOKENIZER_FILE}", self.tok.to_json())
        self.sets = {n: CaptionSet(images[n], captions[n], self.tok, digits[n]) for n in folders}
        print(f"{len(self.sets['train']):,} training captions, vocabulary {self.tok.vocab_size} words",
              flush=True)

    def memory_needs(self) -> list[Need]:
        """The model (the smallest vocabulary: the special words and one), every split's images
        in memory (float32; a folder holds at least one a split), the first convolution's output
        for a training batch (full resolution) and the test decoding's beam."""
        d, ev = self.recipe.data, self.recipe.eval
        if d.source == "scenes":
            scenes = d.train_scenes + d.val_scenes + d.test_scenes
            images = {"(data.train_scenes + data.val_scenes + data.test_scenes)": scenes}
            batch = min(d.batch_size, d.train_scenes)
        else:
            images, batch = {"splits": len(SPLIT_FOLDERS)}, 1
        pixels = {"data.size²": d.size**2}
        channels = self.recipe.model.settings["conv_channels"][0]
        first = {"data.batch_size": batch, "model.conv_channels[0]": channels}
        return [
            self.recipe.model.training_need(),
            sized("the images", {**images, "data.channels": d.channels, **pixels}, 4, host=True),
            sized("the first convolution's output", {**first, **pixels}, 4),
            beam_need(1, ev.beam_size, SMALLEST_VOCABULARY, 1, name="eval.beam_size"),
        ]

    def build_model(self) -> nn.Module:
        return self.recipe.model.build_model(vocab_size=self.tok.vocab_size)

    def describe(self, model: nn.Module) -> str:
        kind = "soft attention" if model.config.attention else "no attention (mean feature)"
        return f"{model.model_type} ({kind}): {model.num_parameters():,} parameters, grid {model.grid}"

    def train_data(self) -> Callable[[int], Any]:
        d, train = self.recipe.data, self.sets["train"]
        return lambda epoch: train.loader(d.batch_size, shuffle=True, seed=d.seed * 1_000_003 + epoch)

    def checkpoint_files(self) -> ExtraFiles:
        return {**super().checkpoint_files(), TOKENIZER_FILE: self.tokenizer_file}

    def loss(self, model: nn.Module, batch: CaptionBatch) -> tuple[Tensor, Tensor]:
        return caption_loss(model, batch, self.tok.pad_id)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Cross-entropy per word (no regulariser) and greedy exact match on the validation scenes."""
        val, ev = self.sets["val"], self.recipe.eval
        batches = val.loader(ev.batch_size, shuffle=False)
        metrics = {"val_loss": mean_loss(
            model, lambda m, b: caption_loss(m, b, self.tok.pad_id, penalty=False), batches)}
        limit = ev.val_limit or len(val)
        subset = CaptionSet(val.images[:limit], val.captions[:limit], self.tok)
        greedy = dataclasses.replace(caption_decoding(ev), beam_size=1)
        hyps = CaptioningPipeline(model, self.tok).caption_ids(subset.images, greedy)
        metrics["val_exact"] = score_captions(hyps, subset, self.tok)["exact_match"]
        return metrics

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """Save ``final/``, beam-decode the test scenes, score, draw, write ``results.json``."""
        final = model.save_pretrained(self.run_dir / "final", extra=self.checkpoint_files())
        captioner = CaptioningPipeline(model, self.tok, decoding=caption_decoding(self.recipe.eval))
        test = self.sets["test"]
        scores, hyps = test_scores(captioner, test, self.recipe, progress=self.recipe.train.progress)
        print(self.format_scores(scores))
        from attnlab.tasks.captioning.pictures import draw_samples_and_mistakes

        pictures = draw_samples_and_mistakes(captioner, test, hyps, self.run_dir, self.recipe.eval)
        samples = [{"reference": test.captions[i], "caption": self.tok.decode(hyps[i])}
                   for i in range(min(self.recipe.eval.sample_count, len(test)))]
        for s in samples:
            print(f"  REF {s['reference']}\n  HYP {s['caption']}")
        results = {
            **scores, "model_type": model.model_type, "attention": model.config.attention,
            "parameters": model.num_parameters(), "steps": result.step, "train_s": result.seconds,
            "stopped": result.stopped, "last_eval": result.last_eval, "checkpoint": str(final),
            "wall_s": round(time.perf_counter() - self.start, 1), "pictures": [str(p) for p in pictures],
            "samples": samples,
        }
        write_atomic(self.run_dir / "results.json", json.dumps(results, indent=2) + "\n")
        for picture in pictures:
            print(f"picture: {picture}")
        minutes = result.seconds / 60
        print(f"{counted(result.step, 'step')} in {minutes:.1f} min ({result.stopped}); final model: {final}")
        return results

    @classmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """The test scores of ``checkpoint`` on its recipe's test scenes (composed again: seeded)."""
        cls.eval_split(request)
        recipe = load_saved_recipe(checkpoint, CaptionRecipe)
        if request.beam_size is not None:
            recipe.eval.beam_size = request.beam_size
        if request.length_penalty is not None:
            recipe.eval.length_penalty = request.length_penalty
        captioner = CaptioningPipeline.from_checkpoint(checkpoint, device=request.device)
        d = recipe.data
        with tempfile.TemporaryDirectory(prefix="attnlab-scenes-") as root:
            folder = split_folders(d, Path(root), request.data_dir, only="test")["test"]
            images, captions, digits = CaptionSet.read_folder(folder, channels=d.channels, size=d.size)
        test = CaptionSet(images, captions, captioner.tokenizer, digits)
        return test_scores(captioner, test, recipe, progress=recipe.train.progress)[0]

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        lines = [f"test: exact match {scores['exact_match']:.1%} of {scores['captions']:,} captions | "
                 f"sacreBLEU {scores['bleu']:.2f} | {scores['bleu_signature']}"]
        if "exact_match_by_digits" in scores:
            cells = "  ".join(f"{k}: {v:.1%}" for k, v in scores["exact_match_by_digits"].items())
            lines.append(f"exact match by digits in the scene  {cells}")
        if "box_attention" in scores and not math.isnan(scores["box_attention"]):
            lines.append(f"attention inside the named digit's box {scores['box_attention']:.3f} "
                         f"(uniform attention: {scores['box_area']:.3f}) over {scores['box_words']:,} words")
        return "\n".join(lines)


def caption_decoding(ev: CaptionEval) -> DecodeConfig:
    """The decoding settings of an ``[eval]`` table: beam, length penalty, longest caption, batch."""
    return DecodeConfig(beam_size=ev.beam_size, length_penalty=ev.length_penalty, max_len=ev.max_len,
                        batch_size=ev.batch_size)


def test_scores(
    captioner: CaptioningPipeline, test: CaptionSet, recipe: CaptionRecipe, *, progress: bool = False
) -> tuple[dict[str, Any], list]:
    """Beam-decode ``test`` with the recipe's settings (``progress``: show a bar); exact match,
    sacreBLEU and, for scenes with boxes and a model with attention, the attention on the
    named digits."""
    ev = recipe.eval
    hyps = captioner.caption_ids(test.images, caption_decoding(ev), progress=progress)
    scores = {**score_captions(hyps, test, captioner.tokenizer), "beam_size": ev.beam_size}
    if test.digits is not None and captioner.draws_attention:
        scores.update(attention_on_digits(captioner, test.images, hyps, test.digits))
    return scores, hyps
