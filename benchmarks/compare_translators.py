"""The head-to-head table of the translators: why attention won.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/compare_translators.py \
        runs/multi30k_de_en runs/multi30k_bahdanau runs/multi30k_rnn [--names ...] \
        [--out docs/img/bleu_by_length.png] [--json runs/compare_translators.json]

For each training run it decodes ``test_2016_flickr`` with the run's ``final`` checkpoint and
the decoding settings its recipe saved (beam 5 and its length penalty), and prints one row:
system, parameters, training steps, training minutes (the trainer's clock at the last step),
training tokens/s (median of the logged windows; real source + target tokens), sacreBLEU and
chrF (cased, detokenized). Then BLEU against source length (in words, buckets of about equal
size): Bahdanau et al. (2015) Figure 2, where the fixed-vector encoder-decoder falls off on
long sentences and the attention model does not, drawn to ``--out``.

With ``--from-results`` no decoding is done: BLEU and chrF are the ones each run's own
``attnlab train`` report wrote to ``results.json`` (same split, beam and length penalty), and
the length buckets and the picture are left out.

Tokens/s come from each run's own log, so they compare only runs made on one machine with
nothing else running; ``benchmarks/rnn_speed.py`` measures the models' speed side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _figures import line_chart  # noqa: E402

from attnlab.data import load_multi30k  # noqa: E402
from attnlab.evaluation import bleu  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.pipelines import TranslationPipeline  # noqa: E402
from attnlab.tasks.translation import score  # noqa: E402
from attnlab.training.metrics import read_metrics  # noqa: E402

EDGES = (8, 10, 12, 15, 19)  # source words: <= 8, 9-10, 11-12, 13-15, 16-19, >= 20


def bucket_of(words: int) -> int:
    return sum(words > edge for edge in EDGES)


def bucket_names() -> list[str]:
    names, low = [], 1
    for edge in EDGES:
        names.append(f"{low}-{edge}")
        low = edge + 1
    return [*names, f"{low}+"]


def training_seconds(events: list[dict]) -> float:
    """The trainer's clock at the last step, summed over the segments of a resumed run (each
    resume restarts the clock; the steps lost to a kill are not logged, so not counted)."""
    total, last = 0.0, 0.0
    for event in events:
        elapsed = event.get("elapsed_s", 0.0)
        if elapsed < last:  # a new segment: the run was resumed here
            total += last
        last = elapsed
    return total + last


def training_figures(run: Path) -> dict:
    """Steps, training minutes and median tokens/s from ``run/metrics.jsonl``."""
    events = [e for e in read_metrics(run / "metrics.jsonl") if e.get("event") == "train"]
    if not events:
        raise ValueError(f"{run}/metrics.jsonl has no training events")
    return {
        "steps": max(e["step"] for e in events),
        "train_min": training_seconds(events) / 60,
        "tokens_per_s": statistics.median(e["tokens_per_s"] for e in events if "tokens_per_s" in e),
    }


def evaluate_run(run: Path, name: str, split: str) -> dict:
    translator = TranslationPipeline.from_checkpoint(run / "final")
    data = translator.recipe["data"]
    pairs = load_multi30k(split, data["src_lang"], data["tgt_lang"])
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    hyps = translator.translate(sources)
    buckets: dict[int, list[int]] = {}
    for i, source in enumerate(sources):
        buckets.setdefault(bucket_of(len(source.split())), []).append(i)
    by_length = {
        names: bleu([hyps[i] for i in rows], [refs[i] for i in rows]).score
        for names, rows in ((bucket_names()[b], buckets[b]) for b in sorted(buckets))
    }
    scores = score(hyps, refs)
    return {
        "system": name,
        "model_type": translator.model.model_type,
        "parameters": translator.model.num_parameters(),
        **training_figures(run),
        "beam": translator.decoding.beam_size,
        "length_penalty": translator.decoding.length_penalty,
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
        "bleu_signature": scores["bleu_signature"],
        "bleu_by_length": by_length,
        "bucket_sizes": {bucket_names()[b]: len(rows) for b, rows in sorted(buckets.items())},
    }


def reported_run(run: Path, name: str, split: str) -> dict:
    """A row from the run's own report (``results.json``) instead of decoding again."""
    from attnlab.models import load_pretrained

    results = json.loads((run / "results.json").read_text())
    if results.get("split") != split:
        raise ValueError(f"{run}/results.json scores split {results.get('split')!r}, not {split!r}")
    model = load_pretrained(run / "final")
    return {
        "system": name,
        "model_type": model.model_type,
        "parameters": model.num_parameters(),
        **training_figures(run),
        "beam": results["beam_size"],
        "length_penalty": results["length_penalty"],
        "bleu": results["bleu"],
        "chrf": results["chrf"],
        "bleu_signature": results["bleu_signature"],
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| system | model | parameters | steps | training min | train tokens/s | beam, α "
        "| sacreBLEU | chrF |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['system']} | {r['model_type']} | {r['parameters'] / 1e6:.1f} M | {r['steps']:,} | "
            f"{r['train_min']:.1f} | {r['tokens_per_s']:,.0f} | {r['beam']}, {r['length_penalty']} | "
            f"{r['bleu']:.2f} | {r['chrf']:.2f} |"
        )
    if "bucket_sizes" not in rows[0]:
        return "\n".join(lines)
    names = list(rows[0]["bucket_sizes"])
    sizes = " | ".join(f"{n} ({rows[0]['bucket_sizes'][n]})" for n in names)
    lines += ["", f"| BLEU by source length, words (sentences) | {sizes} |", "|---|" + "---:|" * len(names)]
    for r in rows:
        cells = " | ".join(f"{r['bleu_by_length'][n]:.1f}" for n in names)
        lines.append(f"| {r['system']} | {cells} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> Path:
    names = list(rows[0]["bucket_sizes"])
    series = {r["system"]: (range(len(names)), [r["bleu_by_length"][n] for n in names]) for r in rows}
    ticks = (range(len(names)), [f"{n}\n({rows[0]['bucket_sizes'][n]})" for n in names])
    return line_chart(
        series, path, xlabel="source sentence length in words (sentences)",
        ylabel="sacreBLEU (test_2016_flickr)", xticks=ticks,
        title="BLEU against source length (cf. Bahdanau et al. 2015, Fig. 2)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="training run directories (each with final/)")
    parser.add_argument("--names", nargs="*", default=None, help="one display name per run")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "bleu_by_length.png")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--from-results", action="store_true",
                        help="take BLEU / chrF from each run's results.json; no decoding, no length buckets")
    args = parser.parse_args(argv)
    names = args.names or [run.name for run in args.runs]
    if len(names) != len(args.runs):
        parser.error(f"--names has {len(names)} names for {len(args.runs)} runs")
    _footprint.report_at_exit()
    print(_machine.header(), flush=True)
    rows = []
    for run, name in zip(args.runs, names, strict=True):
        if args.from_results:
            rows.append(reported_run(run, name, args.split))
            continue
        print(f"decoding {args.split} with {run}/final ...", flush=True)
        rows.append(evaluate_run(run, name, args.split))
    print(table(rows))
    if not args.from_results:
        print(f"picture: {plot(rows, args.out)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
