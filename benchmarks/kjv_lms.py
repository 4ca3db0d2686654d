"""LSTM against LSTMN on words: the King James Bible, where Cheng et al. measured theirs on PTB.

    ATTNLAB_DATA=../shared/data taskset -c 1 .venv/bin/python benchmarks/kjv_lms.py --threads 1 \
        [--seeds 0 1 2] [--out-dir runs/kjv_lms] [--picture docs/img/kjv_lstmn_attention.png]

Cheng, Dong & Lapata (2016), "Long Short-Term Memory-Networks for Machine Reading", §5.1
report word-level Penn Treebank perplexity 115 for an LSTM and 108 for the LSTMN. Here the
corpus is the King James Bible (PTB's size: 829 k training words and marks, the last 10 % of
the text held out), every word and punctuation mark of the training part a token
(``tokenizer = "word"``). The two recipes (``configs/kjv_lstm.toml``, ``kjv_lstmn.toml``) differ
only in ``[model]``, at equal parameters (the LSTM one state wider) and equal steps; each seed
sets ``train.seed`` (the weights) and ``data.seed`` (the windows drawn). Perplexity is
``exp`` of the loss per token over the whole held-out part (``results.json``), each
non-overlapping 64-token window read from the zero state.

The picture (Cheng et al.'s Figure 1): the first seed's LSTMN reading the first held-out
sentence of 10 to 16 tokens, row ``t`` its attention over the tokens before ``t``
(``LanguageModelPipeline.plot_attention``). A run whose ``results.json`` exists is reused.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from attnlab.atomic import write_atomic  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.pipelines import LanguageModelPipeline  # noqa: E402
from attnlab.tasks import load_recipe, train  # noqa: E402
from attnlab.tasks.language_model import LMRecipe  # noqa: E402
from attnlab.tasks.language_model.task import prepare_corpus  # noqa: E402

RECIPES = {"LSTM": ROOT / "configs" / "kjv_lstm.toml", "LSTMN": ROOT / "configs" / "kjv_lstmn.toml"}
QUIET = ["train.progress=false", "train.keep_last_k=1"]


def run(config: Path, seed: int, run_dir: Path) -> dict:
    """Train ``config`` with ``seed`` into ``run_dir`` (unless done before); its results."""
    if not (run_dir / "results.json").is_file():
        print(f"training {config.name} seed {seed} -> {run_dir}", flush=True)
        train(load_recipe(config, [*QUIET, f"train.seed={seed}", f"data.seed={seed}"]), run_dir=run_dir)
    return json.loads((run_dir / "results.json").read_text())


def sentence(text: str, shortest: int = 10, longest: int = 16) -> str:
    """The first sentence of ``text`` (ending in . ? or !) of ``shortest`` to ``longest`` tokens."""
    for candidate in re.split(r"(?<=[.?!]) ", text):
        tokens = re.findall(r"\w+|[^\w\s]+", candidate)
        if shortest <= len(tokens) <= longest and candidate[:1].isupper():
            return candidate
    raise ValueError(f"no sentence of {shortest} to {longest} tokens in the first {len(text):,} characters")


def picture(checkpoint: Path, path: Path) -> tuple[str, Path]:
    """The LSTMN of ``checkpoint`` reading the first held-out sentence, drawn into ``path``."""
    pipeline = LanguageModelPipeline.from_checkpoint(checkpoint)
    data = LMRecipe.from_dict(load_recipe(RECIPES["LSTMN"])).data
    held_out = prepare_corpus(data, None, pipeline.tokenizer, progress=False).tokens("val")
    line = sentence(pipeline.tokenizer.decode([int(i) for i in held_out[:3000]]))
    return line, pipeline.plot_attention(line, path)


def table(rows: dict[str, list[dict]]) -> str:
    lines = ["| model | parameters | steps | seed | perplexity | val loss | minutes |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, results in rows.items():
        for seed, r in results:
            lines.append(f"| {name} | {r['parameters']:,} | {r['steps']:,} | {seed} | {r['perplexity']:.2f} "
                         f"| {r['val_loss']:.4f} | {r['wall_time_s'] / 60:.1f} |")
    lines.append("")
    for name, results in rows.items():
        ppl = [r["perplexity"] for _, r in results]
        spread = f" ± {statistics.stdev(ppl):.2f} (sd), {min(ppl):.2f}-{max(ppl):.2f}" if len(ppl) > 1 else ""
        lines.append(f"{name}: perplexity {statistics.mean(ppl):.2f}{spread} over {len(ppl)} seed(s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "kjv_lms")
    parser.add_argument("--picture", type=Path, default=ROOT / "docs" / "img" / "kjv_lstmn_attention.png")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    _footprint.report_at_exit()
    print(_machine.header(), flush=True)
    rows: dict[str, list] = {name: [] for name in RECIPES}
    for seed in args.seeds:  # seed by seed, so that a cut-short run still compares
        for name, config in RECIPES.items():
            rows[name].append((seed, run(config, seed, args.out_dir / f"{config.stem}_seed{seed}")))
    print(table(rows))
    first = args.out_dir / f"kjv_lstmn_seed{args.seeds[0]}"
    line, path = picture(Path(rows["LSTMN"][0][1]["checkpoint"]), args.picture)
    print(f"picture: {path} ({first.name} reading: {line})")
    write_atomic(args.out_dir / "kjv_lms.json", json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
