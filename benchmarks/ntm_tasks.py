"""The Neural Turing Machine against its LSTM baseline on one of the paper's tasks.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/ntm_tasks.py copy [--seeds 0 1 2] \
        [--lstm-seeds 0] [--out-dir runs/ntm] [--img-dir docs/img] [--set KEY=VALUE ...]

For task T it trains ``configs/ntm_T.toml`` once per NTM seed and ``configs/ntm_T_lstm.toml``
once per LSTM seed (``data.seed`` and ``train.seed`` both set to the seed; a run whose
``results.json`` exists is reused), then prints one row a run: parameters, steps, training
minutes, the sequences seen until the periodic validation first reached ≤ 0.1 bit errors per
sequence ("converged"), and the final bit errors per sequence at every test length. Pictures:

* ``ntm_T_generalisation.png`` — bit errors per sequence against length, training range shaded
  (Graves et al. 2014, Figures 3-4: the NTM keeps copying beyond it, the LSTM does not);
* ``ntm_T_learning.png`` — cost per sequence on the fixed validation sequences (training
  lengths) against sequences seen (Graves et al. 2014, Figures 3, 7, 10, 16);
* ``ntm_T_memory.png``, ``ntm_T_memory_longest.png`` — the first NTM seed's memory access at
  the longest training length and at the longest test length;
* ``ntm_priority_sort_mechanism.png`` — for priority sort, how the first NTM seed sorts (Graves
  et al. 2014, Figure 17: write location against priority; the reads), measured again from
  every NTM seed's checkpoint and printed a seed (:mod:`attnlab.tasks.algorithmic.sorting`).
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
from attnlab.models import load_pretrained  # noqa: E402
from attnlab.tasks import load_recipe, train  # noqa: E402
from attnlab.tasks.algorithmic import AlgorithmicRecipe  # noqa: E402
from attnlab.tasks.algorithmic.task import measure_sorting  # noqa: E402
from attnlab.tasks.base import load_saved_recipe  # noqa: E402
from attnlab.training.metrics import read_metrics  # noqa: E402
from attnlab.visualize import plot_generalisation  # noqa: E402

CONVERGED = 0.1  # bit errors per sequence (Graves et al. 2014; the target here)
QUIET = ["train.progress=false"]


def run(config: Path, run_dir: Path, seed: int, overrides: list[str]) -> dict:
    """Train ``config`` with ``seed`` into ``run_dir`` (unless done before) and summarise it."""
    if not (run_dir / "results.json").is_file():
        print(f"training {config.name} seed {seed} -> {run_dir}", flush=True)
        seeded = [*QUIET, f"data.seed={seed}", f"train.seed={seed}", *overrides]
        train(load_recipe(config, seeded), run_dir=run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    batch = results["sequences_seen"] // max(results["steps"], 1)
    events = read_metrics(run_dir / "metrics.jsonl")
    evals = [e for e in events if e.get("event") == "eval"]
    converged = next((e["step"] * batch for e in evals if e["bit_errors"] <= CONVERGED), None)
    return {
        "model": results["model_type"], "seed": seed, "parameters": results["parameters"],
        "steps": results["steps"], "minutes": results["wall_time_s"] / 60,
        "converged_after": converged,
        "scores": {k: v for k, v in results.items() if k.startswith("bit_errors")},
        "checkpoint": run_dir / "checkpoints" / Path(results["checkpoint"]).name,
        "curve": ([e["step"] * batch for e in evals], [e["val_loss"] for e in evals]),
        "pictures": [str(run_dir / Path(p).name) for p in results["pictures"]],  # the run may have moved
    }


def repeats_of(key: str) -> str:
    """``"bit_errors_repeats_10"`` -> ``"10"``; ``"bit_errors"`` (one score a length) -> ``""``."""
    return key.removeprefix("bit_errors").removeprefix("_repeats_")


def table(rows: list[dict], length_name: str) -> str:
    """One line a run and test repeat count (repeat copy scores each length at several)."""
    lengths = list(next(iter(rows[0]["scores"].values())))
    lines = [
        "| model | seed | parameters | steps | min | sequences to ≤ 0.1 | repeats | "
        + " | ".join(f"{length_name} {n}" for n in lengths) + " |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(lengths),
    ]
    for r in rows:
        converged = f"{r['converged_after']:,}" if r["converged_after"] is not None else "not reached"
        for key, by_length in r["scores"].items():
            cells = " | ".join(f"{by_length[n]:.2f}" for n in lengths)
            lines.append(f"| {r['model']} | {r['seed']} | {r['parameters']:,} | {r['steps']:,} | "
                         f"{r['minutes']:.1f} | {converged} | {repeats_of(key) or '–'} | {cells} |")
    return "\n".join(lines)


def how_it_sorts(rows: list[dict], img_dir: Path) -> None:
    """Measure how each NTM seed sorts (:func:`attnlab.tasks.algorithmic.task.measure_sorting`)
    from its checkpoint, print it, draw the first seed's into ``img_dir``."""
    for r in rows:
        checkpoint = r["checkpoint"]
        path = checkpoint.parents[1] / "sort_mechanism.png"  # the run's own, measured again
        if r is rows[0]:
            path = img_dir / "ntm_priority_sort_mechanism.png"
        recipe = load_saved_recipe(checkpoint, AlgorithmicRecipe)
        numbers, picture = measure_sorting(load_pretrained(checkpoint), recipe, path)
        cells = ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in numbers.items())
        print(f"NTM seed {r['seed']}: {cells}")
        print(f"mechanism: {picture}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", help="copy, repeat_copy, associative_recall or priority_sort")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="NTM seeds")
    parser.add_argument("--lstm-seeds", type=int, nargs="*", default=[0], help="LSTM seeds")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "ntm")
    parser.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for every run (a smoke test: train.max_steps=20)")
    args = parser.parse_args(argv)
    configs = {"ntm": ROOT / "configs" / f"ntm_{args.task}.toml",
               "lstm": ROOT / "configs" / f"ntm_{args.task}_lstm.toml"}
    for config in configs.values():
        if not config.is_file():
            parser.error(f"no recipe {config.relative_to(ROOT)} for task {args.task!r}")
    _footprint.report_at_exit()
    print(_machine.header(), flush=True)
    plan = [("ntm", s) for s in args.seeds] + [("lstm", s) for s in args.lstm_seeds]
    rows = [run(configs[m], args.out_dir / f"{args.task}_{m}_seed{s}", s, args.set) for m, s in plan]
    length_name = "items" if args.task == "associative_recall" else "length"
    print(table(rows, length_name))
    name = {"ntm": "NTM", "sequence_lstm": "LSTM"}
    data = load_recipe(configs["ntm"])["data"]
    curves = {
        f"{name[r['model']]} seed {r['seed']}" + (f", {n} repeats" if (n := repeats_of(key)) else ""): scores
        for r in rows for key, scores in r["scores"].items()
    }
    generalisation = plot_generalisation(
        curves, args.img_dir / f"ntm_{args.task}_generalisation.png",
        train_range=(data.get("min_length", 1), data.get("max_length", 20)), title=args.task,
        xlabel="items" if args.task == "associative_recall" else "sequence length",
    )
    learning = line_chart(
        {f"{name[r['model']]} seed {r['seed']}": r["curve"] for r in rows},
        args.img_dir / f"ntm_{args.task}_learning.png", xlabel="sequences seen",
        ylabel="validation cost per sequence (nats)", title=f"{args.task}: learning curves", yscale="log",
    )
    print(f"pictures: {generalisation}, {learning}")
    ntm = next((r for r in rows if r["model"] == "ntm" and r["pictures"]), None)
    if ntm is not None:  # the longest training length, then the longest test length
        for picture, suffix in zip(ntm["pictures"], ("", "_longest"), strict=False):
            memory = shutil.copyfile(picture, args.img_dir / f"ntm_{args.task}_memory{suffix}.png")
            print(f"memory access: {memory}")
    if args.task == "priority_sort":
        how_it_sorts([r for r in rows if r["model"] == "ntm"], args.img_dir)
    for r in rows:
        r["checkpoint"] = str(r["checkpoint"])
    (args.out_dir / f"{args.task}.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
