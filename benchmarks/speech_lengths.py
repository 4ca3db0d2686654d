"""Character error rate by utterance length, and the real-time factor of decoding, for trained
recognizers: the long-utterance test of Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015),
"Attention-Based Models for Speech Recognition" §3 (Hasegawa-Johnson, ECE 417 Lecture 21).

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/speech_lengths.py \
        content=runs/speech_las/final location=runs/speech_location/final \
        [--factors 1 2 3 4] [--count 40] [--beam 4] [--seed 0] [--threads 1] \
        [--out-dir runs/speech_lengths]

Each ``NAME=CHECKPOINT`` is a recognizer trained on a synthetic corpus; the first one's corpus
gives the test utterances (:func:`attnlab.data.speech.longer_utterances`): for each factor,
``--count`` utterances joining that many distinct held-out test sentences (or digit strings
that many times as long), spoken by the held-out test voices, the same utterances for every
recognizer. Each is decoded with the checkpoint's own ``[eval]`` settings (beam ``--beam``).
Prints the machine, then for each recognizer and factor: mean seconds of audio, CER, WER and
the real-time factor (seconds to read, featurize and decode / seconds of audio, one process,
``--threads`` threads).
Writes ``results.json``, ``cer_by_length.png`` and, for the first utterance of each factor,
each recognizer's alignment (of its own transcript) over the spectrogram,
``alignment_<NAME>_x<FACTOR>.png``. Needs Debian's espeak-ng (``make data-speech``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from attnlab.atomic import write_atomic
from attnlab.data.speech import longer_utterances
from attnlab.evaluation import cer, wer
from attnlab.measure import machine as _machine
from attnlab.pipelines import SpeechPipeline
from attnlab.tasks.base import load_saved_recipe
from attnlab.tasks.speech import SpeechRecipe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _figures import line_chart  # noqa: E402


def named_checkpoints(pairs: list[str]) -> dict[str, Path]:
    """``NAME=PATH`` arguments as a dict, each path checked."""
    found = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not Path(path).is_dir():
            raise SystemExit(f"expected NAME=CHECKPOINT_DIR, got {pair!r}")
        found[name] = Path(path)
    return found


def score(recognizer: SpeechPipeline, paths: list[Path], texts: list[str], seconds: float,
          beam: int) -> tuple[dict, list, list[list[int]]]:
    """CER, WER and the real-time factor (reading the WAV files, their log-mel features and
    decoding) of ``recognizer`` on one factor's utterances; their features and transcripts."""
    decoding = recognizer.settings(beam_size=beam)
    start = time.perf_counter()
    features = recognizer.features(paths)
    ids = recognizer.transcribe_ids(features, decoding, progress=True)
    spent = time.perf_counter() - start
    hyps = [recognizer.tokenizer.decode(i) for i in ids]
    c, w = cer(hyps, texts), wer(hyps, texts)
    row = {"cer": c.rate, "wer": w.rate, "cer_detail": str(c), "decode_s": round(spent, 2),
           "audio_s": round(seconds, 2), "rtf": spent / seconds,
           "samples": [{"reference": r, "hypothesis": h} for r, h in list(zip(texts, hyps, strict=True))[:2]]}
    return row, features, ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="NAME=CHECKPOINT_DIR")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=Path("runs/speech_lengths"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    checkpoints = named_checkpoints(args.checkpoints)
    recognizers = {name: SpeechPipeline.from_checkpoint(path) for name, path in checkpoints.items()}
    corpus_config = load_saved_recipe(next(iter(checkpoints.values())), SpeechRecipe).data.synthetic()
    print(_machine.header(), flush=True)
    results: dict = {"corpus": str(corpus_config), "count": args.count, "beam": args.beam, "by_name": {}}
    for factor in args.factors:
        corpus = longer_utterances(corpus_config, factor, args.count, seed=args.seed, progress=True)
        utterances = corpus["test"]
        seconds = sum(len(corpus.audio(u)) for u in utterances) / corpus.sample_rate
        texts = [u.text for u in utterances]
        for name, recognizer in recognizers.items():
            row, features, ids = score(recognizer, [u.path for u in utterances], texts, seconds, args.beam)
            results["by_name"].setdefault(name, {})[str(factor)] = row
            picture = recognizer.plot_attention(features[0], ids[0],
                                                args.out_dir / f"alignment_{name}_x{factor}.png")
            print(f"{name:>12} x{factor}: {seconds / len(texts):5.1f} s an utterance | CER "
                  f"{100 * row['cer']:6.2f} % | WER {100 * row['wer']:6.2f} % | real-time factor "
                  f"{row['rtf']:.3f} | {picture}", flush=True)
    curves = {name: ([int(f) for f in rows], [100 * r["cer"] for r in rows.values()])
              for name, rows in results["by_name"].items()}
    unit = "digit strings" if corpus_config.text == "digits" else "sentences"
    chart = line_chart(curves, args.out_dir / "cer_by_length.png", ylabel="CER (%)",
                       xlabel=f"utterance length (x the training {unit})",
                       title=f"CER by length: {args.count} utterances each, held-out voices",
                       xticks=(args.factors, [f"{f}x" for f in args.factors]))
    path = write_atomic(args.out_dir / "results.json", json.dumps(results, indent=2) + "\n")
    print(f"results: {path}\nchart: {chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
