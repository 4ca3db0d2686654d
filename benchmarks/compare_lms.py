"""GPT against LSTM against LSTMN on tinyshakespeare at equal steps and at equal minutes.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/compare_lms.py [--minutes 10] \
        [--out-dir runs/compare_lms] [--picture docs/img/lm_loss_by_minute.png]

The three recipes share everything but the model (``configs/shakespeare_nanogpt_cpu.toml``,
``shakespeare_lstm.toml``, ``shakespeare_lstmn.toml``: character level, block 64, batch 12,
AdamW 1e-3 → 1e-4, ~0.78-0.80 M parameters each). For each model the script

1. trains the recipe as it is (2,000 steps): **equal steps**, Cheng et al. (2016)'s comparison;
2. takes that run's speed (trainer seconds a step, evaluations included) and trains again for
   as many steps as fit into ``--minutes``, the cosine schedule ending there: **equal minutes**,
   what the LSTMN's O(t²) tape costs against the LSTM's O(t) and the GPT's parallel window.

All equal-steps runs come first (``--steps-only`` stops there). Both runs are bounded by
steps, so each is reproducible; only the second one's step count comes from this machine's
speed (printed). A run whose ``results.json`` exists is reused.
Validation loss is over the whole validation split (per character). The picture plots the
periodic validation loss of the equal-minutes runs against training minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _figures import line_chart  # noqa: E402

from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.tasks import load_recipe, train  # noqa: E402
from attnlab.training.metrics import read_metrics  # noqa: E402

RECIPES = {
    "GPT (RoPE)": ROOT / "configs" / "shakespeare_nanogpt_cpu.toml",
    "LSTM": ROOT / "configs" / "shakespeare_lstm.toml",
    "LSTMN": ROOT / "configs" / "shakespeare_lstmn.toml",
}
QUIET = ["train.progress=false", "train.save_every=0", "train.keep_last_k=1"]


def run(config: Path, run_dir: Path, overrides: list[str]) -> dict:
    """Train ``config`` into ``run_dir`` (unless done before); its results and trainer clock."""
    if not (run_dir / "results.json").is_file():
        print(f"training {config.name} {' '.join(overrides)} -> {run_dir}", flush=True)
        train(load_recipe(config, [*QUIET, *overrides]), run_dir=run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    events = read_metrics(run_dir / "metrics.jsonl")
    clock = {e["step"]: e["elapsed_s"] for e in events if e.get("event") == "train"}
    curve = [
        (clock[max(s for s in clock if s <= e["step"])] / 60, e["val_loss"])
        for e in events if e.get("event") == "eval" and any(s <= e["step"] for s in clock)
    ]
    return {"steps": results["steps"], "minutes": results["wall_time_s"] / 60,
            "val_loss": results["val_loss"], "curve": curve}


def compare(minutes: float | None, out_dir: Path) -> list[dict]:
    """Every model at equal steps first, then (``minutes`` given) every model at equal minutes."""
    rows = []
    for name, config in RECIPES.items():
        steps_dir = out_dir / f"{config.stem}_steps"
        steps_run = run(config, steps_dir, [])
        params = json.loads((steps_dir / "results.json").read_text()).get("parameters")
        rows.append({"model": name, "recipe": config.name, "parameters": params,
                     "equal_steps": steps_run, "equal_minutes": None})
    for row, config in zip(rows, RECIPES.values(), strict=True):
        if minutes is None:
            break
        steps_run = row["equal_steps"]
        seconds_a_step = steps_run["minutes"] * 60 / steps_run["steps"]
        budget = max(100, int(minutes * 60 / seconds_a_step) // 50 * 50)
        overrides = [f"train.max_steps={budget}", f"optim.decay_steps={budget}",
                     f"train.eval_every={max(budget // 10, 1)}"]
        row["equal_minutes"] = run(config, out_dir / f"{config.stem}_minutes", overrides)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| model | parameters | equal steps: steps | min | val loss "
        "| equal minutes: steps | min | val loss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s, m = r["equal_steps"], r["equal_minutes"]
        params = f"{r['parameters']:,}" if r["parameters"] else "?"
        later = f"| {m['steps']:,} | {m['minutes']:.1f} | {m['val_loss']:.4f} |" if m else "| – | – | – |"
        first = f"| {r['model']} | {params} | {s['steps']:,} | {s['minutes']:.1f} | {s['val_loss']:.4f} "
        lines.append(first + later)
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> Path:
    series = {
        r["model"]: ([c[0] for c in r["equal_minutes"]["curve"]], [c[1] for c in r["equal_minutes"]["curve"]])
        for r in rows
    }
    return line_chart(
        series, path, xlabel="training minutes (this machine)",
        ylabel="validation loss (random windows, per character)", title="tinyshakespeare at equal minutes",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="the equal-minutes budget")
    parser.add_argument("--steps-only", action="store_true", help="only the equal-steps runs")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "compare_lms")
    parser.add_argument("--picture", type=Path, default=ROOT / "docs" / "img" / "lm_loss_by_minute.png")
    args = parser.parse_args(argv)
    if not args.minutes > 0:
        parser.error(f"--minutes must be > 0, got {args.minutes}")
    _footprint.report_at_exit()
    print(_machine.header(), flush=True)
    rows = compare(None if args.steps_only else args.minutes, args.out_dir)
    print(table(rows))
    if not args.steps_only:
        print(f"picture: {plot(rows, args.picture)}")
    (args.out_dir / "compare_lms.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
