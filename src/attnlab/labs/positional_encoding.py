"""Positional encodings and what they do to a score: sinusoids, RoPE and ALiBi against distance
(Ba (CSC413 Lecture 8), "Positional Encoding"; Steinert-Threlkeld (Transformers I),
"Representing Order", "Fixed vs Learned Positional Encoding").

* **Sinusoids** ``PE(pos, 2i) = sin(pos/10000^{2i/d})``, ``PE(pos, 2i+1) = cos(pos/10000^{2i/d})``
  from :class:`~attnlab.modules.positional.SinusoidalPositionalEncoding`: the table as a
  heatmap (position × dimension), and the dot product ``PE(p)·PE(p+k)`` against the distance
  ``k`` from several start positions ``p``. Each sin/cos pair contributes
  ``sin(pω)sin((p+k)ω) + cos(pω)cos((p+k)ω) = cos(kω)``, so the dot product is
  ``Σ_i cos(k ω_i)``: a function of ``k`` alone (the Gram matrix is constant along its
  diagonals) and ``d/2`` at ``k = 0``.
* **RoPE** (:class:`~attnlab.modules.positional.RotaryEmbedding`): the score
  ``⟨R_p q, R_{p+k} k⟩`` of a fixed query and key placed ``k`` apart, from several ``p``.
  For ``q = k = (1, …, 1)`` it is ``2 Σ_i cos(k θ_i)``: with ``head_dim = d`` and the same base
  it is exactly twice the sinusoids' dot product.
* **ALiBi** (:class:`~attnlab.modules.positional.ALiBi`): the bias ``−m_h |k|`` each head adds
  to a score, a straight line per head with the paper's slopes ``2^{−8h/H}``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnlab.labs.report import LabOptions, LabReport
from attnlab.modules.positional import ALiBi, RotaryEmbedding, SinusoidalPositionalEncoding

TITLE = "Positional encodings: the sinusoid table, and scores against distance for sinusoids, RoPE, ALiBi"
SOURCE = ('Ba (CSC413 Lecture 8), "Positional Encoding"; '
          'Steinert-Threlkeld (Transformers I), "Representing Order"')

# (d_model = RoPE head width, positions in the heatmap, largest distance k, ALiBi heads)
SETTINGS = {True: (64, 64, 48, 8), False: (128, 128, 100, 8)}
STARTS = (0, 7, 30, 61)  # start positions p of the distance curves
SHOWN_K = (0, 1, 2, 5, 10, 20, 50)  # distances tabulated in the report


def sinusoid_table(d_model: int, n: int) -> Tensor:
    """``PE`` for positions ``0 .. n−1``: ``(n, d_model)`` float64."""
    return SinusoidalPositionalEncoding(d_model).table(n)


def by_distance(gram: Tensor, starts: tuple[int, ...], max_k: int) -> Tensor:
    """``gram[p, p + k]`` for each start ``p`` and ``k = 0 .. max_k``: ``(len(starts), max_k + 1)``."""
    k = torch.arange(max_k + 1)  # (K,)
    return torch.stack([gram[p, p + k] for p in starts])  # (S, K)


def rope_gram(q: Tensor, k: Tensor, n: int, base: float = 10000.0) -> Tensor:
    """Scores ``⟨R_m q, R_n k⟩`` of query ``q`` at every position ``m`` and key ``k`` at every
    ``n < n``: ``q, k (d_h,)`` → ``(n, n)``."""
    rope = RotaryEmbedding(q.shape[-1], base=base)
    rotated_q = rope.rotate(q.expand(n, -1))  # (n, d_h): row m rotated by m θ
    rotated_k = rope.rotate(k.expand(n, -1))  # (n, d_h)
    return rotated_q @ rotated_k.T  # (n, n)


def alibi_gram(num_heads: int, n: int) -> Tensor:
    """ALiBi's bias of query ``i`` and key ``j``, all heads: ``(H, n, n)`` (queries at 0 .. n−1)."""
    return ALiBi(num_heads)(n, n, offset=0).double()  # (H, n, n)


def spread(curves: Tensor) -> float:
    """Largest difference between the curves of different start positions (0: distance only)."""
    return float((curves.max(0).values - curves.min(0).values).abs().max())


def plot_table(table: Tensor, gram: Tensor, path: Path) -> Path:
    """The sinusoid table (position × dimension) and its Gram matrix ``PE PEᵀ``."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    blocks = torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)  # (n, d): sin dims, then cos dims
    image = left.imshow(blocks.numpy(), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                        interpolation="nearest")
    left.axvline(table[:, 0::2].shape[1] - 0.5, color="k", lw=1)
    left.set_xlabel("dimension: sin(pos ω_i) at 2i (left half), cos(pos ω_i) at 2i+1 (right half)")
    left.set_ylabel("position")
    left.set_title(f"sinusoidal PE, d = {table.shape[1]}")
    fig.colorbar(image, ax=left)
    image = right.imshow(gram.numpy(), cmap="viridis", aspect="equal", interpolation="nearest")
    right.set_xlabel("position p + k")
    right.set_ylabel("position p")
    right.set_title("PE(p)·PE(p+k): constant along each diagonal")
    fig.colorbar(image, ax=right)
    return save_figure(fig, path)


def plot_curves(pe: Tensor, rope: Tensor, rope_ones: Tensor, alibi: Tensor, slopes: list[float],
                path: Path) -> Path:
    """Score against distance ``k``: sinusoids, RoPE (random and all-ones q, k), ALiBi per head."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(15, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    ks = range(pe.shape[1])
    for row, p in enumerate(STARTS):
        axes[0].plot(ks, pe[row].numpy(), lw=3 - 0.6 * row, label=f"p = {p}")
        axes[1].plot(ks, rope[row].numpy(), lw=3 - 0.6 * row, label=f"random q, k; p = {p}")
    axes[1].plot(ks, rope_ones[0].numpy(), "k--", lw=1, label="q = k = 1 (all p)")
    axes[0].set_title("sinusoids: PE(p)·PE(p+k)")
    axes[1].set_title("RoPE: ⟨R_p q, R_(p+k) k⟩")
    for h, slope in enumerate(slopes):
        axes[2].plot(ks, alibi[h].numpy(), label=f"head {h + 1}: m = 1/{1 / slope:g}")
    axes[2].set_title("ALiBi: bias −m·|k| added to the score")
    for ax in axes:
        ax.set_xlabel("distance k")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("score")
    return save_figure(fig, path)


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """The heatmap and the three distance curves, with the checks that they depend on k only."""
    report = LabReport("positional-encoding", TITLE, SOURCE)
    d, n_heat, max_k, heads = SETTINGS[options.quick]
    n = max(STARTS) + max_k + 1  # every p + k fits
    table = sinusoid_table(d, n)  # (n, d)
    gram = table @ table.T  # (n, n)
    pe = by_distance(gram, STARTS, max_k)  # (S, K)
    gen = torch.Generator().manual_seed(options.seed)
    q, k = torch.randn(2, d, generator=gen, dtype=torch.float64)  # (d,), (d,)
    rope = by_distance(rope_gram(q, k, n), STARTS, max_k)  # (S, K)
    ones = torch.ones(d, dtype=torch.float64)
    rope_ones = by_distance(rope_gram(ones, ones, n), STARTS, max_k)  # (S, K)
    bias = alibi_gram(heads, n)  # (H, n, n)
    alibi = torch.stack([by_distance(b, STARTS, max_k) for b in bias])  # (H, S, K)
    slopes = ALiBi(heads).slopes.tolist()

    report.text(
        f"d = {d}; distances k = 0 … {max_k} from start positions p = {', '.join(map(str, STARTS))}. "
        "Each sin/cos pair of the sinusoids contributes cos(k ω_i) to PE(p)·PE(p+k), so the dot "
        "product depends on k alone; the spreads below are the largest difference between the "
        "curves of different p (float64)."
    )
    report.table(["scheme", "score at k = 0", "spread across p", "checks"], [
        ["sinusoids PE(p)·PE(p+k)", float(pe[0, 0]), spread(pe), f"= d/2 = {d // 2} at k = 0"],
        ["RoPE, random q, k", float(rope[0, 0]), spread(rope), "q·k at k = 0"],
        ["RoPE, q = k = 1", float(rope_ones[0, 0]), spread(rope_ones),
         f"2 × sinusoids' dot product: max |diff| {float((rope_ones - 2 * pe).abs().max()):.2e}"],
        ["ALiBi, each head", 0.0, max(spread(a) for a in alibi), "−m·k, a line per head"],
    ])
    shown = [k for k in SHOWN_K if k <= max_k]
    report.table(["k", *map(str, shown)], [
        ["PE(p)·PE(p+k) / (d/2)", *[float(pe[0, k]) / (d / 2) for k in shown]],
        ["RoPE q = k = 1, / d", *[float(rope_ones[0, k]) / d for k in shown]],
        [f"ALiBi head 1 (m = {slopes[0]:g})", *[float(alibi[0, 0, k]) + 0.0 for k in shown]],  # no -0
    ], caption="Scores against distance (from p = 0).")
    report.number("d_model", d)
    report.number("pe_dot_at_0", float(pe[0, 0]))
    report.number("pe_dot_spread", spread(pe))
    report.number("pe_dot_curve", pe[0].tolist())
    report.number("rope_spread", spread(rope))
    report.number("rope_ones_vs_twice_pe", float((rope_ones - 2 * pe).abs().max()))
    report.number("alibi_spread", max(spread(a) for a in alibi))
    report.number("alibi_slopes", slopes)
    report.figure(plot_table(table[:n_heat], gram[:n_heat, :n_heat], out_dir / "sinusoid_heatmap.png"),
                  "The sinusoid table (position × dimension) and its Gram matrix PE·PEᵀ")
    report.figure(plot_curves(pe, rope, rope_ones, alibi[:, 0], slopes, out_dir / "score_vs_distance.png"),
                  "Score against distance k from several start positions p: sinusoids, RoPE, ALiBi")
    return report
