"""A tiny training run in its own process, for the tests that kill, signal or race it.

    python tests/reliability_worker.py RUN_DIR [--steps N] [--resume | --overwrite]
                                               [--kill-at POINT:K] [--sleep S] [--count-points FILE]

The run: the toy LM of ``training_toys`` through attnlab's Trainer, a checkpoint every 2 steps
(the last 2 kept), an evaluation every 2 steps whose "val_loss" (minus the step) always improves (so ``best/``
is replaced at every evaluation) and which rewrites ``RUN_DIR/results.json`` through
:func:`attnlab.atomic.write_atomic` (:func:`results_record`), metrics at every step.
``--kill-at POINT:K`` SIGKILLs the process the K-th time it reaches POINT, one of
:data:`POINTS` — places inside checkpoint and file writes and between steps.
``--count-points FILE`` writes how often each point is reached.
At the end it prints the final loss and writes ``RUN_DIR/final_state.pt`` (the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_toys  # noqa: E402
from attnlab import atomic, checkpoint  # noqa: E402
from attnlab.training import TrainConfig, Trainer  # noqa: E402
from attnlab.training import metrics as metrics_module  # noqa: E402
from attnlab.training import trainer as trainer_module  # noqa: E402

POINTS = {
    "step": (trainer_module.Trainer, "_step", "before"),  # between optimizer steps
    "weights": (checkpoint, "save_file", "after"),  # weights written, config not yet
    "trainer_pt": (trainer_module, "save_trainer_state", "before"),  # serialising trainer.pt
    "finish": (atomic, "_finish_tree", "after"),  # files flushed, not yet in place
    "swap": (atomic, "_exchange", "before"),  # a complete new directory, old one in place
    "swapped": (atomic, "_exchange", "after"),  # new in place, old one not yet deleted
    "rename": (atomic.os, "replace", "before"),  # first write of a directory
    "metrics": (metrics_module.MetricsLog, "append", "torn"),  # half a metrics line written
    "prune": (checkpoint.shutil, "rmtree", "before"),  # deleting an old step / old directory
    "file_opened": (atomic.tempfile, "mkstemp", "after"),  # an empty temporary file, old file in place
    "file_written": (atomic, "_publish", "before"),  # a complete temporary file, old file in place
}
RESULTS = "results.json"


def results_record(evals: int) -> dict:
    """What the ``evals``-th evaluation (from 0) writes to ``results.json``: large enough that
    a torn write could not pass for a complete one."""
    return {"evals": evals, "padding": [evals] * 2000}
counts: Counter = Counter()


def instrument(kill_at: tuple[str, int] | None) -> None:
    """Wrap every point: count it, and SIGKILL the process at the chosen hit."""
    for name, (owner, attr, when) in POINTS.items():
        original = getattr(owner, attr)

        def wrapped(*args, _name=name, _original=original, _when=when, **kwargs):
            counts[_name] += 1
            hit = kill_at is not None and kill_at == (_name, counts[_name])
            if hit and _when == "torn":  # write half of the line, then die
                path = args[0].path
                with path.open("a") as f:
                    f.write(json.dumps(args[1])[: 20])
                os.kill(os.getpid(), signal.SIGKILL)
            if hit and _when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            result = _original(*args, **kwargs)
            if hit and _when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        setattr(owner, attr, wrapped)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--kill-at", default=None)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--count-points", default=None)
    args = p.parse_args()
    kill_at = None
    if args.kill_at:
        name, k = args.kill_at.split(":")
        kill_at = (name, int(k))
    instrument(kill_at)
    torch.set_num_threads(1)
    model = training_toys.make_model(seed=0)
    batches = training_toys.make_batches(12, seed=0)
    evals = iter(range(10_000))

    def evaluate(m):
        n = next(evals)
        atomic.write_atomic(Path(args.run_dir) / RESULTS, json.dumps(results_record(n)))
        return {"val_loss": -float(trainer.state.step)}  # the same in a resumed run

    def loss_fn(m, batch):
        if args.sleep:
            time.sleep(args.sleep)
        return training_toys.noisy_lm_loss(m, batch)

    config = TrainConfig(
        max_steps=args.steps, save_every=2, eval_every=2, keep_last_k=2, log_every=1,
        run_dir=args.run_dir, progress=False, seed=0,
    )
    trainer = Trainer(
        model, torch.optim.AdamW(model.parameters(), lr=1e-2), loss_fn,
        training_toys.EpochShuffled(batches, seed=0), config,
        eval_fn=evaluate,
    )
    result = trainer.fit(resume_from=args.run_dir if args.resume else None, overwrite=args.overwrite)
    if args.count_points:
        Path(args.count_points).write_text(json.dumps(counts))
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, Path(args.run_dir) / "final_state.pt")
    print(json.dumps({"stopped": result.stopped, "step": result.step, "signal": result.signal}), flush=True)
    if result.stopped == "interrupted":
        sys.exit(128 + result.signal)


if __name__ == "__main__":
    main()
