"""Attention heatmaps and the attention-pooling demo (issue 2): real PNGs, end to end."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from attnlab import cli
from attnlab.labs.pooling import fit_all, make_data
from attnlab.visualize import plot_attention, plot_attention_heads

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png(path, min_side=100):
    """A real PNG: signature, decodable, non-trivial size and not a blank canvas."""
    from matplotlib.image import imread

    assert path.is_file() and path.read_bytes()[:8] == PNG_SIGNATURE
    assert path.stat().st_size > 5_000
    pixels = imread(path)
    assert pixels.ndim == 3 and min(pixels.shape[:2]) >= min_side
    assert pixels[..., :3].std() > 0.05  # something was drawn


def test_plot_attention_png(tmp_path):
    weights = torch.softmax(torch.randn(1, 1, 5, 7), dim=-1).requires_grad_()
    path = plot_attention(
        weights,
        tmp_path / "sub" / "attn.png",
        x_labels=[f"k{i}" for i in range(7)],
        y_labels=[f"q{i}" for i in range(5)],
        title="one head",
    )
    assert path == tmp_path / "sub" / "attn.png"
    check_png(path)
    check_png(plot_attention(np.eye(4), tmp_path / "eye.png"))


def test_plot_attention_heads_png(tmp_path):
    weights = torch.softmax(torch.randn(6, 4, 9), dim=-1)  # 6 heads on a 4-column grid
    check_png(plot_attention_heads(weights, tmp_path / "heads.png", title="six heads"))
    check_png(plot_attention_heads(weights[None, :2], tmp_path / "two.png", ncols=1))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda p: plot_attention(np.ones((2, 3, 4)), p), r"weights must have shape \(n_q, n_k\)"),
        (lambda p: plot_attention(np.ones((2, 3)), p, x_labels=["a"]), "x_labels has 1 labels"),
        (lambda p: plot_attention(np.ones((2, 3)), p, y_labels=["a"]), "y_labels has 1 labels"),
        (lambda p: plot_attention_heads(np.ones((3, 4)), p), r"weights must have shape \(H"),
        (lambda p: plot_attention_heads(np.ones((2, 3, 4)), p, ncols=0), "ncols must be >= 1"),
    ],
)
def test_bad_inputs_raise_value_error(tmp_path, call, match):
    with pytest.raises(ValueError, match=match):
        call(tmp_path / "x.png")


def test_import_does_not_load_matplotlib():
    code = "import sys, attnlab, attnlab.visualize; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pooling_demo_runs_end_to_end_through_the_cli(tmp_path, capsys):
    assert cli.main(["demo", "--pooling", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in ("average", "gaussian", "boxcar", "epanechnikov", "test MSE"):
        assert name in printed
    picture = (tmp_path / "attention_pooling.png").resolve()
    assert f"picture: {picture}" in printed
    check_png(picture, min_side=500)


def test_kernel_regression_beats_average_pooling():
    """Independent check: MSE recomputed in NumPy from the predictions and the true function."""
    data = make_data(seed=0)
    x = data.x_test.numpy()
    truth = 2 * np.sin(x) + x**0.8
    fits = fit_all(data)
    mse = {fit.name: float(np.mean((fit.predictions.numpy() - truth) ** 2)) for fit in fits}
    assert set(mse) == {"average", "gaussian", "boxcar", "epanechnikov"}
    # average pooling predicts the training mean everywhere; every kernel should do far better
    assert mse["average"] == pytest.approx(np.mean((truth - data.y_train.numpy().mean()) ** 2))
    for kernel in ("gaussian", "boxcar", "epanechnikov"):
        assert mse[kernel] < 0.25 * mse["average"], (kernel, mse)
    for fit in fits:  # the demo's own table reports the same numbers
        assert fit.mse == pytest.approx(mse[fit.name], rel=1e-12)


# ---------------------------------------------------------------- what the pictures encode
def _render(weights, **labels):
    """Draw ``weights`` with draw_attention on an Agg canvas; return (rgba pixels, axes)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attnlab.visualize import draw_attention

    fig = Figure(figsize=(4, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw_attention(ax, weights, **labels)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(float), ax


def _cell_luminance(pixels, ax, i, j):
    """Luminance of the pixel at the centre of cell (row i, column j)."""
    x, y = ax.transData.transform((j, i))
    r, g, b = pixels[pixels.shape[0] - int(round(y)), int(round(x))]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_cell_brightness_is_monotone_in_the_weight():
    weights = np.linspace(0.0, 1.0, 12).reshape(3, 4)  # every cell a different weight
    pixels, ax = _render(weights)
    lum = [_cell_luminance(pixels, ax, i, j) for i in range(3) for j in range(4)]
    assert all(b > a for a, b in zip(lum, lum[1:], strict=False)), lum  # viridis: dark → bright


def test_tick_labels_are_the_given_tokens():
    keys, queries = ["Ein", "Hund", "läuft", "."], ["A", "dog", "runs"]
    _, ax = _render(np.full((3, 4), 0.25), x_labels=keys, y_labels=queries)
    assert [t.get_text() for t in ax.get_xticklabels()] == keys
    assert [t.get_text() for t in ax.get_yticklabels()] == queries
    assert list(ax.get_xticks()) == [0, 1, 2, 3] and list(ax.get_yticks()) == [0, 1, 2]


def test_a_diagonal_alignment_draws_a_diagonal(tmp_path):
    """The saved PNG: the bright (weight-1) cells of a monotone alignment run down and to
    the right, one per row, in order."""
    from matplotlib.image import imread

    n = 6
    path = plot_attention(np.eye(n), tmp_path / "diag.png", x_labels=list("abcdef"), y_labels=list("uvwxyz"))
    rgb = imread(path)[..., :3]
    bright = (rgb[..., 0] > 0.9) & (rgb[..., 1] > 0.8) & (rgb[..., 2] < 0.3)  # viridis yellow
    cols = np.where(bright.any(axis=0))[0]
    gaps = np.where(np.diff(cols) > 5)[0]
    if len(gaps):  # the colour bar's bright top stands apart, right of the matrix
        bright[:, cols[gaps[-1]] + 1 :] = False
    rows = np.where(bright.any(axis=1))[0]
    centres = np.array([np.where(bright[r])[0].mean() for r in rows])  # top to bottom
    assert np.all(np.diff(centres) >= 0), "a bright cell lies left of the one above it"
    steps = np.split(centres, np.where(np.diff(centres) > 3)[0] + 1)  # one plateau per row
    assert len(steps) == n and all(len(step) > 5 for step in steps)


def test_grey_levels_are_monotone_in_the_weight_white_is_one():
    """The alignment pictures' colour map (Bahdanau et al. Figure 3): black 0 → white 1."""
    weights = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    pixels, ax = _render(weights, cmap="gray")
    lum = [_cell_luminance(pixels, ax, i, j) for i in range(3) for j in range(4)]
    assert all(b > a for a, b in zip(lum, lum[1:], strict=False)), lum
    assert lum[0] < 10 and lum[-1] > 245


def test_control_characters_become_escapes_in_tick_labels():
    _, ax = _render(np.full((2, 2), 0.5), x_labels=["\n", "a\x10"], y_labels=["x", " "])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["\\n", "a\\x10"]


def test_plot_alignment_shows_the_head_mean_then_each_head(tmp_path):
    from matplotlib.image import imread

    from attnlab.visualize import plot_alignment

    source, target = ["Ein", "Hund", "."], ["A", "dog", ".", "<eos>"]
    one = torch.softmax(torch.randn(1, 4, 3), -1)
    three = torch.softmax(torch.randn(3, 4, 3), -1)
    single = imread(plot_alignment(one, tmp_path / "one.png", source=source, target=target))
    grid = imread(plot_alignment(three, tmp_path / "three.png", source=source, target=target))
    assert grid.shape[1] > 2.2 * single.shape[1]  # mean + 3 heads, three panels a row
    assert grid.shape[0] > 1.8 * single.shape[0]  # two rows
    with pytest.raises(ValueError, match="weights must have shape \\(H, T, S\\)"):
        plot_alignment(torch.ones(4, 3), tmp_path / "bad.png", source=source, target=target)
