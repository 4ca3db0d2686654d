"""Attention pooling as kernel regression, with fixed and learned bandwidths (López et al.
(Attention Mechanisms), "Queries, Keys and Values", "Attention Scoring Functions").

The training set is a database of 50 (key, value) pairs: inputs ``x_i ∈ [0, 5]`` as keys and
noisy targets ``y_i = 2 sin(x_i) + x_i^0.8 + ε`` (``ε ~ N(0, 0.5²)``) as values. Every test
input is a query; its prediction is attention pooling ``Σ_i α(x, x_i) y_i`` (eq. 2) with

* average pooling (``α = 1/50``, the query is ignored),
* Nadaraya–Watson weights from the Gaussian, boxcar and Epanechnikov kernels at bandwidths
  chosen by eye (:data:`BANDWIDTHS`), and
* parametric attention pooling: the Gaussian kernel with its bandwidth ``h = exp(w)``
  learned by gradient descent on the leave-one-out error over the database
  (:func:`attnlab.attention.pooling.fit_bandwidth`).

:func:`run` reports each method's test MSE against the noise-free function, the learned
bandwidth and its loss curve, and saves two PNGs: the fits above each method's attention
weights (test queries × training keys), and the learning curve beside the leave-one-out and
test error of every bandwidth on a grid. ``attnlab lab pooling`` runs it; so does
``attnlab demo --pooling`` (:mod:`attnlab.labs.demo`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnlab.attention.pooling import average_pooling, fit_bandwidth, leave_one_out_mask, nadaraya_watson
from attnlab.labs.report import LabOptions, LabReport

TITLE = "Attention pooling: Nadaraya–Watson kernels and a learned bandwidth"
SOURCE = 'López et al. (Attention Mechanisms), "Queries, Keys and Values"'

# Bandwidths chosen by eye on a validation draw: wide enough to average out the noise, narrow
# enough to follow the sine. Bounded kernels need a wider h than the Gaussian's std.
BANDWIDTHS: dict[str, float] = {"gaussian": 0.25, "boxcar": 0.4, "epanechnikov": 0.5}
START_BANDWIDTH = 1.0  # the learned bandwidth starts 4x too wide
LEARN_STEPS = {True: 80, False: 200}  # quick, full
LEARN_RATE = 0.05  # Adam on log h
GRID = (0.05, 2.0, 60)  # bandwidths of the leave-one-out curve: geometric, from, to, points


AXIS_NAMES = ("training key index (sorted by x)", "test query index (x = 0 → 5)")


def true_function(x: Tensor) -> Tensor:
    """The noise-free target ``f(x) = 2 sin(x) + x^0.8``."""
    return 2 * torch.sin(x) + x**0.8


@dataclass
class PoolingData:
    """Training database (sorted keys, noisy values) and a test grid with the true values."""

    x_train: Tensor  # (n_train,)
    y_train: Tensor  # (n_train,)
    x_test: Tensor  # (n_test,)
    y_true: Tensor  # (n_test,)


@dataclass
class PoolingFit:
    """One method's predictions on the test grid and its attention weights."""

    name: str
    bandwidth: float | None
    predictions: Tensor  # (n_test,)
    weights: Tensor  # (n_test, n_train)
    mse: float


def make_data(
    n_train: int = 50, n_test: int = 101, noise: float = 0.5, seed: int = 0
) -> PoolingData:
    """Draw ``n_train`` sorted inputs uniformly on ``[0, 5]`` with noisy targets (float64)."""
    gen = torch.Generator().manual_seed(seed)
    x_train = torch.sort(5 * torch.rand(n_train, generator=gen, dtype=torch.float64)).values
    eps = noise * torch.randn(n_train, generator=gen, dtype=torch.float64)
    x_test = torch.linspace(0, 5, n_test, dtype=torch.float64)
    return PoolingData(x_train, true_function(x_train) + eps, x_test, true_function(x_test))


def fit_all(data: PoolingData, bandwidths: dict[str, float] | None = None) -> list[PoolingFit]:
    """Average pooling, then Nadaraya–Watson with each kernel in ``bandwidths``."""
    bandwidths = BANDWIDTHS if bandwidths is None else bandwidths
    pred, weights = average_pooling(data.x_test, data.y_train, return_weights=True)
    fits = [_fit("average", None, pred, weights, data)]
    for kernel, h in bandwidths.items():
        fits.append(kernel_fit(data, kernel, h))
    return fits


def kernel_fit(data: PoolingData, kernel: str, h: float, name: str | None = None) -> PoolingFit:
    """Nadaraya–Watson with ``kernel`` at bandwidth ``h`` on the test grid."""
    pred, weights = nadaraya_watson(
        data.x_test, data.x_train, data.y_train, kernel, h, return_weights=True
    )  # (n_test,), (n_test, n_train)
    return _fit(name or kernel, h, pred, weights, data)


def _fit(
    name: str, h: float | None, pred: Tensor, weights: Tensor, data: PoolingData
) -> PoolingFit:
    mse = float(((pred - data.y_true) ** 2).mean())
    return PoolingFit(name, h, pred, weights, mse)


def learn_bandwidth(data: PoolingData, steps: int) -> tuple[PoolingFit, list[float]]:
    """The Gaussian bandwidth learned on the database's leave-one-out error; its test fit and
    the loss before each step."""
    model, losses = fit_bandwidth(
        data.x_train, data.y_train, kernel="gaussian", bandwidth=START_BANDWIDTH, steps=steps, lr=LEARN_RATE
    )
    h = float(model.bandwidth.detach())
    return kernel_fit(data, "gaussian", h, name="learned gaussian"), losses


def bandwidth_curves(data: PoolingData, bandwidths: Tensor) -> tuple[Tensor, Tensor]:
    """Gaussian leave-one-out MSE on the database and test MSE against the truth, one per
    bandwidth: ``(n_h,)`` each."""
    mask = leave_one_out_mask(data.x_train.shape[0])  # (n_train, n_train)
    loo, test = [], []
    for h in bandwidths.tolist():
        pred = nadaraya_watson(data.x_train, data.x_train, data.y_train, "gaussian", h, mask=mask)
        loo.append(float(((pred - data.y_train) ** 2).mean()))
        test.append(kernel_fit(data, "gaussian", h).mse)
    return torch.tensor(loo, dtype=torch.float64), torch.tensor(test, dtype=torch.float64)


def plot(data: PoolingData, fits: list[PoolingFit], path: str | Path) -> Path:
    """One column per method: the fit above, the attention weights below. Returns ``path``."""
    from matplotlib.figure import Figure

    from attnlab.visualize import draw_attention, save_figure

    fig = Figure(figsize=(4 * len(fits), 7.5), layout="constrained")
    axes = fig.subplots(2, len(fits), squeeze=False)
    vmax = max(float(fit.weights.max()) for fit in fits)  # one colour scale for every method
    for col, fit in enumerate(fits):
        top, bottom = axes[0, col], axes[1, col]
        top.plot(data.x_train.numpy(), data.y_train.numpy(), "o", ms=3, alpha=0.5,
                 label="training (keys, values)")
        top.plot(data.x_test.numpy(), data.y_true.numpy(), "k--", lw=1, label="truth")
        top.plot(data.x_test.numpy(), fit.predictions.numpy(), lw=2, label="prediction")
        h = "" if fit.bandwidth is None else f", h={fit.bandwidth:.3g}"
        top.set_title(f"{fit.name}{h}: MSE {fit.mse:.3f}")
        top.set_xlabel("x")
        image = draw_attention(bottom, fit.weights, vmax=vmax, axis_names=AXIS_NAMES)
    axes[0, 0].legend(fontsize=8)
    fig.colorbar(image, ax=axes[1, :].tolist(), label="attention weight")
    fig.suptitle("Attention pooling: y = 2 sin(x) + x^0.8 + noise (López et al., Attention Mechanisms)")
    return save_figure(fig, path)


def plot_learning(
    losses: list[float], grid: Tensor, loo: Tensor, test: Tensor, learned: PoolingFit, path: str | Path
) -> Path:
    """The leave-one-out loss by step; leave-one-out and test MSE against the bandwidth."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(11, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot(range(len(losses)), losses)
    left.set_xlabel("gradient step (Adam on w = log h)")
    left.set_ylabel("leave-one-out MSE on the database")
    left.set_title(f"learning h from {START_BANDWIDTH:g}: ends at h = {learned.bandwidth:.3f}")
    right.semilogx(grid.numpy(), loo.numpy(), label="leave-one-out MSE (training values)")
    right.semilogx(grid.numpy(), test.numpy(), label="test MSE (against the true function)")
    right.axvline(learned.bandwidth, color="k", ls="--", lw=1, label=f"learned h = {learned.bandwidth:.3f}")
    right.axvline(BANDWIDTHS["gaussian"], color="grey", ls=":", lw=1,
                  label=f"fixed h = {BANDWIDTHS['gaussian']:g}")
    right.set_xlabel("Gaussian bandwidth h")
    right.set_ylabel("MSE")
    right.legend(fontsize=8)
    return save_figure(fig, path)


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Fit every method and learn the bandwidth; write both pictures into ``out_dir``."""
    report = LabReport("pooling", TITLE, SOURCE)
    data = make_data(seed=options.seed)
    learned, losses = learn_bandwidth(data, LEARN_STEPS[options.quick])
    fits = [*fit_all(data), learned]
    report.text(
        f"A database of {data.x_train.shape[0]} pairs (x_i, y_i = 2 sin x_i + x_i^0.8 + noise), "
        f"queried at {data.x_test.shape[0]} test inputs: attention pooling Σ_i α(x, x_i) y_i (eq. 2) "
        "with uniform weights, three kernels at fixed bandwidths, and the Gaussian kernel whose "
        f"bandwidth h = exp(w) is learned by gradient descent ({len(losses)} Adam steps from "
        f"h = {START_BANDWIDTH:g}) on the leave-one-out error: each y_i predicted from the other pairs."
    )
    rows = [[fit.name, "-" if fit.bandwidth is None else round(fit.bandwidth, 4), fit.mse] for fit in fits]
    report.table(["method", "bandwidth", "test MSE"], rows)
    for fit in fits:
        report.number(f"mse_{fit.name.replace(' ', '_')}", fit.mse)
    report.number("learned_bandwidth", learned.bandwidth)
    report.number("loo_loss_start", losses[0])
    report.number("loo_loss_end", losses[-1])
    grid = torch.logspace(math.log10(GRID[0]), math.log10(GRID[1]), GRID[2], dtype=torch.float64)  # (n_h,)
    loo, test = bandwidth_curves(data, grid)
    report.number("grid_best_loo_bandwidth", float(grid[loo.argmin()]))
    report.number("grid_best_test_bandwidth", float(grid[test.argmin()]))
    report.text(
        f"The learned bandwidth h = {learned.bandwidth:.3f} (leave-one-out MSE {losses[0]:.3f} → "
        f"{losses[-1]:.3f}); on a grid of {GRID[2]} bandwidths the leave-one-out error is lowest at "
        f"h = {float(grid[loo.argmin()]):.3f} and the test error at h = {float(grid[test.argmin()]):.3f}. "
        f"Test MSE: learned {learned.mse:.4f}, average pooling {fits[0].mse:.4f}."
    )
    report.figure(plot(data, fits, out_dir / "attention_pooling.png"),
                  "Each method's fit (top) and attention weights, test queries × training keys (bottom)")
    report.figure(plot_learning(losses, grid, loo, test, learned, out_dir / "learned_bandwidth.png"),
                  "Learning the bandwidth: the leave-one-out loss by step, and both errors against h")
    return report
