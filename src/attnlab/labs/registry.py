"""``attnlab lab``: every lab by name, run one or all, write their reports.

A lab is a module of :mod:`attnlab.labs` with ``TITLE``, ``SOURCE`` (the deck it reproduces,
as cited in docs/lectures.md) and ``run(out_dir: Path, options: LabOptions) -> LabReport``;
it saves its PNGs into ``out_dir`` and fills the report. The runner writes ``report.md``
beside them and, for ``all``, an ``index.md`` linking every lab. Modules are imported only
when their lab runs (they pull in matplotlib, and some a pretrained encoder).

    attnlab lab                      # the list
    attnlab lab worked-examples      # one lab into runs/labs/worked-examples/
    attnlab lab all --quick          # every lab at its seconds-long setting
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path

from attnlab.atomic import check_target, write_atomic
from attnlab.labs.report import LabOptions, LabReport

__all__ = ["DEFAULT_OUT", "LABS", "Lab", "LabUnavailable", "find_lab", "list_labs", "pictures", "run_all",
           "run_lab"]

DEFAULT_OUT = "runs/labs"


class LabUnavailable(ValueError):
    """A lab cannot run here (no trained checkpoint, no pretrained weights); the message says
    which command makes it runnable."""


@dataclass(frozen=True)
class Lab:
    """One entry of the list: its name, the module that runs it and what it shows."""

    name: str
    module: str
    summary: str


LABS: dict[str, Lab] = {lab.name: lab for lab in [
    Lab("worked-examples", "attnlab.labs.worked_examples",
        "the decks' numeric examples (0.47 / 0.06 / 0.47) recomputed beside the slides"),
    Lab("self-attention", "attnlab.labs.self_attention",
        "softmax(XXᵀ)X on MiniLM's word vectors; variance of q·k and entropy with and without 1/√d_k"),
    Lab("bank", "attnlab.labs.bank",
        "the two meanings of 'bank' through all-MiniLM-L6-v2: same static, different contextual vectors"),
    Lab("positional-encoding", "attnlab.labs.positional_encoding",
        "the sinusoid heatmap, dot product against distance, RoPE and ALiBi beside it"),
    Lab("coreference", "attnlab.labs.coreference",
        "what 'it' attends to in every MiniLM layer x head ('tired' vs 'wide')"),
    Lab("pooling", "attnlab.labs.pooling",
        "Nadaraya-Watson with each kernel and a bandwidth learned by gradient descent"),
    Lab("pca-autoencoder", "attnlab.labs.pca_autoencoder",
        "a linear autoencoder recovers the PCA subspace of MNIST digits (principal angles ≈ 0)"),
    Lab("complexity", "attnlab.labs.complexity",
        "the decks' cost tables beside measured time and memory of attention, a GRU and a convolution"),
    Lab("alignment", "attnlab.labs.alignment",
        "Bahdanau-style alignment grid from a trained translator"),
    Lab("heads", "attnlab.labs.heads",
        "every layer x head of a trained translator or GPT, with entropy and positional heads marked"),
    Lab("memory", "attnlab.labs.memory",
        "the Neural Turing Machine's read and write weightings from a trained checkpoint"),
    Lab("captions", "attnlab.labs.captions",
        "where the captioner looks, word by word, from a trained checkpoint"),
    Lab("induction", "attnlab.labs.induction",
        "induction heads of SmolLM2-135M on repeated random tokens: prefix matching, copying, ablation"),
    Lab("sinks", "attnlab.labs.sinks",
        "SmolLM2-135M's attention on the first token by layer; window vs sinks + window; KV bytes (GQA)"),
    Lab("explanations", "attnlab.labs.explanations",
        "attention, rollout, flow, gradient x attention and IG scored where the truth is known"),
]}


def find_lab(name: str) -> Lab:
    """The lab called ``name``; a one-line ``ValueError`` listing the labs otherwise."""
    if name not in LABS:
        raise ValueError(f"lab must be one of {', '.join(LABS)} or all, got {name!r}")
    return LABS[name]


def run_lab(name: str, out_dir: str | Path, options: LabOptions | None = None) -> LabReport:
    """Run lab ``name`` into ``out_dir`` (created), write its ``report.md``; return the report."""
    lab = find_lab(name)
    options = options or LabOptions()
    module = importlib.import_module(lab.module)
    out_dir = check_target(out_dir, directory=True)  # created by its first picture
    report = module.run(out_dir, options)
    report.write(out_dir)
    return report


def run_all(out_dir: str | Path, options: LabOptions | None = None) -> dict[str, LabReport | str]:
    """Every lab into ``out_dir/NAME``; a lab that cannot run here is recorded with its reason."""
    out_dir = Path(out_dir)
    results: dict[str, LabReport | str] = {}
    for name in LABS:
        print(f"\n== lab {name}: {LABS[name].summary}", flush=True)
        results[name] = _run_timed(name, out_dir / name, options)
    _write_index(out_dir, results)
    return results


def pictures(report: LabReport) -> str:
    """``1 picture``, ``3 pictures`` (:func:`attnlab.validation.counted`, which imports torch:
    imported once a lab has run, so that ``attnlab --help`` stays fast)."""
    from attnlab.validation import counted

    return counted(len(report.figures), "picture")


def _run_timed(name: str, out_dir: Path, options: LabOptions | None) -> LabReport | str:
    start = time.perf_counter()
    try:
        report = run_lab(name, out_dir, options)
    except LabUnavailable as why:
        print(f"lab {name}: not run: {why}", flush=True)
        return str(why)
    print(f"lab {name}: {pictures(report)}, report {out_dir / 'report.md'} "
          f"({time.perf_counter() - start:.1f} s)", flush=True)
    return report


def _write_index(out_dir: Path, results: dict[str, LabReport | str]) -> Path:
    lines = ["# attnlab labs\n", "| lab | what it shows | result |", "|---|---|---|"]
    for name, result in results.items():
        done = f"[report]({name}/report.md)" if isinstance(result, LabReport) else f"not run: {result}"
        lines.append(f"| {name} | {LABS[name].summary} | {done} |")
    return write_atomic(out_dir / "index.md", "\n".join(lines) + "\n")


def list_labs() -> str:
    """The list ``attnlab lab`` prints: one lab a line."""
    width = max(len(name) for name in LABS)
    rows = [f"  {name:<{width}}  {lab.summary}" for name, lab in LABS.items()]
    return "labs (attnlab lab NAME [--out DIR] [--quick]; attnlab lab all):\n" + "\n".join(rows)
