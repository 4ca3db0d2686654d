"""GPT-1-style transfer, measured: one classification recipe trained twice by the one driver,
its body started from a pretrained GPT (``[model] init_from``) and from scratch, and the two
test accuracies set side by side (Ba (CSC413 Lecture 8), "Transformer Language Pre-training";
Radford et al. 2018, §3.2). ``attnlab finetune`` is this::

    attnlab finetune --checkpoint runs/shakespeare_char/checkpoints/step_00002300 \\
        --config configs/shakespeare_vs_kjv.toml [key=value ...] [--out runs/kjv]

which is ``attnlab train`` of the recipe with ``model.init_from=CHECKPOINT`` into
``OUT/pretrained`` and without it into ``OUT/scratch``, then ``OUT/report.json``. The two runs
differ only in their starting body: same data, batches in the same order, same optimizer,
schedule, clipping and λ, same seed and so the same head.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnlab.atomic import write_atomic
from attnlab.parsing import read_json
from attnlab.tasks.base import train
from attnlab.tasks.classification.recipe import ClassificationRecipe
from attnlab.training.run_dir import writing_run
from attnlab.validation import counted

ARMS = ("pretrained", "scratch")
REPORT_FILE = "report.json"


def arm_recipes(recipe: Mapping[str, Any], checkpoint: str | Path) -> dict[str, dict[str, Any]]:
    """The recipe of each arm: with ``model.init_from = checkpoint``, and as it is. A recipe that
    names its own ``init_from`` is refused (it would make both arms the same)."""
    model = recipe.get("model", {})
    if not isinstance(model, Mapping):
        raise ValueError(f"[model] must be a table, got {model!r}")
    if "init_from" in model:
        raise ValueError(f"the recipe sets model.init_from = {model['init_from']!r}; the pretrained "
                         "checkpoint is --checkpoint (the scratch run has none): remove it")
    pretrained = {**recipe, "model": {**model, "init_from": str(checkpoint)}}
    return {"pretrained": pretrained, "scratch": dict(recipe)}


def compare_transfer(
    recipe: Mapping[str, Any], checkpoint: str | Path, *, out_dir: str | Path, data_dir: str | None = None,
    device: str = "cpu", overwrite: bool = False,
) -> dict[str, Any]:
    """Train ``recipe`` (a classification recipe dict) from ``checkpoint``, a ``"gpt"``
    checkpoint with its ``tokenizer.json``, into ``out_dir/pretrained`` and from scratch into
    ``out_dir/scratch`` (:func:`attnlab.tasks.train`, each its own run); print both test
    accuracies beside the baselines and write ``out_dir/report.json``; return the report.

    ``out_dir`` must be empty, or ``overwrite`` replaces the earlier comparison in it; it is
    locked like a run directory (:mod:`attnlab.training.run_dir`) before anything is read, and
    both arms' recipes are checked before either trains."""
    out_dir = Path(out_dir)
    with writing_run(out_dir, overwrite=overwrite, flag="--out"):
        arms = arm_recipes(recipe, checkpoint)
        parsed = {arm: ClassificationRecipe.from_dict(raw) for arm, raw in arms.items()}
        results = {}
        for arm, raw in arms.items():
            train(raw, run_dir=out_dir / arm, data_dir=data_dir, device=device)
            results[arm] = read_json(out_dir / arm / "results.json", "results")
        scratch = results["scratch"]
        shared = ("parameters", "sizes", "chance", "length_baseline_test_accuracy")
        report = {"checkpoint": str(checkpoint), **{key: scratch[key] for key in shared},
                  "recipe": parsed["scratch"].to_dict(), **results}
        path = write_atomic(out_dir / REPORT_FILE, json.dumps(report, indent=2) + "\n")
    print(summary(report) + f"\nreport: {path}", flush=True)
    return report


def summary(report: Mapping[str, Any]) -> str:
    """The comparison in lines: each arm's test accuracy, then the baselines."""
    lines = [
        f"{arm}: test accuracy {report[arm]['test_accuracy']:.4f} (val {report[arm]['val_accuracy']:.4f}, "
        f"{counted(report[arm]['steps'], 'step')}, {report[arm]['seconds']:.1f} s)"
        for arm in ARMS
    ]
    length = report["length_baseline_test_accuracy"]
    start = f"length-only baseline: {length:.4f}; " if length is not None else ""
    lines.append(f"{start}chance {report['chance']:.4f}")
    return "\n".join(lines)
