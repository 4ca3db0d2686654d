"""One validation metric of finished ``attnlab train`` runs against steps, examples seen or
training minutes: a table and a line chart.

    .venv/bin/python benchmarks/curves.py "CPU, 32 a step=runs/ntmcur/paper20" \
        "H100, 2048 a step=runs/ntmgpu/paper20_b2048" --metric bit_errors --x step \
        --out docs/img/ntm_priority_sort_paper_size.png [--title TEXT] [--ylabel TEXT]

Each ``NAME=RUN_DIR`` is a run directory with its ``metrics.jsonl``. At every evaluation the
run's step, the examples seen until then (the trainer's ``tokens`` count summed over the
logged steps: sequences for the algorithmic tasks, target tokens for the language tasks) and
the trainer's clock are read. The table gives each run's steps, examples a step, minutes and
the metric at the first, best and last evaluation. Minutes compare only between runs measured
on the same machine and load.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from pathlib import Path
from typing import NamedTuple

from attnlab.measure import machine as _machine
from attnlab.training.metrics import read_metrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _figures import line_chart  # noqa: E402

AXES = {"step": "steps", "examples": "examples seen", "minutes": "training minutes"}


class Point(NamedTuple):
    step: int
    minutes: float
    examples: float
    value: float


def _minutes_at(clock: list[tuple[int, float]], step: int) -> float:
    """The trainer's clock at the last logged step at or before ``step`` (NaN before any)."""
    at = bisect.bisect_right(clock, (step, float("inf")))
    return clock[at - 1][1] / 60 if at else float("nan")


def evaluations(run_dir: Path, metric: str) -> list[Point]:
    """``metric`` at each evaluation of a run, with its step, minutes and examples seen."""
    events = read_metrics(run_dir)
    train = [e for e in events if e["event"] == "train"]
    clock = [(e["step"], e["elapsed_s"]) for e in train if "elapsed_s" in e]  # logged steps only
    per_step = train[0]["tokens"] if train and "tokens" in train[0] else float("nan")
    points = [Point(e["step"], _minutes_at(clock, e["step"]), e["step"] * per_step, e[metric])
              for e in events if e["event"] == "eval" and metric in e]
    if not points:
        raise SystemExit(f"{run_dir}: no evaluation recorded {metric!r}")
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR")
    parser.add_argument("--metric", required=True, help="an evaluation field: bit_errors, val_loss, val_cer")
    parser.add_argument("--x", choices=tuple(AXES), default="step")
    parser.add_argument("--out", type=Path, required=True, help="the chart (.png)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--ylabel", default=None)
    parser.add_argument("--log", action="store_true", help="a logarithmic y axis")
    args = parser.parse_args(argv)
    print(_machine.header(), flush=True)
    print(f"| run | steps | examples a step | minutes | {args.metric}: first | best (step) | last |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    series = {}
    for pair in args.runs:
        name, _, path = pair.partition("=")
        if not name or not Path(path).is_dir():
            raise SystemExit(f"expected NAME=RUN_DIR of a run directory, got {pair!r}")
        points = evaluations(Path(path), args.metric)
        series[name] = ([getattr(p, args.x) for p in points], [p.value for p in points])
        best, last = min(points, key=lambda p: p.value), points[-1]
        per_step = last.examples / last.step if last.step else float("nan")
        print(f"| {name} | {last.step:,} | {per_step:,.0f} | {last.minutes:.1f} | {points[0].value:.2f} "
              f"| {best.value:.2f} ({best.step:,}) | {last.value:.2f} |")
    chart = line_chart(series, args.out, xlabel=AXES[args.x], ylabel=args.ylabel or args.metric,
                       title=args.title or f"{args.metric} against {AXES[args.x]}",
                       yscale="log" if args.log else "linear")
    print(f"chart: {chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
