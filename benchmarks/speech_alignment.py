"""Monotone and not: a recognizer's alignment against a translator's, the ASR/MT table of
Hasegawa-Johnson's ECE 417 Lecture 21 ("output order is the same as input order in ASR, not in
MT"; Chorowski, Bahdanau, Serdyuk, Cho & Bengio 2015, Figure 1; Bahdanau, Cho & Bengio 2015,
Figure 3).

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/speech_alignment.py \
        --recognizer runs/speech_location/final --translator runs/multi30k_bahdanau/final \
        [--count 100] [--index 0] [--threads 1] [--out runs/speech_alignment/beside.png]

Decodes the first ``--count`` test utterances of the recognizer's corpus (held-out sentences,
held-out voices) and the first ``--count`` German sentences of Multi30k's test set (test_2016_flickr) with the
translator, reads back the alignment that wrote each output (teacher forcing on the model's
own output; a Transformer's last decoder layer, its heads' mean), and measures how monotone
each is: Spearman's ρ between the output position and the key of the largest weight, and the
share of output steps whose peak moves back, averaged over the outputs (``<eos>`` excluded).
Draws utterance ``--index`` beside sentence ``--index``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import Tensor

from attnlab.data.corpora import read_lines
from attnlab.data.multi30k import multi30k_file
from attnlab.data.speech import synthetic_speech
from attnlab.measure import machine as _machine
from attnlab.pipelines import SpeechPipeline, TranslationPipeline
from attnlab.tasks.algorithmic.sorting import spearman
from attnlab.tasks.base import load_saved_recipe
from attnlab.tasks.speech import SpeechRecipe
from attnlab.visualize import plot_speech_beside_translation


def monotony(weights: Tensor) -> tuple[float, float]:
    """Spearman ρ of (output step, peak key) and the share of steps whose peak moves back, for
    one alignment ``(T, S)`` without its ``<eos>`` row."""
    peaks = weights[:-1].argmax(-1).double()  # (T - 1,)
    if len(peaks) < 2:
        return float("nan"), float("nan")
    rho = float(spearman(torch.arange(len(peaks), dtype=torch.float64), peaks))
    return rho, float((peaks.diff() < 0).double().mean())


def summary(name: str, rows: list[tuple[float, float]]) -> str:
    rhos = torch.tensor([r for r, _ in rows]).nanmean()
    back = torch.tensor([b for _, b in rows]).nanmean()
    return (f"{name}: {len(rows)} outputs; mean Spearman rho {rhos:.3f}; "
            f"peak moving back on {100 * back:.1f} % of steps")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recognizer", type=Path, required=True)
    parser.add_argument("--translator", type=Path, required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/speech_alignment/beside.png"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(_machine.header(), flush=True)
    recognizer = SpeechPipeline.from_checkpoint(args.recognizer)
    corpus = synthetic_speech(load_saved_recipe(args.recognizer, SpeechRecipe).data.synthetic())
    features = recognizer.features([u.path for u in corpus["test"][:args.count]])
    heard = recognizer.transcribe_ids(features, progress=True)
    speech = [recognizer.attention(f, ids) for f, ids in zip(features, heard, strict=True)]
    print(summary(f"recognizer {args.recognizer}", [monotony(a.weights) for a in speech]), flush=True)

    translator = TranslationPipeline.from_checkpoint(args.translator)
    sources = read_lines(multi30k_file("test_2016_flickr", "de"))[:args.count]
    outputs = translator.translate(sources, progress=True)
    found = [translator.attention(s, t) for s, t in zip(sources, outputs, strict=True)]
    rows = [monotony(a.layer(-1).mean(0)) for a in found]
    print(summary(f"translator {args.translator}", rows), flush=True)

    i = args.index
    picture = plot_speech_beside_translation(
        features[i], speech[i].weights, speech[i].characters, reduction=recognizer.model.reduction,
        translation=found[i].layer(-1).mean(0), source=found[i].source, target=found[i].target, path=args.out,
        titles=(f"speech: {recognizer.tokenizer.decode(heard[i])!r}", f"translation: {outputs[i]!r}"))
    print(f"picture: {picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
