"""Self-attention on real word vectors, and why the scores are divided by √d_k.

Li (Transformer Part I), "Self-Attention in Matrix Notation": untrained self-attention
``Y = softmax(XXᵀ)X`` mixes the rows of ``X`` (one token a row) with weights from their inner
products. Here ``X`` is Li's sentence "I swam across the river to get to the other bank." as
all-MiniLM-L6-v2's word vectors: its token embeddings ``E[w]`` (norms ≈ 1), and the
embedding output ``LN(E[w] + E_type + P)`` that enters layer 1 (norms ≈ √d ≈ 20), whose
``XXᵀ`` is so peaked that every token attends to itself — unless divided by √d.

Li (Transformer Part I), "Scaled Self-Attention"; López et al. (Attention Mechanisms), "Dot
Product Attention Function"; Hasegawa-Johnson (ECE 417 Lecture 21), "The Scaled Dot-Product":
with ``q, k`` of i.i.d. unit-variance entries, ``var(qᵀk) = d_k``. Measured here on seeded
Gaussian ``q, k``: the log-log slope of var against ``d_k`` (slide: 1), and the mean row
entropy of the softmax over ``n`` keys with and without ``1/√d_k`` against its ceiling
``log n``. Then the same entropy on MiniLM's real per-head queries and keys (``d_k = 32``),
as trained (scaled) and with the scaling removed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnlab.attention.core import scaled_dot_product_attention, self_attention
from attnlab.attention.scoring import dot_score
from attnlab.labs.minilm import load_minilm
from attnlab.labs.pattern_scores import row_entropy
from attnlab.labs.report import LabOptions, LabReport
from attnlab.pipelines import EncodedSentence

__all__ = [
    "SOURCE", "TITLE", "ScalingSweep", "minilm_entropy", "row_entropy", "run", "scaling_sweep",
    "untrained_self_attention",
]

TITLE = "Self-attention softmax(XXᵀ)X on MiniLM's word vectors, and the 1/√d_k scaling"
SOURCE = "Li (Transformer Part I); López et al. (Attention Mechanisms); Hasegawa-Johnson (ECE 417 Lecture 21)"
SENTENCE = "I swam across the river to get to the other bank."


def untrained_self_attention(x: Tensor, scale: float = 1.0) -> tuple[Tensor, Tensor]:
    """``Y = softmax(scale · XXᵀ) X`` and its weights (Li (Transformer Part I), "Self-Attention in
    Matrix Notation"; ``scale = 1`` is the slide's formula).

    ``x`` ``(n, d)`` → ``Y`` ``(n, d)``, ``A`` ``(n, n)`` with rows summing to 1. ``Y`` comes
    from :func:`~attnlab.attention.core.self_attention` when ``scale = 1``.
    """
    out, weights = scaled_dot_product_attention(x, x, x, scale=scale, return_weights=True)
    if scale == 1.0:
        out = self_attention(x)  # (n, d), the slide's formula line by line
    return out, weights


@dataclass
class ScalingSweep:
    """Random ``q, k`` with i.i.d. N(0, 1) entries, one row per ``d_k``."""

    dims: list[int]
    num_keys: int  # n, the keys each softmax row is over
    variance: list[float]  # var(qᵀk) per d_k
    entropy_scaled: list[float]  # mean row entropy of softmax(QKᵀ/√d_k)
    entropy_unscaled: list[float]  # mean row entropy of softmax(QKᵀ)
    slope: float  # fitted slope of log var against log d_k (theory: 1)


def scaling_sweep(
    dims: list[int], num_keys: int = 16, samples: int = 200, seed: int = 0, progress: bool = False
) -> ScalingSweep:
    """For each ``d_k`` in ``dims``: ``samples`` draws of ``Q, K`` ``(num_keys, d_k)`` in float64;
    the variance of the ``samples · num_keys²`` scores ``qᵀk``, and the mean row entropy of the
    softmax with and without ``1/√d_k``. The slope is a least-squares line through
    ``(log d_k, log var)``; ``progress`` shows a progress bar over the widths."""
    if len(dims) < 2 or any(d < 1 for d in dims):
        raise ValueError(f"dims must hold at least two widths >= 1, got {dims}")
    gen = torch.Generator().manual_seed(seed)
    variance, scaled, unscaled = [], [], []
    from attnlab.progress import progress as bar

    for d in bar(dims, desc="d_k", enabled=progress, leave=False):
        q = torch.randn(samples, num_keys, d, generator=gen, dtype=torch.float64)
        k = torch.randn(samples, num_keys, d, generator=gen, dtype=torch.float64)
        scores = dot_score(q, k)  # (samples, n, n)
        variance.append(float(scores.var()))
        scaled.append(float(row_entropy(torch.softmax(scores / math.sqrt(d), -1)).mean()))
        unscaled.append(float(row_entropy(torch.softmax(scores, -1)).mean()))
    slope = float(np.polyfit(np.log(dims), np.log(variance), 1)[0])
    return ScalingSweep(list(dims), num_keys, variance, scaled, unscaled, slope)


@torch.no_grad()
def minilm_entropy(encoder, encoded: EncodedSentence) -> list[dict[str, float]]:
    """Per layer of the encoder: MiniLM's real per-head ``q, k`` (``d_k = d/H``) for the sentence
    and the mean row entropy (over heads and queries) of ``softmax(QKᵀ/√d_k)`` (as trained)
    and of ``softmax(QKᵀ)`` (scaling removed), with ``var(qᵀk)`` over heads and pairs."""
    rows = []
    for layer, x in zip(encoder.model.encoder.layers, encoded.hidden, strict=False):
        attn = layer.self_attn
        n, d = x.shape
        q, k, _ = attn.in_proj(x.to(attn.in_proj.weight.device)).double().cpu().split(d, dim=-1)
        q = q.view(n, attn.num_heads, attn.head_dim).transpose(0, 1)  # (H, n, d_k)
        k = k.view(n, attn.num_heads, attn.head_dim).transpose(0, 1)  # (H, n, d_k)
        scores = dot_score(q, k)  # (H, n, n)
        rows.append({
            "var_qk": float(scores.var()),
            "entropy_scaled": float(row_entropy(torch.softmax(scores / math.sqrt(attn.head_dim), -1)).mean()),
            "entropy_unscaled": float(row_entropy(torch.softmax(scores, -1)).mean()),
        })
    return rows


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Heatmaps of ``softmax(XXᵀ)`` on MiniLM's vectors, the random-``q, k`` sweep and the real
    heads' entropies; numbers into the report (see the module docstring)."""
    torch.manual_seed(options.seed)
    report = LabReport("self-attention", TITLE, SOURCE)
    encoder = load_minilm(options)
    encoded = encoder.attention(SENTENCE)
    _heatmaps(report, out_dir, encoder, encoded)
    dims = [2**i for i in range(0, 11 if options.quick else 13)]
    sweep = scaling_sweep(dims, samples=100 if options.quick else 250, seed=options.seed,
                          progress=options.progress and not options.quick)
    _sweep_report(report, out_dir, sweep)
    _minilm_report(report, out_dir, minilm_entropy(encoder, encoded), len(encoded.tokens),
                   encoder.model.config.head_dim)
    return report


def _heatmaps(report: LabReport, out_dir: Path, encoder, encoded: EncodedSentence) -> None:
    table = encoder.model.token_embedding.weight  # (V, d)
    tokens_x = table[encoded.input_ids.to(table.device)]
    x_static = tokens_x.detach().double().cpu()  # (n, d) rows E[w]
    x_input = encoded.hidden[0].double()  # (n, d) LN(E[w] + E_type + P)
    d = x_static.shape[1]
    panels = [
        ("softmax(XXᵀ), X = token embeddings E[w]", x_static, 1.0),
        ("softmax(XXᵀ), X = layer-1 input LN(E + P)", x_input, 1.0),
        ("softmax(XXᵀ/√d), X = layer-1 input", x_input, 1 / math.sqrt(d)),
    ]
    results = [(title, *untrained_self_attention(x, scale)) for title, x, scale in panels]
    bank = encoded.index("bank")
    rows = []
    for key, (title, _, weights) in zip(("static", "input", "input_scaled"), results, strict=True):
        diagonal = report.number(f"{key}_mean_self_weight", float(weights.diagonal().mean()))
        others = weights[bank].clone()
        others[bank] = -1.0
        top = int(others.argmax())
        report.number(f"{key}_bank_top_other", encoded.tokens[top])
        rows.append([title, diagonal, f"{encoded.tokens[top]} ({float(weights[bank, top]):.3f})",
                     float(weights[bank, bank])])
    report.number("static_row_sum_max_error", float((results[0][2].sum(-1) - 1).abs().max()))
    report.text(
        f'Li\'s sentence "{SENTENCE}" as {len(encoded.tokens)} MiniLM word pieces, d = {d}. '
        "Each row of a heatmap is one token's attention coefficients a_ij (rows sum to 1); "
        "Y = AX mixes the rows of X with them."
    )
    report.table(["X and scores", "mean a_ii (self)", "'bank' → top other token", "'bank' → itself"], rows)
    path = _plot_heatmaps(out_dir / "self_attention_heatmaps.png", results, encoded.tokens)
    report.figure(path, "Untrained self-attention softmax(XXᵀ) on MiniLM's vectors of Li's sentence")


def _plot_heatmaps(path: Path, results: list, tokens: list[str]) -> Path:
    from matplotlib.figure import Figure

    from attnlab.visualize import draw_attention, save_figure

    fig = Figure(figsize=(17, 5.6), layout="constrained")
    for ax, (title, _, weights) in zip(fig.subplots(1, len(results)), results, strict=True):
        image = draw_attention(ax, weights, x_labels=tokens, y_labels=tokens, title=title, vmax=1.0)
    fig.colorbar(image, ax=fig.axes, label="attention coefficient a_ij", shrink=0.8)
    fig.suptitle("Untrained self-attention Y = softmax(XXᵀ)X (Li, Transformer Part I)")
    return save_figure(fig, path)


def _sweep_report(report: LabReport, out_dir: Path, sweep: ScalingSweep) -> None:
    report.number("variance_slope", sweep.slope)
    report.number("num_keys", sweep.num_keys)
    report.number("log_num_keys", math.log(sweep.num_keys))
    report.number("entropy_scaled", dict(zip(sweep.dims, sweep.entropy_scaled, strict=True)))
    report.number("entropy_unscaled", dict(zip(sweep.dims, sweep.entropy_unscaled, strict=True)))
    report.number("variance", dict(zip(sweep.dims, sweep.variance, strict=True)))
    report.text(
        f"Random q, k with i.i.d. N(0, 1) entries (seeded, float64). Fitted slope of log var(qᵀk) "
        f"against log d_k: **{sweep.slope:.4f}** (slides: var = d_k, slope 1). Softmax rows over "
        f"n = {sweep.num_keys} keys: entropy ceiling log n = {math.log(sweep.num_keys):.4f} nats."
    )
    rows = [[d, v, v / d, s, u] for d, v, s, u in
            zip(sweep.dims, sweep.variance, sweep.entropy_scaled, sweep.entropy_unscaled, strict=True)]
    report.table(["d_k", "var(qᵀk)", "var / d_k", "entropy, /√d_k", "entropy, unscaled"], rows)
    path = _plot_sweep(out_dir / "scaling_sweep.png", sweep)
    report.figure(path, "var(qᵀk) grows like d_k; without 1/√d_k the softmax entropy collapses")


def _plot_sweep(path: Path, sweep: ScalingSweep) -> Path:
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.loglog(sweep.dims, sweep.variance, "o-", label=f"measured (slope {sweep.slope:.3f})")
    left.loglog(sweep.dims, sweep.dims, "k--", lw=1, label="var = d_k (slides)")
    left.set(xlabel="d_k", ylabel="var(qᵀk)", title="Variance of the dot product")
    left.legend()
    right.semilogx(sweep.dims, sweep.entropy_scaled, "o-", label="softmax(qᵀk / √d_k)")
    right.semilogx(sweep.dims, sweep.entropy_unscaled, "s-", label="softmax(qᵀk)")
    right.axhline(math.log(sweep.num_keys), color="k", ls="--", lw=1, label=f"log n, n = {sweep.num_keys}")
    right.set(xlabel="d_k", ylabel="mean row entropy (nats)", title="Softmax entropy", ylim=(0, None))
    right.legend()
    return save_figure(fig, path)


def _minilm_report(report: LabReport, out_dir: Path, rows: list[dict[str, float]], n: int, d_k: int) -> None:
    report.number("minilm_entropy", rows)
    report.text(
        f"MiniLM's own per-head queries and keys for the same sentence (d_k = {d_k}, n = {n} keys, "
        f"log n = {math.log(n):.4f}): mean row entropy of its attention as trained (÷√d_k) and with "
        "the scaling removed (the same scores × √d_k)."
    )
    table = [[i + 1, r["var_qk"], r["var_qk"] / d_k, r["entropy_scaled"], r["entropy_unscaled"]]
             for i, r in enumerate(rows)]
    report.table(["layer", "var(qᵀk)", "var / d_k", "entropy, /√d_k", "entropy, unscaled"], table)
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.add_subplot()
    layers = np.arange(1, len(rows) + 1)
    ax.bar(layers - 0.2, [r["entropy_scaled"] for r in rows], 0.4, label="as trained, /√d_k")
    ax.bar(layers + 0.2, [r["entropy_unscaled"] for r in rows], 0.4, label="scaling removed")
    ax.axhline(math.log(n), color="k", ls="--", lw=1, label=f"log n, n = {n}")
    ax.set(xlabel="MiniLM layer", ylabel="mean row entropy (nats)", title=f"MiniLM heads, d_k = {d_k}",
           ylim=(0, 1.35 * math.log(n)))
    ax.legend(loc="upper right", ncols=3, fontsize=8)
    path = save_figure(fig, out_dir / "minilm_entropy.png")
    report.figure(path, "Attention entropy of MiniLM's real heads with and without 1/√d_k")
