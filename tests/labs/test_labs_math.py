"""The labs worked-examples, positional-encoding, pooling and pca-autoencoder, against
independent references: float64 NumPy softmax for the slides' examples, the sinusoid / RoPE /
ALiBi formulas in NumPy, NumPy's SVD for PCA and a NumPy Nadaraya-Watson for the pooling."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attnlab.data.corpora import data_dir
from attnlab.data.mnist import IMAGES_FILE
from attnlab.labs import pca_autoencoder, pooling, positional_encoding, worked_examples
from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions

QUICK = LabOptions(quick=True, progress=False)
REAL_MNIST = data_dir() / "mnist"
requires_mnist = pytest.mark.skipif(
    not (REAL_MNIST / IMAGES_FILE).is_file(),
    reason=f"the MNIST test set is not in {REAL_MNIST} (set ATTNLAB_DATA to a folder holding mnist/)",
)


def np_softmax(s):
    e = np.exp(s - s.max())
    return e / e.sum()


# ----------------------------------------------------------------------- worked examples
Q = np.array([1.0, 1.0, 0.0])
K = np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 1.0], [5.0, -1.0, 2.0]])  # keys = values, one a row
W_LINEAR = np.array([-1.0, -1.0, -1.0, 2.0, 2.0, 2.0])  # the slide's f over [q; k_j]
REFERENCE = {
    "average pooling": np.full(3, 1 / 3),
    "Bahdanau (linear f)": np_softmax(np.array([W_LINEAR @ np.concatenate([Q, k]) for k in K])),
    "dot product": np_softmax(K @ Q),
    "scaled dot product": np_softmax(K @ Q / math.sqrt(3)),
}


def test_worked_examples_equal_numpy_softmax():
    examples = worked_examples.compute_examples()
    assert set(examples) == set(REFERENCE) == set(worked_examples.SLIDES)
    for name, weights in REFERENCE.items():
        np.testing.assert_allclose(examples[name].weights.numpy(), weights, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(examples[name].context.numpy(), weights @ K, rtol=1e-13, atol=1e-15)
    scaled = 4 / math.sqrt(3)
    np.testing.assert_allclose(examples["scaled dot product"].scores.numpy(), [scaled, 0, scaled])


def test_additive_with_tanh_is_bahdanau_score():
    tanh = worked_examples.additive_with_tanh()
    scores = np.tanh([W_LINEAR @ np.concatenate([Q, k]) for k in K])
    np.testing.assert_allclose(tanh.scores.numpy(), scores, rtol=1e-13)
    np.testing.assert_allclose(tanh.weights.numpy(), np_softmax(scores), rtol=1e-13)


def _digits(printed):
    return len(printed.split(".")[1]) if "." in printed else 0


def test_a_number_agrees_exactly_when_numpy_rounds_to_the_slide():
    examples = worked_examples.compute_examples()
    for name, slide in worked_examples.SLIDES.items():
        rows = worked_examples.compare_example(examples[name], slide)
        ours = np.concatenate([REFERENCE[name], REFERENCE[name] @ K])
        for row, value, printed in zip(rows, ours, slide.weights + slide.context, strict=True):
            d = _digits(printed)
            agrees = abs(round(float(value), d) - float(printed)) < 1e-9
            assert (row.status == "agrees") == agrees, (name, printed, value, row)


def test_the_slides_differences_are_explained():
    examples = worked_examples.compute_examples()
    rows = {name: worked_examples.compare_example(examples[name], slide)
            for name, slide in worked_examples.SLIDES.items()}
    # average pooling: (3 + 0 − 1) / 3 = 0.667 is printed 0.6, a truncation
    assert rows["average pooling"][4].status == "rounding" and "truncates" in rows["average pooling"][4].why
    # scaled: e^{4/√3} / (2 e^{4/√3} + 1) = 0.476 is printed 0.47 (truncated), 0.047 as 1 − 0.94
    scaled = rows["scaled dot product"]
    assert [r.status for r in scaled] == ["rounding"] * 5 + ["agrees"]
    assert "truncates" in scaled[0].why and "sum to 1" in scaled[1].why
    assert "2.8200" in scaled[3].why  # 0.47·1 + 0.06·0 + 0.47·5 = 2.82 → 2.8
    # dot product: 0.5·0 + 0·1 + 0.5·2 = 1, printed 0
    assert rows["dot product"][5].status == "slip" and rows["dot product"][5].ours_at_slide_digits == "1"
    # the linear f as the deck's text gives it cannot tie k1 and k3
    assert [r.status for r in rows["Bahdanau (linear f)"]] == ["slip", "agrees", "slip"] + ["slip"] * 3


@pytest.mark.parametrize("ours,printed,status", [
    (0.4955, "0.5", "agrees"), (0.4763, "0.47", "rounding"), (-1e-4, "0", "agrees"),
    (2.0, "2", "agrees"), (0.9, "0.1", "slip"),
])
def test_compare_rules(ours, printed, status):
    result = worked_examples.compare(ours, printed)
    assert result.status == status and result.printed == printed
    assert not result.ours_at_slide_digits.startswith("-0")


def test_worked_examples_lab(tmp_path):
    report = worked_examples.run(tmp_path, QUICK)
    n = report.numbers
    assert n["numbers_agrees"] + n["numbers_rounding"] + n["numbers_slip"] == 24
    np.testing.assert_allclose(n["scaled_dot_product_weights"], REFERENCE["scaled dot product"], rtol=1e-13)
    np.testing.assert_allclose(n["dot_product_context"], REFERENCE["dot product"] @ K, rtol=1e-13)
    assert (tmp_path / "worked_examples.png").stat().st_size > 10_000
    text = report.markdown()
    for printed in ("0.47", "0.06", "2.8", "0.9", "0.33", "0.6"):
        assert f"| {printed} |" in text  # every slide number printed beside ours


# ------------------------------------------------------------------- positional encodings
def np_sinusoids(n, d):
    pos = np.arange(n)[:, None]
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * omega), np.cos(pos * omega)
    return pe, omega


def test_pe_dot_product_depends_only_on_distance():
    n, d = 90, 32
    pe, omega = np_sinusoids(n, d)
    gram = pe @ pe.T
    for k in range(-20, 21):
        diagonal = np.diagonal(gram, offset=k)
        np.testing.assert_allclose(diagonal, np.cos(k * omega).sum(), rtol=0, atol=1e-12)
    ours = positional_encoding.sinusoid_table(d, n)
    np.testing.assert_allclose(ours.numpy(), pe, rtol=0, atol=1e-12)
    curves = positional_encoding.by_distance(ours @ ours.T, (0, 5, 40), 49).numpy()
    closed_form = [np.cos(k * omega).sum() for k in range(50)]
    np.testing.assert_allclose(curves, np.tile(closed_form, (3, 1)), atol=1e-11)


def np_rotate(x, m, base=10000.0):
    theta = base ** (-np.arange(0, len(x), 2) / len(x))
    c, s = np.cos(m * theta), np.sin(m * theta)
    out = np.empty_like(x)
    out[0::2], out[1::2] = x[0::2] * c - x[1::2] * s, x[0::2] * s + x[1::2] * c
    return out


def test_rope_scores_depend_only_on_distance():
    gen = np.random.default_rng(0)
    q, k = gen.normal(size=16), gen.normal(size=16)
    gram = positional_encoding.rope_gram(torch.from_numpy(q), torch.from_numpy(k), 40).numpy()
    for m, n in [(0, 0), (3, 9), (9, 3), (20, 39), (39, 0)]:
        assert gram[m, n] == pytest.approx(np_rotate(q, m) @ np_rotate(k, n), abs=1e-12)
    for offset in range(-10, 11):
        diagonal = np.diagonal(gram, offset=offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    one = torch.ones(16, dtype=torch.float64)
    ones = positional_encoding.rope_gram(one, one, 30)
    theta = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    np.testing.assert_allclose(ones[0].numpy(), [2 * np.cos(j * theta).sum() for j in range(30)], atol=1e-12)


def test_alibi_bias_is_minus_slope_times_distance():
    bias = positional_encoding.alibi_gram(8, 12).numpy()
    i, j = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    for h in range(8):
        np.testing.assert_allclose(bias[h], -(2.0 ** (-(h + 1))) * np.abs(j - i), rtol=1e-7)


def test_positional_encoding_lab(tmp_path):
    report = positional_encoding.run(tmp_path, QUICK)
    n = report.numbers
    d = n["d_model"]
    _, omega = np_sinusoids(1, d)
    assert n["pe_dot_at_0"] == pytest.approx(d / 2, abs=1e-12)
    closed_form = [np.cos(k * omega).sum() for k in range(len(n["pe_dot_curve"]))]
    np.testing.assert_allclose(n["pe_dot_curve"], closed_form, atol=1e-11)
    assert n["pe_dot_spread"] < 1e-10 and n["rope_spread"] < 1e-10 and n["alibi_spread"] == 0
    assert n["rope_ones_vs_twice_pe"] < 1e-10
    assert n["alibi_slopes"] == [2.0 ** -(h + 1) for h in range(8)]
    for name in ("sinusoid_heatmap.png", "score_vs_distance.png"):
        assert (tmp_path / name).stat().st_size > 10_000


# ---------------------------------------------------------------------------------- pooling
def test_pooling_lab_learns_a_plausible_bandwidth(tmp_path):
    report = pooling.run(tmp_path, QUICK)
    n = report.numbers
    data = pooling.make_data(seed=0)
    x, y, grid = data.x_train.numpy(), data.y_train.numpy(), data.x_test.numpy()
    h = n["learned_bandwidth"]
    weights = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2)
    pred = (weights / weights.sum(1, keepdims=True)) @ y
    truth = 2 * np.sin(grid) + grid**0.8
    assert n["mse_learned_gaussian"] == pytest.approx(np.mean((pred - truth) ** 2), rel=1e-10)
    assert n["mse_average"] == pytest.approx(np.mean((truth - y.mean()) ** 2), rel=1e-12)
    assert n["mse_learned_gaussian"] <= n["mse_average"] / 4
    assert 0.1 < h < 0.6
    step = (pooling.GRID[1] / pooling.GRID[0]) ** (1 / (pooling.GRID[2] - 1))
    assert n["grid_best_loo_bandwidth"] / step <= h <= n["grid_best_loo_bandwidth"] * step
    assert n["loo_loss_end"] < n["loo_loss_start"]
    for name in ("attention_pooling.png", "learned_bandwidth.png"):
        assert (tmp_path / name).stat().st_size > 10_000


# ---------------------------------------------------------------------- PCA and autoencoder
def test_principal_angles_of_known_subspaces():
    gen = np.random.default_rng(1)
    basis = np.linalg.qr(gen.normal(size=(12, 12)))[0]
    angles = np.array([1e-7, 0.2, 0.9, 1.5])  # radians
    a = basis[:, :4]
    b = np.cos(angles) * basis[:, :4] + np.sin(angles) * basis[:, 4:8]
    b = b @ gen.normal(size=(4, 4))  # any other basis of the same subspace
    ours = pca_autoencoder.principal_angles(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(ours, np.degrees(angles), rtol=1e-6, atol=1e-12)
    assert pca_autoencoder.principal_angles(torch.from_numpy(a), torch.from_numpy(a)).max() < 1e-6
    with pytest.raises(ValueError, match="same shape"):
        pca_autoencoder.principal_angles(torch.from_numpy(a), torch.from_numpy(b[:, :3]))


def test_autoencoder_loss_is_the_per_image_mse():
    gen = np.random.default_rng(2)
    x, w = gen.normal(size=(50, 20)), gen.normal(size=(20, 3))
    per_image = np.mean(np.sum((x - x @ w @ w.T) ** 2, axis=1))
    cov = torch.from_numpy(x.T @ x / 50)
    loss = pca_autoencoder.autoencoder_loss(torch.from_numpy(w), cov)
    assert float(loss) == pytest.approx(per_image, rel=1e-12)


@requires_mnist
def test_pca_equals_numpy_svd_on_mnist():
    raw, _ = pca_autoencoder.load_digits(300)
    x = raw - raw.mean(0)
    components, variances = pca_autoencoder.pca(x, 5)
    _, s, vt = np.linalg.svd(x.numpy(), full_matrices=False)
    np.testing.assert_allclose(np.abs((components.numpy() * vt[:5]).sum(1)), 1.0, atol=1e-9)
    np.testing.assert_allclose(variances.numpy()[:300], s**2 / 300, rtol=1e-9, atol=1e-12)


@requires_mnist
def test_pca_autoencoder_lab(tmp_path):
    report = pca_autoencoder.run(tmp_path, QUICK)
    n = report.numbers
    images, k = pca_autoencoder.SETTINGS[True][:2]
    raw, _ = pca_autoencoder.load_digits(images)
    x = (raw - raw.mean(0)).numpy()
    s = np.linalg.svd(x, compute_uv=False)
    pca_mse = float(np.sum(s[k:] ** 2) / len(x))  # the optimum of the deck's MSE
    assert n["mse_pca"] == pytest.approx(pca_mse, rel=1e-9)
    assert pca_mse <= n["mse_autoencoder"] <= pca_mse * 1.001
    assert n["max_angle_deg"] < 1.0 and n["max_angle_2_units_deg"] < 1.0  # well below 5°
    assert n["cosine_codes_max_diff"] < 1e-2
    assert n["same_digit_margin"]["images"] > 0  # same digits are more alike
    for name in ("components.png", "codes.png", "angles_and_cosines.png"):
        assert (tmp_path / name).stat().st_size > 10_000


def test_pca_autoencoder_without_mnist_is_unavailable(tmp_path):
    with pytest.raises(LabUnavailable, match=re.escape(str(tmp_path / "mnist"))):
        pca_autoencoder.run(tmp_path, LabOptions(quick=True, progress=False, data_dir=str(tmp_path)))
