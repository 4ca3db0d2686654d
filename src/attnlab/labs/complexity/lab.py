"""The complexity lab's run and report: the decks' cost tables as the slides print them, then the
measured tables and pictures beside them (the overview: :mod:`attnlab.labs.complexity`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlab.analysis import attention_cost, convolution_path_length, layer_complexity
from attnlab.labs.complexity.decoding import (
    MODES,
    PROMPT_LEN,
    DecodingMeasurements,
    decoding_model,
    measure_decoding,
)
from attnlab.labs.complexity.measure import (
    LayerMeasurements,
    build_layers,
    fit_exponent,
    measure,
    path_lengths,
    quadratic_coefficient,
)
from attnlab.labs.complexity.translator import (
    TRANSFORMER_BASE_FLOPS,
    WMT_HEADERS,
    WMT_TABLE,
    TranslatorCost,
    translator_costs,
)
from attnlab.labs.report import LabOptions, LabReport
from attnlab.measure import machine
from attnlab.validation import counted

TITLE = "Cost of attention, recurrence and convolution: the decks' tables beside this CPU"
SOURCE = ('Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?"; Ba (CSC413 Lecture 8), '
          '"Computational Cost and Parallelism"; Li (Transformer Part I), "Complexity of Attention"; '
          'Steinert-Threlkeld (Transformers I), "Initial WMT Results"')

HASEGAWA_JOHNSON = (["Layer Type", "Complexity/Layer", "Path Length"], [
    ["Recurrent", "O{nd²}", "O{n}"],
    ["Convolutional", "O{knd²}", "O{log_k(n)}"],
    ["Self-Attention", "O{n²d}", "O{1}"],
])
BA_COST = (["Model", "training complexity", "training memory", "test complexity", "test memory"], [
    ["RNN", "t × k² × d", "t × k × d", "t × k² × d", "k × d"],
    ["RNN+attn.", "t² × k² × d", "t² × k × d", "t² × k² × d", "t × k × d"],
    ["transformer", "t² × k × d", "t × k × d", "t² × k × d", "t × k × d"],
])
BA_PARALLEL = (["Model", "sequential operations", "maximum path length across time"], [
    ["RNN", "t", "t"], ["RNN+attn.", "t", "1"], ["transformer", "d", "1"],
])
LI = ("- Score matrix: S = QKᵀ ∈ ℝ^{n×n} with cost O(n²d).\n"
      "- Masking + softmax on S: store and softmax n × n scores with cost O(n²) (softmax) and memory "
      "O(n²) (score matrix and mask).\n"
      "- Weighted sum: Y = softmax(S)V with cost O(n²d).")
DECK_ROWS = {  # our layer → (Hasegawa-Johnson's row, Ba's row)
    "recurrent": (HASEGAWA_JOHNSON[1][0], BA_COST[1][0]),
    "convolutional": (HASEGAWA_JOHNSON[1][1], None),
    "attention_fused": (HASEGAWA_JOHNSON[1][2], BA_COST[1][2]),
    "attention_explicit": (HASEGAWA_JOHNSON[1][2], BA_COST[1][2]),
}


@dataclass(frozen=True)
class Settings:
    """Sizes of one run: layer width and lengths, timing rounds, the decoding GPT."""

    d: int
    num_heads: int
    kernel_size: int
    ns: tuple[int, ...]
    fit_points: int  # exponents are fitted over the largest fit_points lengths
    rounds: int
    min_sample_s: float
    gpt: tuple[int, int, int, int]  # d, heads, layers, vocabulary
    decode_lengths: tuple[int, ...]


FULL = Settings(64, 4, 3, (128, 256, 512, 1024, 2048, 4096), 4, 5, 0.05, (128, 4, 2, 256),
                (32, 64, 128, 256))
QUICK = Settings(16, 2, 3, (32, 64, 128, 256), 3, 3, 0.005, (32, 2, 1, 64), (8, 16, 32))
QUICK_PAIRS = 2000  # --quick: the translators' length distribution from their first training pairs


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Print the decks' tables, measure, fit, draw; numbers under ``flops_exponent.*``,
    ``time_exponent.*``, ``activation_exponent.*``, ``decoding.*``, ``translator.*``."""
    settings = QUICK if options.quick else FULL
    report = LabReport("complexity", TITLE, SOURCE)
    _machine(report, options.quick)
    _deck_tables(report)
    layers = build_layers(settings.d, settings.num_heads, settings.kernel_size, options.seed)
    results = measure(layers, settings.ns, settings.d, rounds=settings.rounds,
                      min_sample_s=settings.min_sample_s, progress=options.progress)
    _layer_tables(report, results, settings)
    _memory_table(report, results, settings)
    from attnlab.labs.complexity.plots import plot_scaling

    report.figure(plot_scaling(results, settings.fit_points, out_dir / "scaling.png"),
                  f"FLOPs, forward time and memory against n at d = {settings.d} (log-log)")
    decoding_section(report, settings, out_dir, options)
    translator_section(report, options)
    report.text(f"Load average at the end: {_load()}. The timings share the machine with whatever ran "
                "beside them; FLOPs, memory, steps and path lengths do not depend on it.")
    return report


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _machine(report: LabReport, quick: bool) -> None:
    cpu = machine.cpu_model()
    report.number("machine.cpu", cpu)
    report.number("machine.threads", torch.get_num_threads())
    header = machine.header() if not quick else (
        f"{cpu}, torch {torch.__version__}, {counted(torch.get_num_threads(), 'thread')} "
        "(--quick: no matmul ceilings measured)"
    )
    report.text("Measured on\n\n```\n" + header + "\n```\n\nLoad average at the start: " + _load() + ".")


def _deck_tables(report: LabReport) -> None:
    report.text("## The decks' tables, as printed")
    report.table(*HASEGAWA_JOHNSON, caption='Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?" '
                 "(n = sequence length, d = representation dimension, k = kernel dimension)")
    report.table(*BA_COST, caption='Ba (CSC413 Lecture 8), "Computational Cost and Parallelism" '
                 "(t: sequence length, d: # layers and k: # neurons at each layer)")
    report.table(*BA_PARALLEL, caption='Ba (CSC413 Lecture 8), "Computational Cost and Parallelism"')
    report.text('Li (Transformer Part I), "Complexity of Attention":\n\n' + LI)


def _fit(results: LayerMeasurements, values: list[float], points: int) -> float:
    return fit_exponent(results.ns[-points:], values[-points:])


def _layer_tables(report: LabReport, results: list[LayerMeasurements], s: Settings) -> None:
    n_max, fitted = s.ns[-1], s.ns[-s.fit_points:]
    paths = path_lengths(n_max, s.kernel_size)
    report.text(f"## One layer of each type, measured (d = {s.d}, {s.num_heads} heads, kernel "
                f"{s.kernel_size}, batch 1; exponents fitted over n = {', '.join(map(str, fitted))})")
    rows = [_layer_row(report, r, s, paths) for r in results]
    agree = report.number("flops_match_analysis", all(_agrees(r, s) for r in results))
    fused = next(r for r in results if r.layer.key == "attention_fused")
    matrix = report.number("flops_exponent.attention_matrix", _fit(fused, fused.own_flops, s.fit_points))
    contiguous = report.number("path_length.convolutional_contiguous", paths["convolutional, contiguous"])
    report.table(["layer", "deck: complexity/layer", f"FLOPs at n={n_max}", "FLOP exponent",
                  "time exponent", f"ms at n={n_max}", f"dependent products n={s.ns[0]} → {n_max}",
                  "deck: path length", f"path length at n={n_max}"], rows)
    report.text(
        f"FLOPs and dependent products equal `attnlab.analysis.layer_complexity` at every n: "
        f"**{agree}**. Attention's own products (QKᵀ and softmax(S)·V, the projections left out) grow "
        f"with exponent **{matrix:.3f}**; the whole layer stays below 2 while its O(nd²) projections "
        "still weigh. Path length: layers stacked until output n − 1 depends on input 0; a convolution "
        f"dilated by k^i, or contiguous, which takes {counted(contiguous, 'layer')} "
        f"(⌈(n−1)/(k−1)⌉ = {convolution_path_length(n_max, s.kernel_size, dilated=False)}); a GRU's is "
        "its chain of n steps. Dependent products: the longest chain of matrix products in the autograd "
        "graph each needing the one before, Ba's *sequential operations*."
    )
    _crossover(report, results, s)
    _detail_table(report, results)


def _crossover(report: LabReport, results: list[LayerMeasurements], s: Settings) -> None:
    """Vaswani et al. 2017, section 4: self-attention is cheaper than recurrence while n < d."""
    def cost(kind: str, n: int) -> int:
        return layer_complexity(kind, n, s.d, num_heads=s.num_heads).flops

    n = next(n for n in range(1, 100 * s.d) if cost("self-attention", n) >= cost("recurrent", n))
    report.number("crossover_n.flops", n)
    by_key = {r.layer.key: r.seconds for r in results}
    ratio = [a / g for a, g in zip(by_key["attention_fused"], by_key["recurrent"], strict=True)]
    report.number("time_ratio.attention_fused_over_recurrent", ratio[-1])
    report.text(
        f"Counted, a self-attention layer costs as many FLOPs as the GRU at n = **{n}** = d (8nd² + 4n²d "
        "against 12nd²): cheaper below, dearer above — Vaswani et al. 2017, section 4. On this CPU the "
        f"fused attention took {ratio[0]:.2g}× the GRU's time at n = {s.ns[0]} and {ratio[-1]:.2g}× at "
        f"n = {s.ns[-1]}."
    )


def _agrees(r: LayerMeasurements, s: Settings) -> bool:
    rows = [layer_complexity(r.layer.kind, n, s.d, kernel_size=s.kernel_size, num_heads=s.num_heads)
            for n in r.ns]
    return [x.flops for x in rows] == r.flops and [x.sequential_ops for x in rows] == r.steps


def _layer_row(report: LabReport, r: LayerMeasurements, s: Settings, paths: dict[str, int]) -> list:
    key = r.layer.key
    flops = report.number(f"flops_exponent.{key}", _fit(r, r.flops, s.fit_points))
    time = report.number(f"time_exponent.{key}", _fit(r, r.seconds, s.fit_points))
    report.number(f"sequential_steps.{key}", r.steps[-1])
    report.number(f"sequential_steps_exponent.{key}", _fit(r, r.steps, s.fit_points))
    path = report.number(f"path_length.{key}", _measured_path(r.layer.kind, paths, r.steps[-1]))
    _, complexity, deck_path = DECK_ROWS[key][0]
    return [r.layer.name, complexity, f"{r.flops[-1]:,}", f"{flops:.3f}", f"{time:.2f}",
            f"{r.seconds[-1] * 1e3:.2f}", f"{r.steps[0]} → {r.steps[-1]}", deck_path, path]


def _measured_path(kind: str, paths: dict[str, int], steps: int) -> int:
    if kind == "recurrent":
        return steps
    return paths["convolutional, dilated" if kind == "convolutional" else "self-attention"]


def _detail_table(report: LabReport, results: list[LayerMeasurements]) -> None:
    names = [r.layer.name for r in results]
    rows = [[n, *(f"{r.seconds[i] * 1e3:.3f}" for r in results), *(f"{r.flops[i]:.3g}" for r in results[1:])]
            for i, n in enumerate(results[0].ns)]
    report.table(["n", *(f"ms: {x}" for x in names), *(f"FLOPs: {x}" for x in names[1:])], rows,
                 caption="Forward time (median of interleaved rounds, no gradients) and counted FLOPs "
                         "(the fused and explicit attention run the same products)")


def _memory_table(report: LabReport, results: list[LayerMeasurements], s: Settings) -> None:
    n = s.ns[-1]
    report.text("## Memory: Ba's training and test memory, Li's O(n²) score matrix")
    report.table(["layer", "deck: training memory", f"activation MiB at n={n}", "exponent",
                  "bytes per n² (exact)", "deck: test memory", f"peak forward MiB at n={n}", "exponent"],
                 [_memory_row(report, r, s) for r in results])
    matrix = attention_cost(n, n, s.d, s.num_heads).matrix_elements * 4 / n**2
    report.number("attention_matrix_bytes_per_n2.analysis", matrix)
    report.text(
        "Activation memory: what one forward pass keeps for the backward pass (input included, "
        "parameters not); *bytes per n²*: the n² coefficient of the parabola through the last three "
        "points. The explicit attention keeps its softmax weights, H·n² float32 numbers: "
        f"`attention_cost(...).matrix_elements × 4 / n²` = **{matrix:g}** bytes per n² in "
        "`attnlab.analysis`. The fused path keeps none (coefficient 0: memory linear in n, the deck's "
        "transformer row t × k × d); the GRU keeps its t × k states and gates. Peak forward memory: "
        "the profiler's high-water mark of tensor storage without gradients, the input not counted."
    )


def _memory_row(report: LabReport, r: LayerMeasurements, s: Settings) -> list:
    key = r.layer.key
    activation = report.number(f"activation_exponent.{key}", _fit(r, r.activation, s.fit_points))
    peak = report.number(f"peak_exponent.{key}", _fit(r, r.peak, s.fit_points))
    exact = round(quadratic_coefficient(r.ns, r.activation), 6) + 0.0  # float rounding, no -0
    per_n2 = report.number(f"activation_bytes_per_n2.{key}", exact)
    ba = DECK_ROWS[key][1] or ["–"] * 5
    return [r.layer.name, ba[2], f"{r.activation[-1] / 2**20:.3f}", f"{activation:.3f}", f"{per_n2:g}",
            ba[4], f"{r.peak[-1] / 2**20:.3f}", f"{peak:.2f}"]


def decoding_section(report: LabReport, settings: Settings, out_dir: Path, options: LabOptions) -> None:
    """Generate with and without the cache; table, exponents over the larger ``N``, picture."""
    from attnlab.labs.complexity.plots import plot_decoding

    d, heads, layers, vocab = settings.gpt
    lengths = settings.decode_lengths
    model = decoding_model(d, heads, layers, vocab, PROMPT_LEN + lengths[-1], options.seed)
    result = measure_decoding(model, lengths, rounds=settings.rounds, min_sample_s=settings.min_sample_s,
                              seed=options.seed)
    report.text(
        '## Decoding with and without the KV cache (Ba (CSC413 Lecture 8), "Computational Cost and '
        f'Parallelism": decoding is very expensive)\n\nattnlab\'s GPT (d = {d}, {heads} heads, '
        f"{counted(layers, 'layer')}, vocabulary {vocab}, random weights of std 0.5) generates N tokens "
        f"greedily after a {PROMPT_LEN}-token prompt: one new token a step against its cached keys and "
        "values, or the whole prefix computed again at each step."
    )
    report.table(["N new tokens", "FLOPs cached", "FLOPs recomputed", "ratio", "ms cached", "ms recomputed",
                  "same tokens"], [_decoding_row(result, i) for i in range(len(lengths))])
    points = min(3, len(lengths))
    fitted = lengths[-points:]
    for mode in MODES:
        report.number(f"decoding.flops_exponent.{mode}", fit_exponent(fitted, result.flops[mode][-points:]))
        report.number(f"decoding.time_exponent.{mode}", fit_exponent(fitted, result.seconds[mode][-points:]))
    same = report.number("decoding.same_tokens", all(result.same_tokens))
    match = report.number("decoding.flops_match_analysis", result.flops == result.predicted)
    report.number("decoding.flops_ratio", result.flops["recomputed"][-1] / result.flops["cached"][-1])
    got = report.numbers
    report.text(
        f"Exponents over N = {', '.join(map(str, fitted))}: FLOPs "
        f"**{got['decoding.flops_exponent.cached']:.2f}** cached, "
        f"**{got['decoding.flops_exponent.recomputed']:.2f}** recomputed (time "
        f"{got['decoding.time_exponent.cached']:.2f} and {got['decoding.time_exponent.recomputed']:.2f}). "
        "With the cache a token costs O(d² + n·d), so N tokens cost ≈ N¹; without it every step runs the "
        "prefix again, so ≈ N². Counted FLOPs equal `attnlab.analysis.decoding_flops`: "
        f"**{match}**; the cache changes no token: **{same}**."
    )
    report.figure(plot_decoding(result, out_dir / "decoding.png"),
                  "Generating N tokens with and without the KV cache: FLOPs and time (log-log)")


def _decoding_row(result: DecodingMeasurements, i: int) -> list:
    cached, full = result.flops["cached"][i], result.flops["recomputed"][i]
    ms = {mode: f"{result.seconds[mode][i] * 1e3:.1f}" for mode in MODES}
    return [result.lengths[i], f"{cached:.4g}", f"{full:.4g}", f"{full / cached:.1f}", ms["cached"],
            ms["recomputed"], f"{result.same_tokens[i]} ({result.distinct_tokens[i]} distinct)"]


def translator_section(report: LabReport, options: LabOptions) -> None:
    """The slide's WMT table, then attnlab's translators with their counted training FLOPs."""
    report.text("## \"Attention Is All You Need\" beside attnlab's translators")
    report.table(WMT_HEADERS, WMT_TABLE, caption='Steinert-Threlkeld (Transformers I), "Initial WMT Results" '
                 "(Vaswani et al. 2017, Table 2: WMT 2014 newstest2014)")
    limit = QUICK_PAIRS if options.quick else None
    costs, notes = translator_costs(options, limit)
    if costs:
        report.table(["model", "data, test set", "sacreBLEU", "parameters", "steps", "target tokens seen",
                      "training FLOPs / token", "training cost (FLOPs)", "of Transformer (base)"],
                     [_translator_row(report, cost) for cost in costs])
        report.text(
            "Training FLOPs are counted: the products of forward and backward (3 × forward, "
            "`attnlab.analysis.training_flops`) per target token over the run's own training pairs, "
            "times the target tokens its trainer saw; padding is not counted. The slide's figures are "
            "estimates (time × GPUs × sustained rate) on WMT 2014, a larger task: BLEU does not compare "
            "across data sets, the cost does."
            + (f" (--quick: lengths from the first {limit:,} training pairs only.)" if limit else "")
        )
    for note in notes:
        report.text(f"Translator row: {note}.")


def _translator_row(report: LabReport, cost: TranslatorCost) -> list:
    name = cost.run_dir.name
    report.number(f"translator.{name}.bleu", cost.bleu)
    report.number(f"translator.{name}.training_flops", cost.training_flops)
    report.number(f"translator.{name}.flops_per_token", cost.flops_per_token)
    return [f"attnlab Transformer ({cost.run_dir})", f"Multi30k {cost.pair}, {cost.split}",
            f"{cost.bleu:.2f}", f"{cost.parameters:,}", f"{cost.steps:,}", f"{cost.tokens_seen:,}",
            f"{cost.flops_per_token:.3g}", f"{cost.training_flops:.2g}",
            f"1/{TRANSFORMER_BASE_FLOPS / cost.training_flops:,.0f}"]
