"""nanoGPT's own ``train.py`` on its README's CPU command against ``attnlab train``.

    git clone https://github.com/karpathy/nanoGPT /tmp/nanoGPT   # any checkout of it
    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/nanogpt_own.py --nanogpt /tmp/nanoGPT

The goal: nanoGPT's documented CPU run ("I only have a macbook" in its README: 4 layers,
4 heads, d = 128, block 64, batch 12, 2,000 iterations, dropout 0, ``--eval_iters=20``) trained
by ``attnlab train --config configs/shakespeare_nanogpt_cpu.toml`` in no more wall time than
nanoGPT's own script, with the loss kept ≤ 1.80. :mod:`nanogpt_cpu` compares against a
plain-PyTorch replica; this script runs nanoGPT's code itself, unchanged:

* a scratch directory gets a copy of the checkout's ``train.py``, ``model.py``,
  ``configurator.py``, ``config/`` and ``data/shakespeare_char/prepare.py``, plus the corpus
  from ``ATTNLAB_DATA`` as ``input.txt`` (``prepare.py`` downloads it only when it is missing;
  the ``requests`` module it imports is stubbed, so no network is touched);
* ``prepare.py`` writes ``train.bin`` / ``val.bin`` once; then, round by round and in alternating
  order, the README's command (:data:`README_COMMAND`) and ``attnlab train`` each run as a fresh
  process with the same environment (threads: torch's default, or ``--threads`` for both);
* both are timed as whole commands, start to exit (imports, data, evaluations, checkpoints);
* both models are scored the same way: the mean next-character loss over the **whole**
  validation split (the last 10 %) in non-overlapping 64-character windows
  (:func:`nanogpt_cpu.whole_split_loss`). nanoGPT's is its ``ckpt.pt`` (the checkpoint it keeps:
  its best 20-batch validation estimate), attnlab's the ``val_loss`` of ``results.json``.

Prints the machine, a row per run, and the paired ratio nanoGPT time / attnlab time of each round
(> 1: attnlab is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nanogpt_cpu import RECIPE, whole_split_loss  # noqa: E402

from attnlab.data import load_tinyshakespeare  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402

# nanoGPT's README, "I only have a macbook" (the command after its config file)
README_COMMAND = [
    "config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
    "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
    "--n_embd=128", "--max_iters=2000", "--lr_decay_iters=2000", "--dropout=0.0",
]
NANOGPT_FILES = ("train.py", "model.py", "configurator.py", "config",
                 "data/shakespeare_char/prepare.py")
NO_NETWORK = 'def get(*args, **kwargs):\n    raise RuntimeError("no network here")\n'


def prepare(checkout: Path, work: Path) -> None:
    """Copy nanoGPT's files into ``work`` and run its ``prepare.py`` there."""
    missing = [name for name in NANOGPT_FILES if not (checkout / name).exists()]
    if missing:
        raise SystemExit(f"--nanogpt {checkout} is not a nanoGPT checkout: no {', '.join(missing)}")
    for name in NANOGPT_FILES:
        source, target = checkout / name, work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    data = work / "data" / "shakespeare_char"
    (data / "input.txt").write_text(load_tinyshakespeare(), encoding="utf-8")
    (work / "stub").mkdir()
    (work / "stub" / "requests.py").write_text(NO_NETWORK)
    subprocess.run([sys.executable, "prepare.py"], cwd=data, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(work / "stub")})


def run_nanogpt(work: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """nanoGPT's README command from ``work``: (seconds, whole-split val loss, its last estimate)."""
    out_dir = work / "out-shakespeare-char"
    shutil.rmtree(out_dir, ignore_errors=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "train.py", *README_COMMAND], cwd=work, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"nanoGPT's train.py failed:\n{done.stderr[-2000:]}")
    estimates = re.findall(r"step \d+: train loss [\d.]+, val loss ([\d.]+)", done.stdout)
    return seconds, nanogpt_val_loss(work, out_dir / "ckpt.pt"), estimates[-1] if estimates else "?"


class FullLogits(nn.Module):
    """nanoGPT's ``GPT`` returns every position's logits only when given targets."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(idx, idx)[0]  # (B, n, V); its loss against idx is not used


def nanogpt_val_loss(work: Path, ckpt_path: Path) -> float:
    """Whole-split val loss of nanoGPT's checkpoint, with its own ``model.py``."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", work / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its parameter count
        model = module.GPT(module.GPTConfig(**ckpt["model_args"]))
    state = {k.removeprefix("_orig_mod."): v for k, v in ckpt["model"].items()}
    model.load_state_dict(state)
    val = np.fromfile(work / "data" / "shakespeare_char" / "val.bin", dtype=np.uint16)
    return whole_split_loss(FullLogits(model).eval(), torch.from_numpy(val.astype(np.int64)))


def run_attnlab(work: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """``attnlab train`` on the recipe: (whole-command seconds, val loss, its training seconds)."""
    run_dir = work / "attnlab_run"
    shutil.rmtree(run_dir, ignore_errors=True)
    cli = Path(sys.executable).with_name("attnlab")
    start = time.perf_counter()
    done = subprocess.run([str(cli), "train", "--config", str(RECIPE), "--run-dir", str(run_dir),
                           "train.progress=false"], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"attnlab train failed:\n{done.stderr[-2000:]}")
    results = json.loads((run_dir / "results.json").read_text())
    return seconds, results["val_loss"], results["wall_time_s"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nanogpt", type=Path, required=True, help="a nanoGPT checkout")
    p.add_argument("--rounds", type=int, default=2, help="rounds, each running both once")
    p.add_argument("--threads", type=int, help="OMP_NUM_THREADS for both (default: torch's)")
    args = p.parse_args(argv)
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        prepare(args.nanogpt.resolve(), work)
        env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
        print("| round | run | whole command s | whole-split val loss | note |")
        print("|---:|---|---:|---:|---|")
        ratios = []
        for r in range(1, args.rounds + 1):
            times = {}
            for name in ("nanogpt", "attnlab") if r % 2 else ("attnlab", "nanogpt"):
                if name == "nanogpt":
                    seconds, loss, estimate = run_nanogpt(work, env)
                    note = f"its own 20-batch val estimate {estimate}"
                    label = "nanoGPT `train.py` (README command)"
                else:
                    seconds, loss, trained = run_attnlab(work, env)
                    note = f"training {trained:.1f} s"
                    label = "`attnlab train` (recipe)"
                times[name] = seconds
                print(f"| {r} | {label} | {seconds:.1f} | {loss:.4f} | {note} |", flush=True)
            ratios.append(times["nanogpt"] / times["attnlab"])
        print(f"\nnanoGPT time / attnlab time, per round: "
              f"{', '.join(f'{x:.2f}×' for x in ratios)}; median **{statistics.median(ratios):.2f}×** "
              "(> 1: attnlab is faster)")


if __name__ == "__main__":
    sys.exit(main())
