"""Show, Attend and Tell against the same decoder without attention, on scenes of real
handwriting.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/captioning.py [--out-dir runs/captioning] \
        [--img-dir docs/img] [--set KEY=VALUE ...]

Trains ``configs/digits_caption.toml`` twice — with soft attention and with
``model.attention=false`` (the mean feature at every step) — unless a run's ``results.json``
exists, then prints one row a model: steps, training minutes, exact match on the test scenes
(overall and by digits in the scene), sacreBLEU with beam 3, and, for the attention model, the
attention mass inside the box of the digit each generated number word names beside the box's
share of the image (what uniform attention would put there). Copies the attention model's
``attention.png`` and ``mistakes.png`` to ``docs/img/caption_attention.png`` and
``caption_mistakes.png`` and draws ``caption_learning.png`` (validation exact match against
steps, both models).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _figures import line_chart  # noqa: E402

from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.tasks import load_recipe, train  # noqa: E402
from attnlab.training.metrics import read_metrics  # noqa: E402

CONFIG = ROOT / "configs" / "digits_caption.toml"
MODELS = {"attention": ["model.attention=true"], "no attention": ["model.attention=false"]}


def run(name: str, run_dir: Path, overrides: list[str]) -> dict:
    """Train one model (unless done before) and read its results and learning curve."""
    if not (run_dir / "results.json").is_file():
        print(f"training {name} -> {run_dir}", flush=True)
        train(load_recipe(CONFIG, ["train.progress=false", *MODELS[name], *overrides]), run_dir=run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    evals = [e for e in read_metrics(run_dir / "metrics.jsonl") if e.get("event") == "eval"]
    return {**results, "name": name, "curve": ([e["step"] for e in evals], [e["val_exact"] for e in evals])}


def table(rows: list[dict]) -> str:
    counts = sorted({k for r in rows for k in r["exact_match_by_digits"]})
    lines = [
        "| model | parameters | steps | train min | exact match | "
        + " | ".join(f"{c} digit{'s' if c != '1' else ''}" for c in counts)
        + " | sacreBLEU | attention in the named digit's box | box's share of the image |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(counts) + "---:|---:|---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r['exact_match_by_digits'].get(c, float('nan')):.1%}" for c in counts)
        box = f"{r['box_attention']:.3f} | {r['box_area']:.3f}" if "box_attention" in r else "– | –"
        lines.append(f"| {r['name']} | {r['parameters']:,} | {r['steps']:,} | {r['train_s'] / 60:.1f} | "
                     f"{r['exact_match']:.1%} | {cells} | {r['bleu']:.2f} | {box} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "captioning")
    parser.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for both runs (a smoke test: train.max_steps=20)")
    args = parser.parse_args(argv)
    _footprint.report_at_exit()
    print(_machine.header(), flush=True)
    rows = [run(name, args.out_dir / name.replace(" ", "_"), args.set) for name in MODELS]
    print(table(rows))
    args.img_dir.mkdir(parents=True, exist_ok=True)
    learning = line_chart({r["name"]: r["curve"] for r in rows}, args.img_dir / "caption_learning.png",
                          xlabel="step", ylabel="validation exact match (greedy)",
                          title="captioning MNIST scenes: with and without attention")
    print(f"picture: {learning}")
    for picture in rows[0]["pictures"]:
        copied = shutil.copyfile(picture, args.img_dir / f"caption_{Path(picture).name}")
        print(f"picture: {copied}")
    (args.out_dir / "captioning.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
