"""The synthetic speech corpus: how long eSpeak NG takes to speak it, how long the cache takes to
read, and how long the log-mel features take.

    ATTNLAB_DATA=../shared/data ATTNLAB_CACHE=$(mktemp -d) .venv/bin/python benchmarks/speech_data.py \
        [--sizes 200 25 25] [--seed 0] [--text multi30k]

Needs Debian's espeak-ng (``make data-speech``). Point ``ATTNLAB_CACHE`` at an empty folder to
time the synthesis from nothing (a cache that holds the corpus times only the reading). Prints
the machine, each split's utterances, texts and voices, the first test utterance and its
features' shape, then the seconds to speak the missing utterances, to read the whole corpus
again from the cache, and to compute the log-mel features of the training split.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from attnlab.data.speech import LogMel, SyntheticSpeechConfig, synthetic_speech  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs=3, default=[200, 25, 25],
                        metavar=("TRAIN", "VALID", "TEST"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text", default="multi30k", choices=["multi30k", "digits"])
    args = parser.parse_args(argv)
    print(_machine.header(), flush=True)
    config = SyntheticSpeechConfig(text=args.text, sizes=tuple(args.sizes), seed=args.seed)
    start = time.perf_counter()
    corpus = synthetic_speech(config, progress=True)
    spoken, synthesized = time.perf_counter() - start, corpus.info["synthesized"]
    start = time.perf_counter()
    corpus = synthetic_speech(config)
    again = time.perf_counter() - start
    print(corpus.summary())
    first = corpus["test"][0] if corpus["test"] else next(iter(corpus))
    x = torch.from_numpy(corpus.audio(first))
    print(f"{first.id} {first.text!r} {first.voice} rate {first.rate} pitch {first.pitch} "
          f"snr {first.snr_db} dB")
    print(f"waveform {tuple(x.shape)} -> log-mel {tuple(LogMel()(x).shape)}")
    start = time.perf_counter()
    front = LogMel()
    frames = sum(front(torch.from_numpy(corpus.audio(u))).shape[0] for u in corpus["train"])
    features = time.perf_counter() - start
    print(f"spoke {synthesized} of the {len(corpus)} utterances (the rest were in the cache) "
          f"in {spoken:.1f} s")
    print(f"read the corpus again from the cache in {again:.2f} s")
    print(f"log-mel of the {len(corpus['train'])} training utterances ({frames:,} frames, "
          f"{frames / 100 / 60:.1f} min of audio) in {features:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
