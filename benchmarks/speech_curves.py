"""Validation CER and loss against training time for trained recognizers: Zeyer, Bahar, Irie,
Schlüter & Ney (2019), "A Comparison of Transformer and LSTM Encoder Decoder Models for ASR"
(Hasegawa-Johnson, ECE 417 Lecture 21): does the Transformer train faster, overtrain without
data augmentation and catch up with it?

    .venv/bin/python benchmarks/speech_curves.py "LSTM=runs/speech_las" \
        "LSTM, no SpecAugment=runs/speech_las_plain" ... [--out-dir runs/speech_curves]

Each ``NAME=RUN_DIR`` is a finished ``attnlab train`` run of the speech task. Reads its
``metrics.jsonl`` (every evaluation's greedy validation CER and loss, the training seconds at
that step) and ``results.json`` (parameters, beam-decoded test CER); prints one table row a
run and draws ``val_cer_vs_time.png`` and ``val_loss_vs_time.png``. Training time is the
trainer's own clock, so the runs compare only when measured on the same machine and load.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attnlab.measure import machine as _machine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _figures import line_chart  # noqa: E402
from curves import evaluations  # noqa: E402


def curve(run_dir: Path) -> list[tuple[int, float, float, float]]:
    """``(step, minutes, val_cer, val_loss)`` at each evaluation of a run."""
    loss = {p.step: p.value for p in evaluations(run_dir, "val_loss")}
    return [(p.step, p.minutes, p.value, loss[p.step]) for p in evaluations(run_dir, "val_cer")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/speech_curves"))
    args = parser.parse_args(argv)
    print(_machine.header(), flush=True)
    cer_series, loss_series = {}, {}
    print("| run | parameters | steps | train min | best val CER (step) | last val loss (lowest) "
          "| test CER | test WER |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for pair in args.runs:
        name, _, path = pair.partition("=")
        run = Path(path)
        if not name or not (run / "results.json").is_file():
            raise SystemExit(f"expected NAME=RUN_DIR of a finished speech run, got {pair!r}")
        points = curve(run)
        results = json.loads((run / "results.json").read_text(encoding="utf-8"))
        minutes = [p[1] for p in points]
        cer_series[name] = (minutes, [100 * p[2] for p in points])
        loss_series[name] = (minutes, [p[3] for p in points])
        best = min(points, key=lambda p: p[2])
        test = results["test"]
        print(f"| {name} | {results['parameters']:,} | {results['steps']:,} | "
              f"{results['train_s'] / 60:.1f} | {100 * best[2]:.2f} % ({best[0]:,}) | "
              f"{points[-1][3]:.3f} ({min(p[3] for p in points):.3f}) | "
              f"{100 * test['cer']:.2f} % | {100 * test['wer']:.2f} % |")
    for series, name, label in ((cer_series, "val_cer_vs_time.png", "validation CER (%, greedy)"),
                                (loss_series, "val_loss_vs_time.png", "validation loss (nats a character)")):
        chart = line_chart(series, args.out_dir / name, xlabel="training minutes", ylabel=label,
                           title=f"{label} against training time")
        print(f"chart: {chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
