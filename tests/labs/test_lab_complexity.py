"""The complexity lab (attnlab.labs.complexity): its measuring tools against known answers, the
decks' orders as exact exponents of counted FLOPs and measured memory, the KV cache, the
translators' training FLOPs against FlopCounterMode, and the quick lab end to end.

No wall-clock time is asserted: timings depend on the machine; the exponent fit that turns
them into orders is checked on synthetic data instead.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from attnlab.analysis import attention_cost, attention_memory, convolution_path_length, layer_complexity
from attnlab.labs.complexity.decoding import decoding_model, measure_decoding
from attnlab.labs.complexity.measure import (
    activation_bytes,
    build_layers,
    count_flops,
    dependent_steps,
    fit_exponent,
    path_lengths,
    quadratic_coefficient,
)
from attnlab.labs.report import LabOptions
from attnlab.models import GPTConfig

D, HEADS, KERNEL = 16, 2, 3


@pytest.fixture(scope="module")
def layers():
    return {layer.key: layer for layer in build_layers(D, HEADS, KERNEL, seed=0)}


def _inputs(ns):
    return {n: torch.randn(1, n, D, generator=torch.Generator().manual_seed(n)) for n in ns}


# ----------------------------------------------------------------------------- the fits
@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0, 2.7])
def test_fit_exponent_recovers_a_known_exponent(exponent: float) -> None:
    ns = [2**k for k in range(5, 13)]
    assert fit_exponent(ns, [3.7 * n**exponent for n in ns]) == pytest.approx(exponent, abs=1e-12)
    # timing-like data: lower-order terms and multiplicative noise of a few per cent
    gen = torch.Generator().manual_seed(int(exponent * 10))
    noise = torch.exp(0.03 * torch.randn(len(ns), generator=gen)).tolist()
    noisy = [(2e-9 * n**exponent + 1e-12 * n) * e for n, e in zip(ns, noise, strict=True)]
    assert fit_exponent(ns, noisy) == pytest.approx(exponent, abs=0.03)


def test_fit_exponent_is_least_squares_in_log_log() -> None:
    """Against numpy's polyfit of log y on log n (an independent implementation)."""
    import numpy as np

    ns, ys = [3, 10, 30, 100, 300], [5.0, 9.0, 40.0, 70.0, 900.0]
    slope = np.polyfit(np.log(ns), np.log(ys), 1)[0]
    assert fit_exponent(ns, ys) == pytest.approx(slope, rel=1e-12)


def test_fit_helpers_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="fit_exponent needs >= 2"):
        fit_exponent([4], [1.0])
    with pytest.raises(ValueError, match="positive n and values"):
        fit_exponent([4, 8], [1.0, 0.0])
    with pytest.raises(ValueError, match="at least two different n"):
        fit_exponent([4, 4], [1.0, 2.0])
    with pytest.raises(ValueError, match="quadratic_coefficient needs >= 3"):
        quadratic_coefficient([1, 2], [1.0, 2.0])


def test_quadratic_coefficient_of_a_parabola() -> None:
    ns = [100, 200, 400, 800]
    assert quadratic_coefficient(ns, [16 * n * n + 300 * n + 7 for n in ns]) == pytest.approx(16, abs=1e-9)
    assert quadratic_coefficient(ns, [300 * n + 7 for n in ns]) == pytest.approx(0, abs=1e-9)


# ------------------------------------------------- counted FLOPs, steps, paths: exact orders
def test_counted_flops_equal_analysis_and_have_the_decks_exponents(layers) -> None:
    """Hasegawa-Johnson, "Why Self-Attention?": O(n²d) attention, O(nd²) recurrence, O(knd²)
    convolution — as exact exponents of FlopCounterMode's counts."""
    ns = [64, 128, 256, 512]
    inputs = _inputs(ns)
    counts = {key: [count_flops(layer, inputs[n]) for n in ns] for key, layer in layers.items()}
    for key, layer in layers.items():
        rows = [layer_complexity(layer.kind, n, D, kernel_size=KERNEL, num_heads=HEADS) for n in ns]
        assert [total for total, _ in counts[key]] == [row.flops for row in rows], key
    for key in ("recurrent", "convolutional"):
        assert fit_exponent(ns, [total for total, _ in counts[key]]) == pytest.approx(1.0, abs=1e-12), key
    own = [own for _, own in counts["attention_fused"]]  # QKᵀ and softmax(S)·V: 4 n² d
    assert own == [4 * n * n * D for n in ns]
    assert fit_exponent(ns, own) == pytest.approx(2.0, abs=1e-12)
    whole = [total for total, _ in counts["attention_fused"]]  # 8 n d² + 4 n² d: tends to 2
    local = [fit_exponent(ns[i:i + 2], whole[i:i + 2]) for i in range(len(ns) - 1)]
    assert all(1.5 < e < 2.0 for e in local) and local == sorted(local)
    assert local[-1] > 1.9


def test_dependent_steps_are_n_for_the_gru_and_constant_otherwise(layers) -> None:
    """Ba, "Computational Cost and Parallelism": the RNN's sequential operations grow with t."""
    for n, x in _inputs([8, 40]).items():
        steps = {key: dependent_steps(layer, x) for key, layer in layers.items()}
        assert steps == {"attention_fused": 4, "attention_explicit": 4, "recurrent": n, "convolutional": 1}
        for key, layer in layers.items():
            assert steps[key] == layer_complexity(layer.kind, n, D).sequential_ops


@pytest.mark.parametrize("n", [2, 3, 9, 10, 100, 730])
def test_measured_path_lengths_equal_analysis(n: int) -> None:
    """O(1) for attention, O(log_k n) dilated and O(n/k) contiguous convolutions."""
    for k in (2, 3, 5):
        measured = path_lengths(n, k)
        assert measured["self-attention"] == 1
        assert measured["convolutional, dilated"] == convolution_path_length(n, k)
        assert measured["convolutional, contiguous"] == convolution_path_length(n, k, dilated=False)
    assert path_lengths(730, 3)["convolutional, dilated"] == 7  # 3^6 = 729 < 730


# ------------------------------------------------------------------------------- memory
def test_attention_matrix_memory_follows_n_squared(layers) -> None:
    """Li, "Complexity of Attention": memory O(n²). The explicit path keeps H·n² float32 softmax
    weights for backward, exactly attention_memory's count; the fused path keeps none."""
    ns = [48, 96, 144]
    inputs = _inputs(ns)
    config = GPTConfig(vocab_size=10, block_size=256, d_model=D, num_heads=HEADS, num_layers=1)
    explicit = [activation_bytes(layers["attention_explicit"], inputs[n]) for n in ns]
    fused = [activation_bytes(layers["attention_fused"], inputs[n]) for n in ns]
    per_n2 = attention_memory(config, 48) / 48**2
    assert per_n2 == HEADS * 4
    assert quadratic_coefficient(ns, explicit) == pytest.approx(per_n2, abs=1e-6)
    assert quadratic_coefficient(ns, fused) == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():  # the weights tensor itself is that size
        _, weights = layers["attention_explicit"].module(inputs[96], return_weights=True)
    assert weights.nbytes == attention_memory(config, 96)
    assert weights.nbytes == attention_cost(96, 96, D, HEADS).matrix_elements * 4


def test_recurrent_and_convolutional_activations_are_linear(layers) -> None:
    """Ba: an RNN stores t × k hidden units for backprop; a convolution keeps its input."""
    ns = [16, 32, 64]
    inputs = _inputs(ns)
    for key in ("recurrent", "convolutional"):
        saved = [activation_bytes(layers[key], inputs[n]) for n in ns]
        assert quadratic_coefficient(ns, saved) == pytest.approx(0.0, abs=1e-6)
        assert fit_exponent(ns, saved) == pytest.approx(1.0, abs=1e-9)
    assert activation_bytes(layers["convolutional"], inputs[32]) == 32 * D * 4  # the input alone


# ------------------------------------------------------------------------------ decoding
def test_cached_decoding_counts_fewer_flops_and_gives_the_same_tokens() -> None:
    model = decoding_model(32, 2, 2, 50, 64, seed=1)
    result = measure_decoding(model, (8, 16, 32), rounds=1, min_sample_s=0.0)
    assert result.flops == result.predicted
    assert all(c < r for c, r in zip(result.flops["cached"], result.flops["recomputed"], strict=True))
    assert result.same_tokens == [True, True, True]
    assert min(result.distinct_tokens) > 3  # the tokens vary, so "same" is a real check
    assert fit_exponent((8, 16, 32), result.flops["cached"]) < 1.3
    assert fit_exponent((8, 16, 32), result.flops["recomputed"]) > 1.6


# --------------------------------------------------------------------------- translators
def _translator_run(tmp_path):
    """A tiny run directory: a Transformer and BPE from 200 Multi30k pairs, results.json, and a
    step checkpoint whose trainer.pt says 12,345 target tokens were seen."""
    from attnlab.data.multi30k import load_multi30k
    from attnlab.data.tokenizers import save_tokenizers, train_bpe
    from attnlab.models import Transformer, TransformerConfig
    from attnlab.training.state import TrainerState, save_trainer_state

    pairs = load_multi30k("train", "de", "en")[:200]
    tok, _ = train_bpe([s for s, _ in pairs], [t for _, t in pairs], 300, joint=True)
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=32,
                               num_heads=4, num_encoder_layers=2, num_decoder_layers=1, d_ff=64, dropout=0.0)
    model = Transformer(config)
    run = tmp_path / "runs" / "multi30k_de_en"
    recipe = tmp_path / "recipe.json"
    data = {"src_lang": "de", "tgt_lang": "en", "max_len": 64, "train_limit": 0}
    recipe.write_text(json.dumps({"data": data}))
    files = {p.name: p for p in save_tokenizers(tmp_path, tok, tok)} | {"recipe.json": recipe}
    model.save_pretrained(run / "final", extra=files)
    step = model.save_pretrained(run / "checkpoints" / "step_00000010", extra=files)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = TrainerState(step=10, tokens_seen=12_345)
    save_trainer_state(step / "trainer.pt", state=state, optimizer=optimizer)
    results = {"split": "test_2016_flickr", "src_lang": "de", "tgt_lang": "en", "bleu": 12.5}
    (run / "results.json").write_text(json.dumps(results))
    return run, model, tok, pairs


def test_translator_training_flops_equal_counted_training_steps(tmp_path, monkeypatch) -> None:
    """FLOPs per target token over the run's pairs = FlopCounterMode of a training step on each
    pair alone (forward + backward), summed, over its target tokens."""
    from attnlab.labs.complexity.translator import translator_costs

    run, model, tok, pairs = _translator_run(tmp_path)
    monkeypatch.chdir(tmp_path)  # the default runs are looked for here: runs/multi30k_de_en
    costs, notes = translator_costs(LabOptions(), pairs_limit=12)
    assert notes == [] and len(costs) == 1
    cost = costs[0]
    assert (cost.bleu, cost.steps, cost.tokens_seen, cost.pair) == (12.5, 10, 12_345, "de-en")
    counted, targets = 0, 0
    model.train()
    for source, target in pairs[:12]:
        src = torch.tensor([tok.encode(source)])  # (1, S)
        tgt_in = torch.tensor([[tok.bos_id, *tok.encode(target)]])  # (1, T)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            model(src, tgt_in).square().mean().backward()
        counted += counter.get_total_flops()
        targets += tgt_in.shape[1]
    assert cost.flops_per_token == pytest.approx(counted / targets, rel=1e-12)
    assert cost.training_flops == pytest.approx(cost.flops_per_token * 12_345, rel=1e-12)


def test_translator_rows_say_which_command_fills_them(tmp_path, monkeypatch) -> None:
    from attnlab.labs.complexity.translator import translator_costs

    monkeypatch.chdir(tmp_path)
    costs, notes = translator_costs(LabOptions())
    assert costs == [] and len(notes) == 1
    assert "attnlab train --config configs/multi30k_de_en.toml" in notes[0] and "make demo" in notes[0]
    costs, notes = translator_costs(LabOptions(checkpoint=str(tmp_path / "nothing")))
    assert costs == [] and str(tmp_path / "nothing") in notes[0]


# ------------------------------------------------------------------------ the lab, quick
def test_quick_lab_reports_the_decks_orders(tmp_path, monkeypatch) -> None:
    from attnlab.labs import complexity
    from attnlab.labs.registry import run_lab

    monkeypatch.chdir(tmp_path)  # no trained translator here
    report = run_lab("complexity", tmp_path / "out", LabOptions(quick=True, progress=False))
    got = report.numbers
    assert got["flops_match_analysis"] is True
    assert got["flops_exponent.recurrent"] == pytest.approx(1.0, abs=1e-12)
    assert got["flops_exponent.convolutional"] == pytest.approx(1.0, abs=1e-12)
    assert got["flops_exponent.attention_matrix"] == pytest.approx(2.0, abs=1e-12)
    assert 1.5 < got["flops_exponent.attention_fused"] < 2.0
    assert got["sequential_steps.recurrent"] == complexity.QUICK.ns[-1]
    assert got["sequential_steps_exponent.recurrent"] == pytest.approx(1.0, abs=1e-12)
    assert got["sequential_steps.attention_fused"] == 4 and got["sequential_steps.convolutional"] == 1
    assert got["path_length.attention_fused"] == 1
    assert got["path_length.convolutional"] == math.ceil(math.log(complexity.QUICK.ns[-1], 3) - 1e-9)
    assert got["activation_bytes_per_n2.attention_explicit"] == got["attention_matrix_bytes_per_n2.analysis"]
    for key in ("attention_fused", "recurrent", "convolutional"):
        assert got[f"activation_bytes_per_n2.{key}"] == 0.0
        assert got[f"activation_exponent.{key}"] == pytest.approx(1.0, abs=1e-9)
    assert got["decoding.same_tokens"] is True and got["decoding.flops_match_analysis"] is True
    assert got["decoding.flops_exponent.cached"] < got["decoding.flops_exponent.recomputed"]
    assert not any(key.startswith("translator.") for key in got)
    assert got["machine.threads"] == torch.get_num_threads()
    text = (tmp_path / "out" / "report.md").read_text()
    for printed in ("O{knd²}", "t² × k² × d", "3.3 · 10^18", "**28.4**", "make demo"):
        assert printed in text, printed
    assert {p.name for p in report.figures} == {"scaling.png", "decoding.png"}
    assert all(p.stat().st_size > 10_000 for p in report.figures)
