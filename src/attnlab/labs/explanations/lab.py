"""The lab: every explanation method scored on every trained model whose right answer is known.

For each task whose checkpoint is found (``--checkpoint``: only the task its model runs; else
each default run, :mod:`attnlab.labs.checkpoints`), the task's module explains its outputs
(:mod:`~attnlab.labs.explanations.captioner`, :mod:`~attnlab.labs.explanations.ntm`,
:mod:`~attnlab.labs.explanations.translator`) into a :class:`~attnlab.labs.explanations.tally.Tally`,
and the report puts them in one table: a row a method, the uniform and random baselines below,
per task the pointing game's hit rate and the mass measure, and which method points best.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlab.labs import alignment, captions, memory
from attnlab.labs.checkpoints import DefaultRun, find_checkpoints, model_type_of
from attnlab.labs.explanations import pictures
from attnlab.labs.explanations.tally import BASELINES, METHODS, Tally, key_of
from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions, LabReport
from attnlab.measure import machine
from attnlab.validation import counted

TITLE = "Explanations against ground truth: attention, rollout, flow, gradient × attention, IG"
SOURCE = ('Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"; Sundararajan, Taly & Yan '
          '2017, "Axiomatic Attribution for Deep Networks"; on the models of Ba (CSC413 Lecture 8)')


@dataclass(frozen=True)
class Settings:
    """How much each task explains: ``sequences`` NTM sequences, the first ``sentences``
    Multi30k sources (``None``: all of the test and validation splits) and ``steps`` points of
    integrated gradients' integral. The captioner reads all its test scenes (the first 8 in
    quick mode, :data:`attnlab.labs.captions.QUICK_SCENES`)."""

    sequences: int
    sentences: int | None
    steps: int


FULL = Settings(sequences=50, sentences=None, steps=32)
QUICK = Settings(sequences=2, sentences=6, steps=4)


@dataclass(frozen=True)
class Part:
    """A task of the lab: its name, the runs it reads by default and their model types."""

    name: str
    defaults: tuple[DefaultRun, ...]
    model_types: tuple[str, ...]


PARTS = (
    Part("captioner", captions.DEFAULTS, ("show_attend_tell",)),
    Part("ntm", memory.DEFAULTS, ("ntm",)),
    Part("translator", alignment.DEFAULTS, ("attention_seq2seq", "transformer")),
)
COLUMNS = {  # model type → (its column title, the pointing game's truth, the mass measure)
    "show_attend_tell": ("captioner (number words)", "cell in the digit's box", "mass in the box"),
    "ntm": ("NTM (answers)", "the written location", "overlap with the write weighting"),
    "transformer": ("Transformer (copied words)", "the copied source word", "mass on it"),
    "attention_seq2seq": ("Bahdanau RNN (copied words)", "the copied source word", "mass on it"),
}


def _found(options: LabOptions) -> tuple[list[tuple[Part, Path]], list[str]]:
    """Each task's checkpoints, and why the others cannot run."""
    found, missing = [], []
    for part in PARTS:
        try:
            found += [(part, c) for c in find_checkpoints("explanations", options, part.defaults,
                                                          part.model_types, every=True)]
        except LabUnavailable as why:
            missing.append(str(why))
    if not found:
        raise LabUnavailable("; ".join(missing))
    return found, [] if options.checkpoint else missing


def _explain(part: Part, checkpoint: Path, options: LabOptions, settings: Settings,
             out_dir: Path) -> list[tuple[str, Tally, Path | None]]:
    """Run one task: its tallies (a translator: all copied words, then names and numbers)
    with the picture drawn from its example."""
    from attnlab.labs.explanations.captioner import explain_captioner
    from attnlab.labs.explanations.ntm import explain_ntm
    from attnlab.labs.explanations.translator import explain_translator

    kind = model_type_of(checkpoint)
    tally = Tally(kind)
    if part.name == "captioner":
        example = explain_captioner(checkpoint, options, tally, settings.steps)
        path = _draw(pictures.draw_captioner, example, out_dir / "explanations_captioner.png")
        return [(kind, tally, path)]
    if part.name == "ntm":
        example = explain_ntm(checkpoint, options, tally, settings.steps, settings.sequences)
        return [(kind, tally, _draw(pictures.draw_memory, example, out_dir / "explanations_ntm.png"))]
    named = Tally(f"{kind} names and numbers")
    found = explain_translator(checkpoint, options, (tally, named), settings.steps, settings.sentences)
    path = _draw(pictures.draw_translation, found, out_dir / f"explanations_{kind}.png")
    return [(kind, tally, path), (named.task, named, None)]


def _draw(draw: Callable, example, path: Path) -> Path | None:
    ready = example is not None and (not hasattr(example, "words") or example.words)
    return draw(example, path) if ready else None


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Explain every task found, write the table, the pictures and the completeness check."""
    out_dir = Path(out_dir)
    settings = QUICK if options.quick else FULL
    report = LabReport("explanations", TITLE, SOURCE)
    found, missing = _found(options)
    results, seconds = [], []
    for part, checkpoint in found:
        start = time.perf_counter()
        results += [(checkpoint, *r) for r in _explain(part, checkpoint, options, settings, out_dir)]
        seconds.append((model_type_of(checkpoint), time.perf_counter() - start))
    _report(report, results, missing, settings, out_dir)
    _machine(report, seconds)
    return report


def _machine(report: LabReport, seconds: list[tuple[str, float]]) -> None:
    """Where it ran and how long each task took."""
    threads = torch.get_num_threads()
    for kind, s in seconds:
        report.number(f"{kind}_seconds", s)
    times = ", ".join(f"{_title(kind)} {s / 60:.1f} min" for kind, s in seconds)
    where = f"{machine.cpu_model()}, torch {torch.__version__}, {counted(threads, 'thread')}"
    report.text(f"Ran on {where}: {times}.")


def _report(report: LabReport, results: list, missing: list[str], settings: Settings,
            out_dir: Path) -> None:
    """The two tables (tasks × methods and baselines), the best methods, the numbers, the chart of
    the pointing game and the pictures."""
    tallies = [(checkpoint, tally) for checkpoint, _, tally, _ in results]
    headers = ["task", "cases", *METHODS, *BASELINES]
    for title, score in (("Pointing game", Tally.pointing), ("Mass on the truth", Tally.mass)):
        rows = [[_title(t.task), t.cases, *(score(t, m) if t.cases else "—" for m in METHODS + BASELINES)]
                for _, t in tallies]
        report.table(headers, rows, caption=f"**{title}** ({_CAPTIONS[title]})")
    report.text("Truth: " + "; ".join(f"{_title(t.task)}: {COLUMNS[_base(t.task)][1]}" for _, t in tallies
                                      if "names" not in t.task) + ".")
    for checkpoint, tally in tallies:
        _numbers(report, checkpoint, tally)
    report.text(_verdict(tallies, settings))
    if missing:
        report.text("Not run here: " + "; ".join(missing))
    scored = [(_title(t.task), {m: t.pointing(m) for m in METHODS + BASELINES})
              for _, t in tallies if t.cases]
    if scored:
        chart = pictures.draw_pointing(scored, out_dir / "explanations_pointing.png")
        report.figure(chart, "The pointing game of each method on each task, the uniform and random "
                             "baselines hatched")
    for _, kind, _, path in results:
        if path is not None:
            report.figure(path, f"{_title(kind)}, {EXAMPLES[kind]}: each method's positive relevance "
                                "beside the truth (ringed: the most relevant candidate, green when it is a "
                                "right one, red when not)")


EXAMPLES = {  # model type → which example its picture shows
    "show_attend_tell": "the first test scene with three named digits",
    "ntm": "the first test sequence's answer steps",
    "transformer": "the first copied word whose raw attention points elsewhere",
    "attention_seq2seq": "the first copied word whose raw attention points elsewhere",
}


_CAPTIONS = {
    "Pointing game": "the share of cases whose most relevant candidate is a right one; uniform: its expected "
                     "rate, |truth| / candidates",
    "Mass on the truth": "the share of the positive relevance on the right candidates; the captioner: "
                         "spread over each cell's pixels, inside the box; the NTM: overlap Σ min(p, w) with "
                         "the write weighting",
}


def _numbers(report: LabReport, checkpoint: Path, tally: Tally) -> None:
    key = tally.task.replace(" ", "_")
    for method in METHODS + BASELINES:
        report.number(f"{key}_pointing_{key_of(method)}", tally.pointing(method))
        report.number(f"{key}_mass_{key_of(method)}", tally.mass(method))
    report.number(f"{key}_cases", tally.cases)
    for name, value in tally.facts.items():
        report.number(f"{key}_{name}", value)
    report.number(f"{key}_checkpoint", str(checkpoint))
    if tally.deltas:
        report.number(f"{key}_ig_gap", sum(tally.gaps) / len(tally.gaps))
        report.number(f"{key}_ig_delta", sum(tally.deltas) / len(tally.deltas))


def _base(task: str) -> str:
    return task.removesuffix(" names and numbers")


def _title(task: str) -> str:
    base = _base(task)
    title = COLUMNS[base][0]
    return title.replace("(copied words)", "(copied names and numbers, training sentences too)") \
        if task != base else title


def _verdict(tallies: list, settings: Settings) -> str:
    lines = []
    for checkpoint, tally in tallies:
        if not tally.cases:
            lines.append(f"- {_title(tally.task)} ({checkpoint}): no case (no output whose source is known)")
            continue
        best = " and ".join(tally.best()) or "none"
        gap = (f" Integrated gradients ({settings.steps} steps): mean |Σ IG − (f(x) − f(x'))| "
               f"{sum(tally.gaps) / len(tally.gaps):.2g} against mean |f(x) − f(x')| "
               f"{sum(tally.deltas) / len(tally.deltas):.3g}." if tally.deltas else "")
        rate, uniform = tally.pointing(tally.best()[0]), tally.pointing("uniform")
        gap += "".join(f" {name.replace('_', ' ').capitalize()}: {v}." for name, v in tally.facts.items())
        common = ", ".join(f"{word} ×{n}" for word, n in tally.labels.most_common(8))
        words = f" The words most often copied: {common}." if common else ""
        lines.append(f"- {_title(tally.task)} ({checkpoint}, {tally.cases} cases): **{best}** points best "
                     f"({rate:.1%}; uniform {uniform:.1%}).{gap}{words}")
    return "Which method points best:\n\n" + "\n".join(lines)
