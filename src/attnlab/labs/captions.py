"""Where the captioner looks, word by word (Ba (CSC413 Lecture 8), "Attention-Based Caption
Generation"; Xu et al. 2015, "Show, Attend and Tell", Figures 2-3 and 5).

The lab reads a trained :class:`~attnlab.models.ShowAttendTell` captioner, captions the test
scenes of its recipe (the run's own ``data/test`` when it is there, else composed again: the
scenes are seeded) with the recipe's beam settings (greedily, and the first few scenes only,
in quick mode) and reports, with the task's own measures (:mod:`attnlab.tasks.captioning`):

* exact match and sacreBLEU of the captions;
* the **attention inside the box** of the digit each generated number word names
  (:func:`~attnlab.tasks.captioning.boxes.attention_on_digits`: the attention mass of the step
  that wrote the word that falls on the digit's pixels), against the box's share of the image
  (what uniform attention would give), over all scenes and by the number of digits in the scene.

Its pictures are the task's: each test scene's caption with one attention map a word, the
named digit's box outlined (:func:`attnlab.tasks.captioning.pictures.draw_samples_and_mistakes`),
and the same for wrong captions.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from attnlab.labs.checkpoints import DefaultRun, corpora_needed, find_checkpoints
from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions, LabReport

TITLE = "Captions: where the captioner looks, word by word"
SOURCE = 'Ba (CSC413 Lecture 8), "Attention-Based Caption Generation"'
DEFAULTS = (DefaultRun("runs/digits_caption", "attnlab train --config configs/digits_caption.toml"),)
QUICK_SCENES = 8


def run_of(checkpoint: Path) -> Path:
    """The run directory holding ``checkpoint`` (``run/final``, ``run/best``, ``run/checkpoints/step_N``)."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint.parent


def load_test_scenes(checkpoint: Path, recipe, options: LabOptions, tokenizer):
    """The recipe's test split as a :class:`~attnlab.data.caption_set.CaptionSet` (the first
    :data:`QUICK_SCENES` in quick mode), read from the run's ``data/test`` or composed again."""
    from attnlab.data.caption_set import CaptionSet
    from attnlab.tasks.captioning import split_folders

    d = recipe.data
    kept = run_of(checkpoint) / "data"
    with tempfile.TemporaryDirectory(prefix="attnlab-scenes-") as scratch, corpora_needed("captions"):
        root = kept if (kept / "test" / "captions.txt").is_file() else Path(scratch)
        folder = split_folders(d, root, options.data_dir, only="test")["test"]
        images, captions, digits = CaptionSet.read_folder(folder, channels=d.channels, size=d.size)
    if options.quick:
        images, captions = images[:QUICK_SCENES], captions[:QUICK_SCENES]
        digits = None if digits is None else digits[:QUICK_SCENES]
    return CaptionSet(images, captions, tokenizer, digits)


def by_digit_count(captioner, test, hyps: list[list[int]]) -> list[list]:
    """Per number of digits in the scene: scenes, exact match, attention inside the named
    digits' boxes and the boxes' share of the image (rows of the report's table)."""
    from attnlab.tasks.captioning.boxes import attention_on_digits

    if test.digits is None:
        return []
    rows = []
    for count in sorted({len(d) for d in test.digits}):
        index = [i for i, d in enumerate(test.digits) if len(d) == count]
        exact = sum(hyps[i] == test.ids[i] for i in index) / len(index)
        box = attention_on_digits(captioner, test.images[index], [hyps[i] for i in index],
                                  [test.digits[i] for i in index])
        rows.append([count, len(index), exact, box["box_attention"], box["box_area"], box["box_words"]])
    return rows


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Caption the test scenes, measure the attention on the named digits, draw the maps."""
    from attnlab.pipelines import CaptioningPipeline
    from attnlab.tasks.base import load_saved_recipe
    from attnlab.tasks.captioning import test_scores
    from attnlab.tasks.captioning.pictures import draw_samples_and_mistakes
    from attnlab.tasks.captioning.recipe import CaptionRecipe

    report = LabReport("captions", TITLE, SOURCE)
    checkpoint = find_checkpoints("captions", options, DEFAULTS, ("show_attend_tell",))[0]
    recipe = load_saved_recipe(checkpoint, CaptionRecipe)
    if options.quick:
        recipe = dataclasses.replace(recipe, eval=dataclasses.replace(recipe.eval, beam_size=1))
    captioner = CaptioningPipeline.from_checkpoint(checkpoint, device=options.device)
    if not captioner.draws_attention:
        raise LabUnavailable(f"lab captions: checkpoint {checkpoint} has no attention (attention = false); "
                             f"train one with `{DEFAULTS[0].command}`")
    test = load_test_scenes(checkpoint, recipe, options, captioner.tokenizer)
    scores, hyps = test_scores(captioner, test, recipe, progress=options.progress)
    for key in ("exact_match", "bleu", "box_attention", "box_area", "box_words", "captions", "beam_size"):
        if key in scores:
            report.number(key, scores[key])
    report.number("checkpoint", str(checkpoint))
    _describe(report, checkpoint, scores)
    rows = by_digit_count(captioner, test, hyps)
    for count, _, exact, inside, area, _ in rows:
        report.number(f"box_attention_{count}_digits", inside)
        report.number(f"box_area_{count}_digits", area)
        report.number(f"exact_match_{count}_digits", exact)
    if rows:
        report.table(["digits in the scene", "scenes", "exact match", "attention inside the named digit's "
                      "box", "the box's share of the image (uniform attention)", "number words"], rows)
    pictures = draw_samples_and_mistakes(captioner, test, hyps, Path(out_dir), recipe.eval)
    captions = ["test scenes: the caption written, and where the model looked for each word (the named "
                "digit's box in green)", "wrong captions: what it wrote, the truth, and where it looked"]
    for path, caption in zip(pictures, captions, strict=False):
        report.figure(path, caption)
    return report


def _describe(report: LabReport, checkpoint: Path, scores: dict) -> None:
    beam = "greedy" if scores["beam_size"] == 1 else f"beam {scores['beam_size']}"
    text = (f"Checkpoint {checkpoint}, {scores['captions']} test scenes decoded {beam}: exact match "
            f"**{scores['exact_match']:.1%}**, sacreBLEU **{scores['bleu']:.2f}**.")
    if scores.get("box_words"):
        text += (f" While writing a number word the model puts **{scores['box_attention']:.3f}** of its "
                 f"attention inside the box of the digit it names; uniform attention would put "
                 f"**{scores['box_area']:.3f}** there (the boxes' mean share of the image), over "
                 f"{scores['box_words']} number words.")
    report.text(text)
