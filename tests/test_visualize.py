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
