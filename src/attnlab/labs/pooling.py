"""Attention pooling as kernel regression (López et al. (Attention Mechanisms), "Queries, Keys
and Values").

The training set is a database of 50 (key, value) pairs: inputs ``x_i ∈ [0, 5]`` as keys and
noisy targets ``y_i = 2 sin(x_i) + x_i^0.8 + ε`` (``ε ~ N(0, 0.5²)``) as values. Every test
input is a query; its prediction is attention pooling ``Σ_i α(x, x_i) y_i`` with

* average pooling (``α = 1/50``, the query is ignored), and
* Nadaraya–Watson weights from the Gaussian, boxcar and Epanechnikov kernels.

:func:`run` prints each method's test MSE against the noise-free function and saves one PNG:
the fits on top, each method's attention-weight matrix (test queries × training keys) below.
Run it with ``python -m attnlab.labs.demo --pooling`` or ``attnlab demo --pooling --out DIR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnlab.attention.pooling import average_pooling, nadaraya_watson

# Bandwidths chosen by eye on a validation draw: wide enough to average out the noise, narrow
# enough to follow the sine. Bounded kernels need a wider h than the Gaussian's std.
BANDWIDTHS: dict[str, float] = {"gaussian": 0.25, "boxcar": 0.4, "epanechnikov": 0.5}


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
        pred, weights = nadaraya_watson(
            data.x_test, data.x_train, data.y_train, kernel, h, return_weights=True
        )  # (n_test,), (n_test, n_train)
        fits.append(_fit(kernel, h, pred, weights, data))
    return fits


def _fit(
    name: str, h: float | None, pred: Tensor, weights: Tensor, data: PoolingData
) -> PoolingFit:
    mse = float(((pred - data.y_true) ** 2).mean())
    return PoolingFit(name, h, pred, weights, mse)


def format_table(fits: list[PoolingFit]) -> str:
    """A plain-text table: method, bandwidth, test MSE against the true function."""
    lines = [f"{'method':<14}{'bandwidth':>10}{'test MSE':>10}"]
    for fit in fits:
        h = "-" if fit.bandwidth is None else f"{fit.bandwidth:g}"
        lines.append(f"{fit.name:<14}{h:>10}{fit.mse:>10.4f}")
    return "\n".join(lines)


def plot(data: PoolingData, fits: list[PoolingFit], path: str | Path) -> Path:
    """One column per method: the fit above, the attention weights below. Returns ``path``."""
    from matplotlib.figure import Figure

    from attnlab.visualize import draw_attention

    fig = Figure(figsize=(4 * len(fits), 7.5), layout="constrained")
    axes = fig.subplots(2, len(fits), squeeze=False)
    vmax = max(float(fit.weights.max()) for fit in fits)  # one colour scale for every method
    for col, fit in enumerate(fits):
        top, bottom = axes[0, col], axes[1, col]
        top.plot(data.x_train, data.y_train, "o", ms=3, alpha=0.5, label="training (keys, values)")
        top.plot(data.x_test, data.y_true, "k--", lw=1, label="truth")
        top.plot(data.x_test, fit.predictions, lw=2, label="prediction")
        h = "" if fit.bandwidth is None else f", h={fit.bandwidth:g}"
        top.set_title(f"{fit.name}{h}: MSE {fit.mse:.3f}")
        top.set_xlabel("x")
        image = draw_attention(bottom, fit.weights, vmax=vmax)
        bottom.set_xlabel("training key index (sorted by x)")
        bottom.set_ylabel("test query index (x = 0 → 5)")
    axes[0, 0].legend(fontsize=8)
    fig.colorbar(image, ax=axes[1, :].tolist(), label="attention weight")
    fig.suptitle("Attention pooling: y = 2 sin(x) + x^0.8 + noise (López et al., Attention Mechanisms)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def run(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Fit every method, print the MSE table, save ``out_dir/attention_pooling.png``; return it."""
    data = make_data(seed=seed)
    fits = fit_all(data)
    print(format_table(fits))
    return plot(data, fits, Path(out_dir) / "attention_pooling.png")
