"""Seconds a training step of each speech recipe takes, on real batches of the synthetic
corpus, and what that makes of the recipe's ``train.max_steps``.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/speech_steps.py \
        [configs/speech_las.toml ...] [--utterances 64] [--steps 6] [--threads 1]

For each recipe: its model at the recipe's size (the characters' vocabulary), ``--utterances``
training utterances of its corpus (spoken into the cache first if missing; the recipe's seed,
so they are its own first training utterances) in its training batches with SpecAugment, and
``--steps`` optimizer steps after one warm-up step (forward, backward, clipping, Adam). Prints
the machine, each recipe's parameters, the mean frames and characters of a batch, the median
seconds a step and the estimate ``max_steps x median`` of the training time (evaluation and the
final decoding not included). Needs Debian's espeak-ng (``make data-speech``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from attnlab.data.speech import LogMel, SpeechSet, synthetic_speech  # noqa: E402
from attnlab.data.tokenizers import CharTokenizer  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.tasks import load_recipe  # noqa: E402
from attnlab.tasks.speech import ALPHABET, SpeechRecipe, speech_loss  # noqa: E402

CONFIGS = ["configs/speech_las.toml", "configs/speech_location.toml", "configs/speech_transformer.toml"]


def time_recipe(path: str, utterances: int, steps: int) -> str:
    recipe = SpeechRecipe.from_dict(load_recipe(ROOT / path))
    d = recipe.data
    sizes = [max(utterances, 1), *d.sizes[1:]]
    corpus = synthetic_speech(dataclasses.replace(d.synthetic(), sizes=tuple(sizes)), progress=True)
    tok = CharTokenizer(ALPHABET)
    train = SpeechSet.from_corpus(corpus, corpus["train"], LogMel(n_mels=d.n_mels), tok)
    torch.manual_seed(0)
    model = recipe.model.build_model(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = list(train.batches(d.batch_size, shuffle=True, seed=d.seed, augment=d.specaugment()))
    seconds, frames, chars = [], [], []
    for k in range(steps + 1):
        batch = batches[k % len(batches)]
        start = time.perf_counter()
        loss, count = speech_loss(model, batch, tok.pad_id, recipe.optim.label_smoothing)
        (loss / count).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.train.clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if k:  # the first step warms up
            seconds.append(time.perf_counter() - start)
            frames.append(int(batch.lengths.sum()) / len(batch.lengths))
            chars.append(int(count) / len(batch.lengths))
    median = statistics.median(seconds)
    minutes = median * recipe.train.max_steps / 60
    return (f"{path}: {model.num_parameters():,} parameters, batch {d.batch_size} x "
            f"{statistics.mean(frames):.0f} frames / {statistics.mean(chars):.0f} characters: "
            f"{median:.2f} s/step (median of {steps}); {recipe.train.max_steps} steps = {minutes:.0f} min")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=CONFIGS)
    parser.add_argument("--utterances", type=int, default=64)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(_machine.header(), flush=True)
    for path in args.configs:
        print(time_recipe(path, args.utterances, args.steps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
