"""Curves of a run from its ``metrics.jsonl``: loss, learning rate and (if logged) BLEU.

``attnlab plot RUN_DIR [--out DIR]`` calls :func:`plot_run`. matplotlib is imported lazily and
used through its object-oriented ``Figure`` API (Agg, no display), so plotting works on a
headless machine; each picture is written atomically (:mod:`attnlab.atomic`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.training.metrics import read_metrics

BLEU_KEYS = ("val_bleu", "bleu")  # eval-event keys drawn as the BLEU curve
NOT_DRAWN = ("event", "step", "epoch", "val_loss", "perplexity", *BLEU_KEYS)  # drawn otherwise or implied


def _series(events: list[dict[str, Any]], event: str, key: str) -> tuple[list[int], list[float]]:
    points = [(e["step"], e[key]) for e in events if e.get("event") == event and key in e]
    points = [(s, float(v)) for s, v in points if isinstance(v, int | float)]
    return [s for s, _ in points], [v for _, v in points]


def _figure(
    title: str, ylabel: str, curves: list[tuple[str, list[int], list[float]]], out: Path
) -> Path:
    from matplotlib.figure import Figure

    from attnlab.visualize.figure import save_figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    for label, steps, values in curves:
        ax.plot(steps, values, label=label, marker="o" if len(steps) < 30 else None, markersize=3)
    ax.set(title=title, xlabel="optimizer step", ylabel=ylabel)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    return save_figure(fig, out)


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Draw ``loss.png`` (train loss, and validation loss when evaluated), ``lr.png``, when
    eval events carry ``val_bleu`` (the translation task's key) or ``bleu``, ``bleu.png``, and
    one ``KEY.png`` for every other metric the evaluations logged (``bit_errors`` of the NTM
    tasks) into ``out_dir`` (default ``run_dir/plots``). Returns the written paths."""
    events = read_metrics(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "plots"
    train_steps, train_loss = _series(events, "train", "loss")
    if not train_steps:
        raise ValueError(f"metrics of {run_dir} hold no train events with a loss to plot")
    loss_curves = [("train", train_steps, train_loss)]
    val_steps, val_loss = _series(events, "eval", "val_loss")
    if val_steps:
        loss_curves.append(("validation", val_steps, val_loss))
    written = [_figure("loss", "loss (the task's, per target)", loss_curves, out / "loss.png")]
    lr_steps, lr = _series(events, "train", "lr")
    if lr_steps:
        written.append(_figure("learning rate", "lr", [("lr", lr_steps, lr)], out / "lr.png"))
    for key in BLEU_KEYS:  # the first one the run logged
        bleu_steps, bleu = _series(events, "eval", key)
        if bleu_steps:
            break
    if bleu_steps:
        written.append(
            _figure("validation BLEU", "BLEU", [("bleu", bleu_steps, bleu)], out / "bleu.png")
        )
    others = dict.fromkeys(k for e in events if e.get("event") == "eval" for k in e if k not in NOT_DRAWN)
    for key in others:
        steps, values = _series(events, "eval", key)
        if steps:
            name = key.replace("_", " ")
            written.append(_figure(f"validation {name}", name, [(name, steps, values)], out / f"{key}.png"))
    return written
