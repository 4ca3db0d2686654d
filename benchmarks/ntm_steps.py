"""Seconds a training step of an NTM recipe takes at several batch sizes, on a device, and
how many steps a time budget buys at each.

    .venv/bin/python benchmarks/ntm_steps.py [configs/ntm_priority_sort.toml] \
        [key=value ...] [--batches 32 256 1024] [--steps 5] [--device cuda] [--budget 400]

The recipe's model (overrides as ``attnlab train`` takes them, e.g. ``data.keep=16``) on
``--device``; for each batch size, ``--steps`` optimizer steps (the paper's cost per sequence
forward and backward, clipping, Adam) after two warm-up steps, on the recipe's own episodes at
its longest length. Prints the machine (and the GPU), each batch's median seconds a step and
sequences a second, and the steps ``--budget`` seconds buy. The last line is JSON
(``{"batch": seconds}``) for a script to read. An NTM step is thousands of small operations
(the heads address memory one time step at a time), so on a GPU its time hardly grows with
the batch until the GPU is busy: the larger batch is nearly free.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from attnlab.devices import to_device
from attnlab.measure import machine as _machine
from attnlab.tasks import load_recipe
from attnlab.tasks.algorithmic.recipe import AlgorithmicRecipe
from attnlab.tasks.algorithmic.task import draw_episode, sequence_cost

ROOT = Path(__file__).resolve().parents[1]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_batch(recipe: AlgorithmicRecipe, batch: int, steps: int, device: torch.device) -> float:
    """Median seconds of one optimizer step on ``batch`` sequences of the longest length."""
    torch.manual_seed(0)
    model = recipe.model.build_model().to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.optim.lr)
    generator = torch.Generator().manual_seed(recipe.data.seed)
    episode = draw_episode(recipe.data, batch, generator, length=recipe.data.max_length)
    episode = to_device(episode, device)
    seconds = []
    for k in range(steps + 2):
        _sync(device)
        start = time.perf_counter()
        loss, count = sequence_cost(model, episode)
        (loss / count).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.train.clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        if k >= 2:  # two steps warm up
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default="configs/ntm_priority_sort.toml")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, as attnlab train takes them")
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds of training to price")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(_machine.header(), flush=True)
    if device.type == "cuda":
        print(f"GPU: {torch.cuda.get_device_name(device)}", flush=True)
    recipe = AlgorithmicRecipe.from_dict(load_recipe(ROOT / args.config, args.overrides))
    d = recipe.data
    print(f"{args.config} {' '.join(args.overrides)}: {d.task}, length {d.max_length}, "
          f"{recipe.model.build_model().num_parameters():,} parameters, on {device}", flush=True)
    measured = {}
    for batch in args.batches:
        seconds = time_batch(recipe, batch, args.steps, device)
        measured[batch] = seconds
        print(f"batch {batch:>5}: {seconds:.3f} s/step (median of {args.steps}), "
              f"{batch / seconds:,.0f} sequences/s; {args.budget:.0f} s = "
              f"{int(args.budget / seconds):,} steps", flush=True)
    print(json.dumps(measured))
    return 0


if __name__ == "__main__":
    sys.exit(main())
