"""Bahdanau's alignment from a trained translator: where each output word looks in the source
(Ba (CSC413 Lecture 8), "Attention-Based Machine Translation": "Nothing forces the model to go
linearly through the input sentence, but somehow it learns to do it"; Bahdanau et al. 2015,
Figure 3).

The lab translates Multi30k test sentences (the split and language pair of the checkpoint's
``recipe.json``, decoded with its beam settings; greedily in quick mode), reads back the
encoder-decoder attention of each translation (:meth:`TranslationPipeline.attention`: an RNN decoder's
alignment ``α_ij``, or each layer of a Transformer's cross-attention, averaged over its heads)
and measures **how diagonal** it is: the **diagonal mass**, the share of each output word's
attention within ±1 source position of the monotone diagonal (the line from the first source
and output tokens to the last ones; :func:`~attnlab.labs.pattern_scores.diagonal_mass`),
averaged over the words of a sentence, then over the sentences. Beside it stands what
uniform attention would put in the same band, the number to beat. The pictures are
:meth:`TranslationPipeline.plot_attention` (``attnlab plot-alignment``) for the first sentences.

Checkpoints: ``--checkpoint``, else every one of runs/multi30k_bahdanau (Bahdanau's RNN) and
runs/demo (a Transformer) that exists; the first one's numbers are the headline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnlab.labs.checkpoints import DefaultRun, corpora_needed, find_checkpoints
from attnlab.labs.pattern_scores import diagonal_mass
from attnlab.labs.report import LabOptions, LabReport
from attnlab.validation import counted

TITLE = "Alignment: where each output word looks in the source sentence"
SOURCE = 'Ba (CSC413 Lecture 8), "Attention-Based Machine Translation"'
DEFAULTS = (
    DefaultRun("runs/multi30k_bahdanau", "attnlab train --config configs/multi30k_bahdanau.toml"),
    DefaultRun("runs/demo", "make demo"),
)
MODEL_TYPES = ("attention_seq2seq", "transformer")
BAND = 1  # source positions either side of the monotone diagonal
SENTENCES = {False: 100, True: 3}  # quick → how many test sentences
PICTURES = {False: 3, True: 1}


@dataclass
class Aligned:
    """One translated sentence and its alignment in every layer: ``layers[l]`` is ``(H, T, S)``."""

    source: str
    translation: str
    layers: list[Tensor]


def align(translator, sources: list[str], decoding, progress: bool = False) -> list[Aligned]:
    """Translate ``sources`` with ``decoding`` and read back each translation's alignment in
    every decoder layer (:meth:`~attnlab.pipelines.TranslationPipeline.attention`)."""
    from attnlab.progress import progress as bar

    hyps = translator.translate(sources, decoding)
    out = []
    for source, hyp in bar(list(zip(sources, hyps, strict=True)), desc="alignments", enabled=progress):
        out.append(Aligned(source, hyp, list(translator.attention(source, hyp).weights)))
    return out


def layer_diagonal_mass(sentences: list[Aligned], layer: int) -> tuple[float, float]:
    """The diagonal mass (±:data:`BAND`) of the head-mean alignment of ``layer``, averaged over
    the output words of each sentence and then over the sentences, and the same for uniform
    attention over each sentence's source."""
    ours, uniform = [], []
    for s in sentences:
        w = s.layers[layer].double().mean(dim=0)  # (T, S), rows sum to 1
        ours.append(float(diagonal_mass(w, BAND).mean()))
        uniform.append(float(diagonal_mass(torch.full_like(w, 1.0 / w.shape[1]), BAND).mean()))
    return sum(ours) / len(ours), sum(uniform) / len(uniform)


def head_diagonal_mass(sentences: list[Aligned], layer: int) -> list[float]:
    """Each head's diagonal mass in ``layer`` (averaged as in :func:`layer_diagonal_mass`)."""
    heads = sentences[0].layers[layer].shape[0]
    per = [[float(diagonal_mass(s.layers[layer][h], BAND).mean()) for s in sentences] for h in range(heads)]
    return [sum(p) / len(p) for p in per]


def _test_sources(recipe: dict, count: int, data_dir: str | None) -> tuple[list[str], str]:
    from attnlab.data import load_multi30k

    data, ev = recipe.get("data", {}), recipe.get("eval", {})
    if "src_lang" not in data or "tgt_lang" not in data:
        raise ValueError("the checkpoint's recipe.json names no language pair (data.src_lang, data.tgt_lang)")
    split = ev.get("test_split", "test_2016_flickr")
    with corpora_needed("alignment"):
        pairs = load_multi30k(split, data["src_lang"], data["tgt_lang"], data_dir)
    return [s for s, _ in pairs[:count]], f"{split} {data['src_lang']}→{data['tgt_lang']}"


def _one_checkpoint(
    checkpoint: Path, out_dir: Path, options: LabOptions, report: LabReport, headline: bool
) -> None:
    from attnlab.pipelines import TranslationPipeline

    translator = TranslationPipeline.from_checkpoint(checkpoint, device=options.device)
    kind = translator.model.model_type
    sources, where = _test_sources(translator.recipe, SENTENCES[options.quick], options.data_dir)
    decoding = translator.settings(beam_size=1 if options.quick else None)
    sentences = align(translator, sources, decoding, progress=options.progress and not options.quick)
    rows = []
    for layer in range(len(sentences[0].layers)):
        mass, uniform = layer_diagonal_mass(sentences, layer)
        heads = head_diagonal_mass(sentences, layer)
        rows.append([layer + 1, mass, uniform, ", ".join(f"{h:.3f}" for h in heads)])
        report.number(f"diagonal_mass_{kind}_layer_{layer + 1}", mass)
    mass, uniform = layer_diagonal_mass(sentences, -1)
    report.number(f"diagonal_mass_{kind}", mass)
    report.number(f"uniform_band_mass_{kind}", uniform)
    if headline:
        report.number("model_type", kind)
        report.number("checkpoint", str(checkpoint))
        report.number("sentences", len(sentences))
        report.number("translations", [[s.source, s.translation] for s in sentences])
        report.number("diagonal_mass", mass)
        report.number("uniform_band_mass", uniform)
    beam = "greedy" if decoding.beam_size == 1 else f"beam {decoding.beam_size}"
    report.text(
        f"## {kind} ({checkpoint})\n\n{counted(len(sentences), 'sentence')} of {where}, decoded {beam}. "
        f"Diagonal mass (attention within ±{BAND} source position of the monotone diagonal) of the last "
        "layer: "
        f"**{mass:.3f}**, against **{uniform:.3f}** for uniform attention."
    )
    report.table(["decoder layer", "diagonal mass (mean of heads)", "uniform attention", "each head"], rows)
    for i, s in enumerate(sentences[:PICTURES[options.quick]]):
        path = translator.plot_attention(s.source, s.translation, out_dir / f"alignment_{kind}_{i}.png")
        report.figure(path, f"{kind}: {s.source} → {s.translation or '(empty)'}")


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Translate test sentences with each checkpoint found, measure and draw their alignment."""
    report = LabReport("alignment", TITLE, SOURCE)
    checkpoints = find_checkpoints("alignment", options, DEFAULTS, MODEL_TYPES, every=True)
    report.text(
        "Each output word's attention over the source words (rows: output subwords and `<eos>`; "
        "columns: source subwords). Bahdanau et al. found the alignment runs mostly along the "
        "diagonal, with local reorderings (adjectives after nouns); the diagonal mass measures it."
    )
    for i, checkpoint in enumerate(checkpoints):
        _one_checkpoint(checkpoint, Path(out_dir), options, report, headline=i == 0)
    return report
