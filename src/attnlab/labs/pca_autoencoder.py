"""PCA against a linear autoencoder on real MNIST digits (Hasegawa-Johnson (ECE 417 Lecture 21),
"PCA and Smart PCA", "Cosine Distance").

The deck's autoencoder ("smart PCA") codes an image ``x`` as ``h = Wᵀx`` and reconstructs it as
``x' = W h`` with one matrix ``W = [w_1 … w_K]`` trained to minimise
``MSE = (1/n) Σ_i ‖x_i − W Wᵀ x_i‖²``; PCA minimises the same MSE with orthonormal ``w_k``. So
both span the same subspace, the autoencoder's "a rotated version of the one chosen by PCA"
(the slide), its order and signs undecided. This lab checks that on the MNIST train split
(``attnlab.data.mnist``, ``$ATTNLAB_DATA/mnist``), pixels in ``[0, 1]``, centred by their mean:

* PCA: the top ``K`` eigenvectors of the covariance ``C = XᵀX/n``;
* the autoencoder: ``W`` from small random values, trained by full-batch gradient descent with
  momentum. Its loss is the per-image MSE above, evaluated through the identity
  ``(1/n) Σ_i ‖x_i − WWᵀx_i‖² = tr C − 2 tr(WᵀCW) + tr(WᵀCW WᵀW)`` so that one step costs
  ``O(d²K)`` instead of ``O(n d K)``; no eigenvector is computed for it;
* the principal angles between the two subspaces (:func:`principal_angles`), the
  reconstruction MSE of both measured on the images, the decoder's columns rotated into
  PCA's basis (PCA inside the autoencoder's subspace, signs matched for the picture), and the
  cosine-similarity maps ``x̂ᵀŷ`` of images and of their codes.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnlab.attention.scoring import cosine_score
from attnlab.data.mnist import source_digits
from attnlab.labs.checkpoints import corpora_needed
from attnlab.labs.report import LabOptions, LabReport

TITLE = "A linear autoencoder recovers the PCA subspace of MNIST digits"
SOURCE = 'Hasegawa-Johnson (ECE 417 Lecture 21), "PCA and Smart PCA"'

# (training images, components K, gradient steps, images per digit in the cosine maps)
SETTINGS = {True: (500, 4, 200, 2), False: (8000, 16, 500, 3)}
MOMENTUM = 0.9
SHOWN = 8  # components drawn


def load_digits(n: int, data_dir: str | None = None) -> tuple[Tensor, Tensor]:
    """The first ``n`` digits of the MNIST train split: ``x (n, 784)`` float64 in ``[0, 1]``,
    ``labels (n,)``."""
    with corpora_needed("pca-autoencoder"):
        digits = source_digits("train", data_dir)
    if not 0 < n <= digits.images.shape[0]:
        raise ValueError(f"n must be in 1..{digits.images.shape[0]}, got {n}")
    return digits.images[:n].reshape(n, -1).double() / 255, digits.labels[:n]


def pca(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Principal components of centred ``x (n, d)``: ``(k, d)`` orthonormal rows by decreasing
    variance, and every variance ``(d,)`` (eigenvalues of ``XᵀX/n``, decreasing)."""
    variances, vectors = torch.linalg.eigh(x.T @ x / x.shape[0])  # ascending
    return vectors.flip(1)[:, :k].T, variances.flip(0)


def autoencoder_loss(w: Tensor, cov: Tensor) -> Tensor:
    """``(1/n) Σ_i ‖x_i − WWᵀx_i‖²`` from ``C = XᵀX/n``: ``tr C − 2 tr(WᵀCW) + tr(WᵀCW WᵀW)``."""
    cw = cov @ w  # (d, K)
    return cov.trace() - 2 * (w * cw).sum() + ((w.T @ cw) * (w.T @ w)).sum()


def train_autoencoder(x: Tensor, k: int, steps: int, *, seed: int = 0,
                      progress: bool = False) -> tuple[Tensor, list[float]]:
    """The tied linear autoencoder ``x' = W Wᵀ x`` by full-batch gradient descent with momentum
    (step ``1/tr C``, the total variance). Returns ``W (d, K)`` and the loss before each step."""
    from attnlab.progress import progress as bar

    cov = x.T @ x / x.shape[0]  # (d, d)
    gen = torch.Generator().manual_seed(seed)
    w = (0.01 * torch.randn(x.shape[1], k, generator=gen, dtype=x.dtype)).requires_grad_()
    optimizer = torch.optim.SGD([w], lr=1.0 / float(cov.trace()), momentum=MOMENTUM)
    losses = []
    for _ in bar(range(steps), desc=f"autoencoder K={k}", enabled=progress, leave=False):
        optimizer.zero_grad()
        loss = autoencoder_loss(w, cov)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return w.detach(), losses


def principal_angles(a: Tensor, b: Tensor) -> Tensor:
    """Principal angles in degrees (ascending) between the column spaces of ``a`` and ``b``
    ``(d, k)``: cosines are the singular values of ``Q_aᵀQ_b``; small angles come from the
    sines, the singular values of ``Q_b − Q_a Q_aᵀ Q_b``, which keep their precision near 0."""
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape (d, k), got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    qa, qb = torch.linalg.qr(a)[0], torch.linalg.qr(b)[0]  # (d, k) orthonormal
    cos = torch.linalg.svdvals(qa.T @ qb).clamp(max=1.0)  # decreasing: angles increasing
    sin = torch.linalg.svdvals(qb - qa @ (qa.T @ qb)).flip(0).clamp(max=1.0)  # increasing
    return torch.rad2deg(torch.where(cos**2 < 0.5, torch.arccos(cos), torch.arcsin(sin)))


def rotate_into_pca_basis(w: Tensor, x: Tensor, components: Tensor) -> Tensor:
    """The autoencoder's subspace in PCA's basis: an orthonormal basis of ``W``'s columns turned
    by PCA *within* that subspace (no order there otherwise), each sign chosen to match
    ``components (K, d)`` (a sign is arbitrary). Returns ``(K, d)``."""
    q = torch.linalg.qr(w)[0]  # (d, K)
    codes = x @ q  # (n, K)
    _, turn = torch.linalg.eigh(codes.T @ codes)  # ascending variance inside the subspace
    basis = (q @ turn.flip(1)).T  # (K, d): decreasing variance
    return basis * torch.sign((basis * components).sum(1, keepdim=True))


def reconstruction_mse(x: Tensor, encode: Tensor, decode: Tensor) -> float:
    """``(1/n) Σ_i ‖x_i − decode · encodeᵀ x_i‖²`` measured on the images; ``(d, K)`` each."""
    return float(((x - (x @ encode) @ decode.T) ** 2).sum(1).mean())


def pick_per_digit(labels: Tensor, per_digit: int) -> Tensor:
    """Indices of the first ``per_digit`` images of each digit 0–9, grouped by digit."""
    return torch.cat([torch.nonzero(labels == c)[:per_digit, 0] for c in range(10)])


def cosine_maps(x: Tensor, pca_codes: Tensor, ae_codes: Tensor) -> dict[str, Tensor]:
    """Cosine similarity ``x̂ᵀŷ`` between every pair of images, of PCA codes, of autoencoder codes."""
    return {name: cosine_score(v, v)  # (m, m)
            for name, v in (("images", x), ("PCA codes", pca_codes), ("autoencoder codes", ae_codes))}


def same_digit_margin(sim: Tensor, labels: Tensor) -> float:
    """Mean cosine between different images of the same digit minus that between different digits."""
    same = labels[:, None] == labels[None, :]
    other = ~torch.eye(len(labels), dtype=torch.bool)
    return float(sim[same & other].mean() - sim[~same].mean())


def _images(spec, rows: list[tuple[str, Tensor]], signed: bool) -> None:
    axes = spec.subplots(len(rows), rows[0][1].shape[0], squeeze=False)
    for r, (name, images) in enumerate(rows):
        for c, image in enumerate(images):
            limit = float(image.abs().max()) if signed else 1.0
            axes[r, c].imshow(image.reshape(28, 28).numpy(), cmap="RdBu_r" if signed else "gray_r",
                              vmin=-limit if signed else 0.0, vmax=limit)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=8)


def plot_components(rows: list[tuple[str, Tensor]], recon: list[tuple[str, Tensor]], path: Path) -> Path:
    """Components (PCA, autoencoder rotated, autoencoder as learned) and reconstructions."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    width = max(1.3 * rows[0][1].shape[0], 7.0)
    fig = Figure(figsize=(width, 1.4 * (len(rows) + len(recon)) + 0.8), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[len(rows), len(recon)])
    _images(top, rows, signed=True)
    top.suptitle("components: PCA · decoder rotated into PCA's basis · decoder as learned")
    _images(bottom, recon, signed=False)
    bottom.suptitle("reconstructions of training digits")
    return save_figure(fig, path)


def plot_codes(pca_codes: Tensor, ae_codes: Tensor, labels: Tensor, path: Path) -> Path:
    """The deck's picture: the first two PCA codes beside a two-unit autoencoder's codes."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(11, 4.8), layout="constrained")
    titles = ("first two principal components", "the two hidden units of a linear autoencoder")
    for ax, codes, title in zip(fig.subplots(1, 2), (pca_codes, ae_codes), titles, strict=True):
        points = ax.scatter(codes[:, 0].numpy(), codes[:, 1].numpy(), c=labels.numpy(), cmap="tab10", s=4,
                            vmin=-0.5, vmax=9.5)
        ax.set_title(title)
        ax.set_aspect("equal", adjustable="datalim")
    fig.colorbar(points, ax=fig.axes, ticks=range(10), label="digit")
    return save_figure(fig, path)


def plot_cosines(maps: dict[str, Tensor], losses: list[float], floor: float, angles: Tensor,
                 path: Path) -> Path:
    """The training curve, the principal angles and the cosine-similarity maps."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(4.2 * (2 + len(maps)), 4), layout="constrained")
    axes = fig.subplots(1, 2 + len(maps))
    axes[0].semilogy([max(loss - floor, 1e-16) for loss in losses])
    axes[0].set_xlabel("gradient step")
    axes[0].set_title("autoencoder MSE − PCA's MSE")
    axes[1].bar(range(1, len(angles) + 1), angles.numpy())
    axes[1].set_xlabel("principal angle i")
    axes[1].set_title(f"principal angles (max {float(angles.max()):.2g}°)")
    for ax, (name, sim) in zip(axes[2:], maps.items(), strict=True):
        image = ax.imshow(sim.numpy(), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        ax.set_title(f"cosine similarity: {name}")
        ax.set_xlabel("digits, grouped 0 → 9")
    fig.colorbar(image, ax=axes[-1])
    return save_figure(fig, path)


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """PCA and the trained autoencoder side by side: angles, MSE, components, codes, cosines."""
    report = LabReport("pca-autoencoder", TITLE, SOURCE)
    n, k, steps, per_digit = SETTINGS[options.quick]
    raw, labels = load_digits(n, options.data_dir)
    x = raw - raw.mean(0)  # (n, d) centred
    components, variances = pca(x, k)  # (K, d), (d,)
    w, losses = train_autoencoder(x, k, steps, seed=options.seed, progress=options.progress)  # (d, K)
    angles = principal_angles(components.T, w)  # (K,) degrees
    rotated = rotate_into_pca_basis(w, x, components)  # (K, d)
    mse_pca = reconstruction_mse(x, components.T, components.T)
    mse_ae = reconstruction_mse(x, w, w)
    shown = min(SHOWN, k)
    orthonormal_error = float((w.T @ w - torch.eye(k, dtype=w.dtype)).abs().max())
    report.text(
        f"{n} MNIST training digits (784 pixels in [0, 1], centred), K = {k} components; the "
        f"autoencoder trained {steps} full-batch gradient steps (momentum {MOMENTUM}). Total "
        f"variance tr C = {float(variances.sum()):.3f}; PCA keeps "
        f"{float(variances[:k].sum() / variances.sum()):.1%} of it."
    )
    report.table(["", "PCA", "linear autoencoder"], [
        ["reconstruction MSE (1/n) Σ‖x − x'‖²", mse_pca, mse_ae],
        ["autoencoder MSE − PCA MSE", 0.0, mse_ae - mse_pca],
        ["tr(C) − Σ_{k≤K} λ_k (PCA's optimum)", float(variances[k:].sum()), "-"],
        ["largest principal angle to PCA (°)", 0.0, float(angles.max())],
        ["max |WᵀW − I| (orthonormal columns)", 0.0, orthonormal_error],
    ])
    report.table(["component", *map(str, range(1, k + 1))],
                 [["principal angle (°)", *angles.tolist()],
                  ["|cos| PCA vs rotated decoder", *(rotated * components).sum(1).abs().tolist()]])
    pick = pick_per_digit(labels, per_digit)
    maps = cosine_maps(x[pick], (x @ components.T)[pick], (x @ w)[pick])
    codes_diff = float((maps["PCA codes"] - maps["autoencoder codes"]).abs().max())
    margins = {name: same_digit_margin(sim, labels[pick]) for name, sim in maps.items()}
    report.text(
        "Cosine similarity between digits (same digit minus different digits, mean): "
        + ", ".join(f"{name} {m:.3f}" for name, m in margins.items())
        + f". PCA codes and autoencoder codes differ by at most {codes_diff:.2e}: a rotation keeps every "
        "angle."
    )
    w2, _ = train_autoencoder(x, 2, steps, seed=options.seed, progress=options.progress)  # (d, 2)
    report.number("max_angle_deg", float(angles.max()))
    report.number("angles_deg", angles.tolist())
    report.number("mse_pca", mse_pca)
    report.number("mse_autoencoder", mse_ae)
    report.number("loss_final", losses[-1])
    report.number("max_angle_2_units_deg", float(principal_angles(components[:2].T, w2).max()))
    report.number("cosine_codes_max_diff", codes_diff)
    report.number("same_digit_margin", margins)
    rows = [("PCA", components[:shown]), ("AE rotated", rotated[:shown]), ("AE as learned", w.T[:shown])]
    first, mean = x[:shown], raw.mean(0)  # (shown, d), (d,)
    recon = [("original", raw[:shown]), ("PCA", (first @ components.T @ components + mean).clamp(0, 1)),
             ("autoencoder", (first @ w @ w.T + mean).clamp(0, 1))]
    report.figure(plot_components(rows, recon, out_dir / "components.png"),
                  "PCA components beside the autoencoder's decoder (rotated, as learned); reconstructions")
    report.figure(plot_codes(x @ components[:2].T, x @ w2, labels, out_dir / "codes.png"),
                  "The first two PCA codes beside the codes of a two-unit linear autoencoder")
    floor = float(variances[k:].sum())  # PCA's MSE
    report.figure(plot_cosines(maps, losses, floor, angles, out_dir / "angles_and_cosines.png"),
                  "Training, principal angles and cosine-similarity maps (digits grouped 0 → 9)")
    return report
