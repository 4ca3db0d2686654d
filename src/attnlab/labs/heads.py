"""Every layer × head of a trained model, drawn on one sentence, scored and marked (Li
(Transformer Part I), "Multi-head Attention": "we need multiple attention heads to learn these
multiple patterns"; Steinert-Threlkeld (Transformers I), "Attention Visualization: Coreference?").

* A Transformer translator (runs/demo): Multi30k test sentences and the model's own
  translations of them; its **encoder self-attention** (source × source), **decoder
  self-attention** (causal, decoder inputs ``<bos> y_1 …``) and **cross-attention** (decoder
  inputs × source), each layer and head, read while the decoder is teacher-forced on the
  translation (as :meth:`~attnlab.pipelines.TranslationPipeline.attention`).
* A GPT (runs/compare_lms/shakespeare_nanogpt_cpu_steps): lines of the tinyshakespeare
  validation text; its causal self-attention.

The pictures show the first sentence (line); the scores are the mean over :data:`INPUTS` of
them (one in quick mode). Every head gets the scores of :mod:`attnlab.labs.pattern_scores`,
defined there exactly: **entropy** (mean over the query rows of ``H_i = −Σ_j α_ij ln α_ij``
nats, beside the mean ``ln |K_i|`` of uniform attention over the visible keys, and their
ratio), the **previous-token score** (mean weight ``α_{i, i−1}`` on the position one back;
self-attention only) and the **diagonal score** (mean weight on the position itself, ``α_ii``;
for cross-attention on the monotone diagonal). A head is marked "previous-token" or "diagonal"
when that mean score holds at least half the weight. Rows with a single visible key are left out.

The Transformer's stacks return their weights when asked (``return_weights``);
:func:`~attnlab.explain.recording.recording_attention` asks them during an ordinary ``encode`` /
``decode``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnlab.explain.recording import recording_attention
from attnlab.labs.checkpoints import DefaultRun, corpora_needed, find_checkpoints, model_type_of
from attnlab.labs.pattern_scores import MARK_AT, HeadScores, head_scores
from attnlab.labs.report import LabOptions, LabReport
from attnlab.validation import counted

TITLE = "Heads: what every layer × head attends to"
SOURCE = ('Li (Transformer Part I), "Multi-head Attention"; '
          'Steinert-Threlkeld (Transformers I), "Attention Visualization: Coreference?"')
GPT_RUN = "runs/compare_lms/shakespeare_nanogpt_cpu_steps"
DEFAULTS = (
    DefaultRun("runs/demo", "make demo"),
    DefaultRun(GPT_RUN, f"attnlab train --config configs/shakespeare_nanogpt_cpu.toml --run-dir {GPT_RUN}"),
)
MODEL_TYPES = ("transformer", "gpt")
LINE_CHARACTERS = {False: (30, 48), True: (12, 20)}  # quick → the GPT's lines, shortest and longest
INPUTS = {False: 50, True: 1}  # quick → sentences (lines) scored; the pictures show the first


@dataclass
class AttentionKind:
    """One kind of attention of one model on one input: ``layers[l]`` is ``(H, n_q, n_k)``,
    labelled by ``queries`` and ``keys``."""

    key: str  # "encoder", "decoder", "cross", "self"
    name: str
    layers: list[Tensor]
    queries: list[str]
    keys: list[str]
    causal: bool
    self_attention: bool

    def scores(self) -> list[list[HeadScores]]:
        """:func:`head_scores` of every layer: ``[layer][head]``."""
        return [head_scores(w, causal=self.causal, self_attention=self.self_attention) for w in self.layers]


Sample = tuple[list[AttentionKind], dict[str, str]]  # one input: its kinds of attention, what it was


def translator_attention(checkpoint: Path, options: LabOptions) -> list[Sample]:
    """The three kinds of attention of a Transformer translator on the first test sentences of
    its recipe's split (:data:`INPUTS`), each teacher-forced on the model's own translation;
    with each its ``source`` and ``translation``."""
    from attnlab.data import load_multi30k
    from attnlab.pipelines import TranslationPipeline

    translator = TranslationPipeline.from_checkpoint(checkpoint, device=options.device)
    recipe = translator.recipe
    data, split = recipe.get("data", {}), recipe.get("eval", {}).get("test_split", "test_2016_flickr")
    with corpora_needed("heads"):
        pairs = load_multi30k(split, data.get("src_lang", "de"), data.get("tgt_lang", "en"), options.data_dir)
    sources = [s for s, _ in pairs[:INPUTS[options.quick]]]
    decoding = translator.settings(beam_size=1 if options.quick else None)
    translations = translator.translate(sources, decoding)
    return [_translator_sample(translator, s, t) for s, t in zip(sources, translations, strict=True)]


def _translator_sample(translator, source: str, translation: str) -> Sample:
    model = translator.model
    with recording_attention(model.encoder, model.decoder) as (encoder, decoder):
        found = translator.attention(source, translation)
    src, inputs = found.source, ["<bos>", *found.target[:-1]]
    first = [w[0].float().cpu() for w in encoder[0]]  # (H, S, S) per layer
    self_w = [pair[0][0].float().cpu() for pair in decoder[0]]  # (H, T, T)
    cross = [pair[1][0].float().cpu() for pair in decoder[0]]  # (H, T, S)
    kinds = [
        AttentionKind("encoder", "encoder self-attention", first, src, src, False, True),
        AttentionKind("decoder", "decoder self-attention (causal)", self_w, inputs, inputs, True, True),
        AttentionKind("cross", "cross-attention (decoder inputs × source)", cross, inputs, src, False, False),
    ]
    return kinds, {"source": source, "translation": translation}


def gpt_attention(checkpoint: Path, options: LabOptions) -> list[Sample]:
    """A GPT's causal self-attention on the first lines of the tinyshakespeare validation text
    of :data:`LINE_CHARACTERS` (:data:`INPUTS` of them), each with its ``line``."""
    from attnlab.data import load_tinyshakespeare
    from attnlab.pipelines import LanguageModelPipeline
    from attnlab.tasks.language_model import split_text

    pipeline = LanguageModelPipeline.from_checkpoint(checkpoint, device=options.device)
    fraction = pipeline.recipe.get("data", {}).get("train_fraction", 0.9)
    with corpora_needed("heads"):
        _, val_text = split_text(load_tinyshakespeare(options.data_dir), fraction)
    shortest, longest = LINE_CHARACTERS[options.quick]
    lines = [line.strip() for line in val_text.splitlines() if shortest <= len(line.strip()) <= longest]
    samples = []
    for line in lines[:INPUTS[options.quick]]:
        found = pipeline.attention(line)
        layers, labels = list(found.weights), found.tokens  # (H, n, n) per layer
        samples.append(([AttentionKind("self", "causal self-attention", layers, labels, labels, True, True)],
                         {"line": line}))
    return samples


def mean_scores(per_input: list[list[list[HeadScores]]]) -> list[list[HeadScores]]:
    """Each score of each ``[layer][head]`` averaged over the inputs (each input weighs the same)."""
    def mean(values: list) -> float | None:
        return None if values[0] is None else sum(values) / len(values)

    return [
        [HeadScores(**{f.name: mean([getattr(grid[layer][h], f.name) for grid in per_input])
                       for f in dataclasses.fields(HeadScores)})
         for h in range(len(per_input[0][layer]))]
        for layer in range(len(per_input[0]))
    ]


def _panel_title(layer: int, head: int, s: HeadScores) -> str:
    marks = f"\n{' + '.join(s.marks)}" if s.marks else ""
    return f"L{layer + 1} H{head + 1}: {s.entropy:.2f}/{s.max_entropy:.2f} nats{marks}"


def plot_kind(kind: AttentionKind, scores: list[list[HeadScores]], path: Path, title: str) -> Path:
    """Every layer (rows) × head (columns) of ``kind`` on one colour scale, each panel titled
    with its entropy against uniform attention's and its marks."""
    from attnlab.visualize import plot_attention_heads

    heads = kind.layers[0].shape[0]
    titles = [_panel_title(layer, h, s) for layer, row in enumerate(scores) for h, s in enumerate(row)]
    return plot_attention_heads(
        torch.cat(kind.layers), path, x_labels=kind.keys, y_labels=kind.queries, title=title,
        ncols=heads, panel_titles=titles,
    )


def _record(report: LabReport, model: str, kind: AttentionKind, scores: list[list[HeadScores]]) -> list[list]:
    """Record ``kind``'s scores as numbers ``MODEL.KIND.SCORE`` (``[layer][head]``); table rows."""
    for field in ("entropy", "max_entropy", "normalised_entropy", "previous", "diagonal"):
        report.number(f"{model}.{kind.key}.{field}", [[getattr(s, field) for s in row] for row in scores])
    rows = []
    for layer, row in enumerate(scores):
        for h, s in enumerate(row):
            rows.append([kind.name, f"L{layer + 1} H{h + 1}", s.entropy, s.max_entropy, s.normalised_entropy,
                         "—" if s.previous is None else s.previous, s.diagonal, ", ".join(s.marks) or "—"])
    return rows


def _one_model(checkpoint: Path, out_dir: Path, options: LabOptions, report: LabReport) -> None:
    model = model_type_of(checkpoint)
    read = translator_attention if model == "transformer" else gpt_attention
    samples = read(checkpoint, options)
    report.number(f"{model}.inputs", [inputs for _, inputs in samples])
    shown, first = samples[0]
    described = "  \n".join(f"{name}: {text}" for name, text in first.items())
    report.text(f"## {model} ({checkpoint})\n\nScores averaged over {counted(len(samples), 'input')}; "
                f"the pictures show the first:  \n{described}")
    rows, heads = [], []  # table rows; (label, scores) of every head
    for index, kind in enumerate(shown):
        scores = mean_scores([kinds[index].scores() for kinds, _ in samples])
        rows += _record(report, model, kind, scores)
        heads += [(f"{kind.key} L{layer + 1} H{h + 1}", s) for layer, row in enumerate(scores)
                  for h, s in enumerate(row)]
        path = out_dir / f"heads_{model}_{kind.key}.png"
        plot_kind(kind, kind.scores(), path, f"{model}: {kind.name}")
        report.figure(path, f"{model}, {kind.name}: every layer (rows) × head (columns), first input")
    report.number(f"{model}.tokens", {kind.key: [kind.queries, kind.keys] for kind in shown})
    report.table(["attention", "head", "entropy (nats)", "uniform (ln of visible keys)", "entropy / uniform",
                  "previous-token", "diagonal", "marked"], rows)
    report.text(_marked(report, model, heads))


def _marked(report: LabReport, model: str, heads: list[tuple[str, HeadScores]]) -> str:
    """Record the marked heads and the strongest head of each score; the sentence saying so."""
    parts = []
    for mark, score in (("previous-token", "previous"), ("diagonal", "diagonal")):
        marked = [label for label, s in heads if mark in s.marks]
        label, best = max(((label, getattr(s, score)) for label, s in heads if getattr(s, score) is not None),
                          key=lambda pair: pair[1])
        report.number(f"{model}.{mark}_heads", marked)
        report.number(f"{model}.strongest_{score}", [label, best])
        parts.append(f"{mark}: {', '.join(marked) or 'none'} (strongest {label}, {best:.3f})")
    return f"Marked heads (mean score ≥ {MARK_AT}) — " + "; ".join(parts) + "."


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Draw and score every head of each checkpoint found (a translator, a GPT)."""
    report = LabReport("heads", TITLE, SOURCE)
    report.text(
        "Scores per head, as defined in `attnlab.labs.pattern_scores`: entropy of each query's "
        "distribution in nats (beside ln of its number of visible keys, the entropy of uniform "
        "attention), the previous-token score (mean weight on position i−1), the diagonal score "
        "(mean weight on position i; for cross-attention on the monotone diagonal). Rows with one "
        "visible key are left out."
    )
    for checkpoint in find_checkpoints("heads", options, DEFAULTS, MODEL_TYPES, every=True):
        _one_model(checkpoint, Path(out_dir), options, report)
    return report
