"""Your own corpus: attnlab's ``prepare`` against nanoGPT's, the memory it takes, and data
loading against the training step.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/data.py --work ../databench \\
        --out ../databench/data.json      # 1 GB: about 4 minutes on 2 cores (--size-mb 50: quick)

The corpus: tinyshakespeare and the Multi30k training sides (en, de, fr, cs) repeated to
``--size-mb`` MB in one file; the tokenizer: a byte-level BPE of 8,000 learned on those texts,
given as a ``tokenizer.json``. In one run:

1. **Preparing** it, each preparer a process under ``/usr/bin/time -v``, ``--repeats`` times
   interleaved, the fastest kept: ``prepare_text`` as ``attnlab prepare`` calls it (into an empty
   cache; each pass timed) against nanoGPT's ``prepare.py`` (tiktoken ``encode_ordinary``, same
   BPE, ``uint16`` ids to a file) on a process pool as its openwebtext script, and on a thread
   pool (tiktoken lets go of the GIL), a worker a core. MB/s: input bytes / wall time of the call;
   cores busy: CPU / wall time (a pool's peak resident is its largest process's). Ids compared.
2. **Training** the nanoGPT CPU recipe ``--steps`` steps (``attnlab train``, the same BPE) on the
   big corpus (streamed from the files of 1), on tinyshakespeare, and as shipped: peak resident.
3. **Data loading**: ``LMDataset.get_batch`` on the memory-mapped stream, pages cached (warm) and
   evicted (cold), and the wait for a batch of ``train_windows``, which reads one ahead (cold),
   against a training step of the recipe's GPT as the trainer takes it.

``--train-fraction`` (0.999) keeps the big corpus's validation split small: ``attnlab train``
scores the whole split at its end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.measure import machine as _machine

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "shakespeare_nanogpt_cpu.toml"
VOCAB = 8000
LANGS = ("en", "de", "fr", "cs")
BASELINES = ("processes", "threads")
PHASES = {"hash": "fingerprint", "count": "count_characters", "encode": "encode_arrays",  # name: function
          "read_route_write": "_encode", "validation_lines": "validation_hashes"}
Figures = dict[str, Any]
MET = {True: "met", False: "**missed**"}  # a goal
_ENCODING: Any = None  # the tiktoken Encoding of the pool's workers (forked ones inherit it)


# ----------------------------------------------------------------------------- the inputs
def inputs(work: Path, size_mb: int) -> tuple[Path, Path]:
    """``work/corpus_<size>MB.txt``: tinyshakespeare and the Multi30k training sides repeated to
    ``size_mb`` MB; ``work/bpe8000/tokenizer.json``: a byte-level BPE of 8,000 learned on them."""
    from attnlab.data.corpora import data_dir, read_text
    from attnlab.data.tokenizers import Tokenizer

    root = data_dir()
    files = [root / "tinyshakespeare" / "input.txt", *(root / "multi30k" / f"train.{x}.gz" for x in LANGS)]
    texts = [t if t.endswith("\n") else t + "\n" for t in map(read_text, files)]  # read_text reads gzip too
    corpus, tokenizer = work / f"corpus_{size_mb}MB.txt", work / f"bpe{VOCAB}" / "tokenizer.json"
    if not corpus.is_file() or corpus.stat().st_size < size_mb * 1e6:
        unit = "".join(texts).encode()
        with open(corpus, "wb") as f:
            for _ in range(-(-size_mb * 10**6 // len(unit))):
                f.write(unit)
    if not tokenizer.is_file():
        lines = (line for t in texts for line in t.splitlines(keepends=True))
        Tokenizer.train(lines, VOCAB).save(tokenizer.parent)
    return corpus, tokenizer


# ----------------------------------------------------------------------------- nanoGPT's prepare
def _encode_piece(piece: str) -> bytes:
    return np.asarray(_ENCODING.encode_ordinary(piece), np.uint16).tobytes()


def nanogpt_prepare(corpus: Path, encoding: Any, out: Path, how: str) -> int:
    """nanoGPT's prepare: ``encode_ordinary`` into ``out`` as uint16 on a pool of ``how``
    (``processes`` or ``threads``), a worker a core; the tokens written. The pieces are attnlab's
    (:class:`TextSources`: about a megabyte, cut where no pre-token spans two; a second of the run)."""
    from attnlab.data.text_corpus import TextSources

    global _ENCODING
    _ENCODING, cores, tokens = encoding, os.cpu_count() or 1, 0
    pieces = (piece for document in TextSources((corpus,)).documents((corpus,)) for piece in document)
    workers = multiprocessing.get_context("fork").Pool if how == "processes" else ThreadPool
    with open(out, "wb") as f, workers(cores) as pool:
        while batch := list(itertools.islice(pieces, 32 * cores)):  # imap alone reads all ahead
            for data in pool.imap(_encode_piece, batch):
                tokens += f.write(data) // 2
    return tokens


# ----------------------------------------------------------------------------- one child process
def lm_recipe(overrides: list[str]) -> Any:
    """The nanoGPT CPU recipe with ``overrides`` (an :class:`LMRecipe`)."""
    from attnlab.tasks import load_recipe
    from attnlab.tasks.language_model.recipe import LMRecipe

    return LMRecipe.from_dict(load_recipe(CONFIG, overrides))


def corpus_overrides(args: argparse.Namespace) -> list[str]:
    """The big corpus with the BPE file, as ``attnlab prepare`` and ``attnlab train`` take it."""
    return [f'data.corpus="{args.corpus}"', 'data.tokenizer="bpe"', f'data.tokenizer_file="{args.tokenizer}"',
            f"data.train_fraction={args.train_fraction}"]


def _timed(fn: Callable[..., Any], spent: dict[str, float], name: str) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

    return timed


def attnlab_prepare(args: argparse.Namespace) -> Figures:
    """``prepare_text`` as ``attnlab prepare`` calls it, each pass timed: hashing the file,
    counting the characters, hashing the validation lines, encoding (the tokenizer's
    ``encode_arrays``; the rest of the pass: waiting for the reading thread, which routes the
    pieces and checks the training lines against the validation lines, and writing)."""
    from attnlab.data import load_tokenizer, text_corpus
    from attnlab.data.prepared import cache_dir
    from attnlab.tasks.language_model.task import text_sources

    sources = text_sources(lm_recipe(corpus_overrides(args)).data, None)
    given, spent = load_tokenizer(args.tokenizer.parent, args.tokenizer.name), {}
    given.encode_arrays = _timed(given.encode_arrays, spent, "encode_arrays")
    for name in ("fingerprint", "count_characters", "_encode", "validation_hashes"):  # looked up at each call
        setattr(text_corpus, name, _timed(getattr(text_corpus, name), spent, name))
    start = time.perf_counter()
    made = text_corpus.prepare_text(sources, kind="bpe", vocab_size=VOCAB, tokenizer=given, cache=cache_dir(),
                                    progress=False)
    seconds = time.perf_counter() - start
    spent["_encode"] -= spent["encode_arrays"] + spent["validation_hashes"]  # the rest of the pass
    return {"seconds": seconds, "tokens": sum(made.meta["tokens"].values()), "folder": str(made.folder),
            "phases": {phase: spent[name] for phase, name in PHASES.items()}}


def child(args: argparse.Namespace) -> Figures:
    """Prepare once in this process (``--child``); what it made."""
    if args.child == "attnlab":
        return attnlab_prepare(args)
    from attnlab.data import load_tokenizer
    from attnlab.data.fast_bpe import tiktoken_twin  # the same BPE as a tiktoken.Encoding

    encoding = tiktoken_twin(load_tokenizer(args.tokenizer.parent, args.tokenizer.name).hf)
    out = args.work / f"nanogpt_{args.child}.bin"
    start = time.perf_counter()
    tokens = nanogpt_prepare(args.corpus, encoding, out, args.child)
    return {"seconds": time.perf_counter() - start, "tokens": tokens, "file": str(out)}


def timed_run(command: list[str], cache: Path, preload: str | None = None) -> tuple[str, Figures]:
    """Run ``command`` (``$ATTNLAB_CACHE`` = ``cache``, ``preload`` preloaded) under ``/usr/bin/time
    -v``: its stdout, and its peak resident bytes, wall seconds and cores busy (CPU / wall time)."""
    env = {**os.environ, "ATTNLAB_CACHE": str(cache), **({"LD_PRELOAD": preload} if preload else {})}
    done = subprocess.run(["/usr/bin/time", "-v", *command], env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    field = {k.strip(): v.strip() for k, _, v in (line.partition(": ") for line in done.stderr.splitlines())}
    h, m, s = ["0", *field["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")][-3:]
    wall = 3600 * float(h) + 60 * float(m) + float(s)
    cpu = float(field["User time (seconds)"]) + float(field["System time (seconds)"])
    return done.stdout, {"rss_bytes": 1024 * int(field["Maximum resident set size (kbytes)"]), "wall_s": wall,
                         "cores_busy": cpu / wall}


# ----------------------------------------------------------------------------- 1. preparing
def prepare_once(which: str, args: argparse.Namespace) -> Figures:
    """One ``--child which`` process: what it made, its MB/s and its memory; attnlab's with the
    ``malloc`` the ``attnlab`` command preloads (TCMalloc where installed), nanoGPT's with glibc's."""
    from attnlab.allocator import choose

    given = {"--work": args.work, "--corpus": args.corpus, "--tokenizer": args.tokenizer,
             "--train-fraction": args.train_fraction}
    command = [sys.executable, __file__, "--child", which, *(str(x) for kv in given.items() for x in kv)]
    out, usage = timed_run(command, args.work / "cache", choose(os.environ) if which == "attnlab" else None)
    result = {**json.loads(out.strip().splitlines()[-1]), **usage}
    return {**result, "mb_per_s": args.corpus.stat().st_size / 1e6 / result["seconds"]}


def prepare_all(args: argparse.Namespace) -> dict[str, Figures]:
    """Every preparer ``--repeats`` times, interleaved, attnlab each time into an empty cache:
    the fastest run of each, with the MB/s of all (the last cache stays, for training)."""
    best: dict[str, Figures] = {}
    for rep in range(args.repeats):
        for which in ("attnlab", *BASELINES):
            if which == "attnlab":
                shutil.rmtree(args.work / "cache", ignore_errors=True)
            r = prepare_once(which, args)
            print(f"  {which} run {rep + 1}: {r['mb_per_s']:.2f} MB/s, {r['tokens']:,} tokens, "
                  f"{r['rss_bytes'] / 1e6:.0f} MB resident, {r['cores_busy']:.2f} cores busy", flush=True)
            runs = [*best.get(which, {}).get("runs", []), round(r["mb_per_s"], 3)]
            best[which] = r if r["mb_per_s"] > best.get(which, {}).get("mb_per_s", 0) else best[which]
            best[which]["runs"] = runs
    return best


def same_tokens(folder: Path, baseline_file: Path) -> dict[str, int]:
    """attnlab's train + val streams against nanoGPT's file: the ids equal from the start, from
    the end, and how many differ between (where the split point cut a line in two)."""
    ours = np.concatenate([np.memmap(folder / f"{s}.bin", np.uint16, mode="r") for s in ("train", "val")])
    theirs = np.memmap(baseline_file, np.uint16, mode="r")
    n = min(len(ours), len(theirs))
    ends = ((ours, theirs), (ours[::-1], theirs[::-1]))
    head, tail = (int(np.argmax(np.append(a[:n] != b[:n], True))) for a, b in ends)  # equal ids
    return {"attnlab": len(ours), "nanogpt": len(theirs), "equal_from_start": head, "equal_from_end": tail,
            "differing_between": max(0, len(ours) - head - tail)}


# ----------------------------------------------------------------------------- 2. training
def train_memory(label: str, overrides: list[str], args: argparse.Namespace) -> Figures:
    """``attnlab train`` of the nanoGPT CPU recipe for ``--steps`` steps: its peak resident
    memory (``/usr/bin/time``; the ``memory:`` line it prints) and wall seconds."""
    run_dir = args.work / "runs" / label
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [sys.executable, "-m", "attnlab.cli", "train", "--config", str(CONFIG), "--run-dir",
               str(run_dir), f"train.max_steps={args.steps}", "train.progress=false", *overrides]
    out, usage = timed_run(command, args.work / "cache")
    said = [ln for ln in out.splitlines() if ln.startswith(("memory:", "reusing", "prepared"))]
    print(f"  train {label}: {usage['rss_bytes'] / 1e6:.0f} MB resident, {usage['wall_s']:.0f} s; "
          + "; ".join(said), flush=True)
    return {**usage, "said": said}


# ----------------------------------------------------------------------------- 3. data loading
def batch_seconds(path: Path, data: Any, rounds: int) -> tuple[float, float]:
    """Mean seconds of ``get_batch`` on the memory-mapped stream ``path``: its pages in the page
    cache (warm), and just evicted from it (cold: each window read from the disk)."""
    from attnlab.data import LMDataset

    def mean_s(seed: int) -> float:  # the file unmapped on return: eviction skips mapped pages
        windows = LMDataset(np.memmap(path, np.uint16, mode="r"), data.block_size, seed=seed)
        return _seconds(lambda: windows.get_batch(data.batch_size), rounds, statistics.mean)

    with open(path, "rb") as f:
        while f.read(1 << 24):  # every page into the page cache
            pass
        warm = mean_s(data.seed)
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # this file's pages out of the cache
    return warm, mean_s(data.seed + 1)


def step_seconds(recipe: Any, path: Path, rounds: int) -> tuple[float, int]:
    """Median seconds of a training step of the recipe's GPT on a batch of ``path`` (bf16 autocast
    as the recipe, the trainer's loss scaling, clipping and AdamW) on 1 thread or all, the
    faster, and its threads."""
    from attnlab.data import LMDataset
    from attnlab.devices import autocast
    from attnlab.tasks.language_model.task import lm_loss
    from attnlab.training.optim import build_optimizer

    torch.manual_seed(0)
    d, model = recipe.data, recipe.model.build_model(vocab_size=VOCAB)
    optimizer, _ = build_optimizer(recipe.optim, model, max_steps=recipe.train.max_steps)
    batch = LMDataset(np.memmap(path, np.uint16, mode="r"), d.block_size, seed=d.seed).get_batch(d.batch_size)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast("cpu", recipe.train.bf16):
            loss, n = lm_loss(model, batch)
        loss.backward()
        torch._foreach_mul_([p.grad for p in model.parameters() if p.grad is not None], 1 / n)
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.train.clip_norm)
        optimizer.step()

    seconds, threads = {}, torch.get_num_threads()
    for n in sorted({1, threads}):  # the faster step gives loading the larger share
        torch.set_num_threads(n)
        for _ in range(3):
            step()  # warm-up: kernel choice, optimizer state
        seconds[n] = _seconds(step, rounds)
    torch.set_num_threads(threads)
    return min(seconds.values()), min(seconds, key=seconds.__getitem__)


def read_ahead_wait(path: Path, data: Any, step_s: float, rounds: int) -> float:
    """Mean seconds the training loop waits for its next batch from ``train_windows`` (which
    reads a batch ahead) with the file's pages evicted first, a sleep standing in for the step."""
    from attnlab.tasks.language_model.task import train_windows

    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    batches = train_windows(np.memmap(path, np.uint16, mode="r"), data)(7)
    return _seconds(lambda: next(batches), rounds, statistics.mean, pause_s=step_s)


def loading_share(folder: Path, args: argparse.Namespace, rounds: int = 30) -> Figures:
    """``get_batch`` (warm, cold) and the loop's wait for a read-ahead batch (cold) against the
    training step, and their shares of loading and step."""
    recipe = lm_recipe(corpus_overrides(args))
    warm_s, cold_s = batch_seconds(folder / "train.bin", recipe.data, 10 * rounds)
    step_s, threads = step_seconds(recipe, folder / "train.bin", rounds)
    ahead_s = read_ahead_wait(folder / "train.bin", recipe.data, step_s, 10 * rounds)
    times = {"warm": warm_s, "cold": cold_s, "cold_read_ahead": ahead_s}
    return {**{f"{k}_s": v for k, v in times.items()}, "step_s": step_s, "step_threads": threads,
            **{f"{k}_share": v / (v + step_s) for k, v in times.items()}}


def _seconds(fn: Callable[[], object], n: int, mean: Any = statistics.median, pause_s: float = 0.0) -> float:
    """The ``mean`` of ``n`` timed calls of ``fn``, each after ``pause_s`` untimed seconds asleep."""
    times = []
    for _ in range(n):
        time.sleep(pause_s)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return mean(times)


# ----------------------------------------------------------------------------- the table
def prepare_rows(prep: dict[str, Figures], check: dict[str, int], size: float) -> list[str]:
    """The table's rows of measure 1 (and attnlab's peak, of measure 2)."""
    name = max((b for b in prep if b != "attnlab"), key=lambda b: prep[b]["mb_per_s"])
    ours, ratio = prep["attnlab"], prep["attnlab"]["mb_per_s"] / prep[name]["mb_per_s"]
    rows = [f"| prepare {size:,.0f} MB: {'nanoGPT ' * (w != 'attnlab')}{w} | {r['mb_per_s']:.2f} MB/s "
            f"({r['seconds']:.0f} s; runs {', '.join(f'{x:.2f}' for x in r['runs'])}), {r['cores_busy']:.2f} "
            f"cores busy, {r['rss_bytes'] / 1e9:.2f} GB resident | |" for w, r in prep.items()]
    where = ", ".join(f"{k} {v:.0f} s" for k, v in ours["phases"].items())
    diff = check["attnlab"] - check["nanogpt"]
    return [*rows, f"| prepare: attnlab / nanoGPT ({name}) | **{ratio:.2f}×** | ≥ 1.0×: {MET[ratio >= 1]} |",
            f"| attnlab's prepare, by pass | {where} | |",
            f"| tokens: attnlab, nanoGPT | {check['attnlab']:,}, {check['nanogpt']:,} ({diff:+,}); "
            f"{check['differing_between']:,} ids differ between the {check['equal_from_start']:,} equal "
            f"from the start and the {check['equal_from_end']:,} from the end | same |",
            f"| peak resident, attnlab prepare | **{ours['rss_bytes'] / 1e9:.2f} GB** | ≤ 1.5 GB: "
            f"{MET[ours['rss_bytes'] <= 1.5e9]} |"]


def table(prep: dict[str, Figures], check: dict[str, int], train: dict[str, Figures], load: Figures,
          size: float) -> str:
    """The measured table, each goal with met or missed."""
    rows = prepare_rows(prep, check, size)
    rows += [f"| peak resident, train {label} | **{r['rss_bytes'] / 1e9:.2f} GB** ({r['wall_s']:.0f} s) | "
             f"≤ 1.5 GB: {MET[r['rss_bytes'] <= 1.5e9]} |" for label, r in train.items()]
    step = f"step {1e3 * load['step_s']:.1f} ms on {load['step_threads']} thread(s)"
    for w in ("warm", "cold", "cold_read_ahead"):
        share, spent = load[f"{w}_share"], f"{1e6 * load[f'{w}_s']:.0f} µs"
        rows.append(f"| data loading / (loading + step), {w.replace('_', ' ')} | **{100 * share:.2f} %** "
                    f"({spent}, {step}) | ≤ 2 %: {MET[share <= 0.02]} |")
    return "\n".join(["| measure | result | goal |", "|---|---|---|", *rows])


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True, help="folder of the corpus, tokenizer, cache, runs")
    p.add_argument("--size-mb", type=int, default=1000, help="corpus size in MB (10^6 bytes)")
    p.add_argument("--repeats", type=int, default=1, help="prepare runs of each kind; the fastest is kept")
    p.add_argument("--steps", type=int, default=20, help="training steps of each train run")
    p.add_argument("--train-fraction", type=float, default=0.999)
    p.add_argument("--out", type=Path, default=None, help="write the figures here (JSON)")
    for name, kind in (("--child", str), ("--corpus", Path), ("--tokenizer", Path)):  # a child's own
        p.add_argument(name, type=kind, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    print(_machine.header() + f"\nload average (1 min) at the start: {os.getloadavg()[0]:.2f}\n", flush=True)
    args.corpus, args.tokenizer = inputs(args.work, args.size_mb)
    size = args.corpus.stat().st_size / 1e6
    print(f"corpus {args.corpus} ({size:,.0f} MB), tokenizer {args.tokenizer}", flush=True)
    prep = prepare_all(args)
    folder = Path(prep["attnlab"]["folder"])
    fastest = max(BASELINES, key=lambda b: prep[b]["mb_per_s"])
    check = same_tokens(folder, Path(prep[fastest]["file"]))
    bpe = ['data.tokenizer="bpe"', f'data.tokenizer_file="{args.tokenizer}"']
    train = {f"{size:,.0f} MB corpus, BPE": train_memory("big", corpus_overrides(args), args),
             "tinyshakespeare, BPE": train_memory("tiny-bpe", bpe, args),
             "tinyshakespeare, as shipped (characters)": train_memory("tiny-char", [], args)}
    load = loading_share(folder, args)
    text = table(prep, check, train, load, size)
    print(f"\n{text}\n\nload average (1, 5, 15 min) at the end: {os.getloadavg()}", flush=True)
    if args.out is not None:
        figures = {"machine": _machine.cpu_model(), "load_end": os.getloadavg(), "corpus_mb": size,
                   "prepare": prep, "tokens": check, "train": train, "loading": load, "table": text}
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
