"""The recurrent language models: the LSTMN (Cheng et al. 2016) against PyTorch's nn.LSTM when
its attention is pinned to the last state, against a float64 re-computation of eqs. 13-16,
no look-ahead, step-by-step equal to the whole window; the LSTM baseline's cache."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import attnlab.attention.linear as linear_module
import attnlab.models.lstmn as lstmn_module
import attnlab.models.lstmn_window as lstmn_window
from attnlab.attention import AdditiveScore, masked_softmax
from attnlab.attention.linear import packing_available
from attnlab.generation import greedy_search
from attnlab.models import LSTMLM, LSTMN, LSTMConfig, LSTMNConfig, load_pretrained
from attnlab.models.lstmn import LSTMNLayer

V = 20


def lstmn(seed: int = 0, **kw) -> LSTMN:
    torch.manual_seed(seed)
    sizes = {"block_size": 16, "embed_dim": 6, "hidden_dim": 8, "attention_dim": 5}
    config = LSTMNConfig(V, **{**sizes, **kw})
    return LSTMN(config).eval()


def lstm(seed: int = 0, **kw) -> LSTMLM:
    torch.manual_seed(seed)
    return LSTMLM(LSTMConfig(V, **{"block_size": 16, "embed_dim": 6, "hidden_dim": 8, **kw})).eval()


def test_with_attention_on_the_last_state_it_is_an_lstm(monkeypatch):
    """Eq. 16 is an LSTM step from the summary: pin the summary to the last tape entry and the
    LSTMN must equal nn.LSTM with the same weights (<= 1e-5)."""
    model = lstmn()

    def last_state(self, keys, states, query, step_input, allowed):
        weights = torch.zeros(states.shape[:2], dtype=states.dtype)
        weights[:, int(allowed.sum()) - 1] = 1  # the last slot written
        return states[:, int(allowed.sum()) - 1], weights, None

    monkeypatch.setattr(LSTMNLayer, "read", last_state)
    reference = nn.LSTM(6, 8, batch_first=True)
    cell = model.layers[0].cell
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        getattr(reference, f"{name}_l0").data.copy_(getattr(cell, name))
    idx = torch.randint(0, V, (3, 11))
    expected, _ = reference(model.embed(idx))
    torch.testing.assert_close(model.output(expected), model(idx), atol=1e-5, rtol=1e-5)


def test_equals_a_float64_recomputation_of_eqs_13_to_16():
    model = lstmn().double()
    layer = model.layers[0]
    idx = torch.randint(0, V, (1, 6))
    x = model.embed(idx)[0]  # (n, E)
    W = layer.cell
    zero = torch.zeros(8, dtype=torch.float64)
    hs, cs, summary = [zero], [zero], zero
    for t in range(6):
        query = layer.w_x.weight @ x[t] + layer.score.w_q.weight @ summary  # W_x x_t + W_h̃ h̃_{t-1}
        v, w_h = layer.score.w_v.weight[0], layer.score.w_k.weight
        a = torch.stack([v @ torch.tanh(w_h @ h + query) for h in hs])  # eq. 13
        s = torch.softmax(a, 0)  # eq. 14
        h_mix = sum(si * h for si, h in zip(s, hs, strict=True))  # eq. 15
        c_mix = sum(si * c for si, c in zip(s, cs, strict=True))
        gates = W.weight_ih @ x[t] + W.bias_ih + W.weight_hh @ h_mix + W.bias_hh
        i, f, g, o = gates.split(8)
        c = torch.sigmoid(f) * c_mix + torch.sigmoid(i) * torch.tanh(g)  # eq. 16
        h = torch.sigmoid(o) * torch.tanh(c)
        hs, cs, summary = [*hs, h], [*cs, c], h_mix
    expected = model.output(torch.stack(hs[1:]))
    torch.testing.assert_close(model(idx)[0], expected)


def test_eq_13_is_the_additive_score_and_eq_14_the_masked_softmax(monkeypatch):
    """The LSTMN scores its tape with the one additive score (query ``h̃_{t-1}``, the tape's
    keys prepared once, ``W_x x_t`` its extra term) and normalises with ``masked_softmax`` under
    row t of the causal mask: the first t + 1 slots (the initial state, tokens before t)."""
    model = lstmn(num_layers=2)
    assert all(isinstance(layer.score, AdditiveScore) for layer in model.layers)
    calls = []
    monkeypatch.setattr(lstmn_module, "masked_softmax",
                        lambda s, m, **kw: calls.append((s, m)) or masked_softmax(s, m, **kw))
    idx = torch.randint(0, V, (2, 5))
    _, weights = model(idx, return_weights=True)
    assert len(calls) == 2 * 5  # one row of scores per layer and step
    layer, x = model.layers[0], model.embed(idx)
    tape, summary = layer.empty_tape(x), torch.zeros(2, 8)
    for t, (scores, allowed) in enumerate(calls[:5]):
        assert allowed.tolist() == [j <= t for j in range(5)]  # W = 1 + 5 - 1 slots
        h_mix, c_mix, keys = _per_step_read(layer, tape, summary, layer.w_x(x[:, t]))
        expected = layer.score.score(summary[:, None], tape["keys"], extra=layer.w_x(x[:, t])[:, None, None])
        torch.testing.assert_close(scores[:, :, : t + 1], expected)
        h, c = layer.cell(x[:, t], (h_mix, c_mix))
        tape = {"h": torch.cat([tape["h"], h[:, None]], 1), "c": torch.cat([tape["c"], c[:, None]], 1),
                "keys": torch.cat([tape["keys"], layer.score.prepare(h)[:, None]], 1)}
        summary = h_mix
        torch.testing.assert_close(weights[0][:, 0, t, :t], keys[:, 1:])


def _per_step_read(layer, tape, summary, step_input):
    """The per-step formulation: score the tape as it is so far (no mask), softmax, mean."""
    scores = layer.score.score(summary[:, None], tape["keys"], extra=step_input[:, None, None])[:, 0]
    weights = torch.softmax(scores, -1)  # (B, t + 1)
    h_mix, c_mix = (torch.einsum("bt,bth->bh", weights, tape[k]) for k in ("h", "c"))
    return h_mix, c_mix, weights


def _per_step_layer(layer, x, tape, summary):
    """An LSTMN layer as the per-step loop: the tape grows by concatenation, autograd throughout."""
    outputs = []
    for t in range(x.shape[1]):
        h_mix, c_mix, _ = _per_step_read(layer, tape, summary, layer.w_x(x[:, t]))
        h, c = layer.cell(x[:, t], (h_mix, c_mix))
        tape = {"h": torch.cat([tape["h"], h[:, None]], 1), "c": torch.cat([tape["c"], c[:, None]], 1),
                "keys": torch.cat([tape["keys"], layer.score.prepare(h)[:, None]], 1)}
        summary = h_mix
        outputs.append(h)
    return torch.stack(outputs, 1), tape, summary


@pytest.mark.parametrize("chunk", [16, 4], ids=["one-chunk", "chunks-of-4"])
@pytest.mark.parametrize("before", [0, 3], ids=["fresh", "after-3-tokens"])
def test_the_batched_window_equals_the_per_step_loop_in_float64(before, chunk, monkeypatch):
    """Values and every gradient (weights, inputs, the tape carried in) of the window function
    equal the per-step formulation's under autograd, in float64, also where a step reads the
    tape in several chunks (its last one partly masked)."""
    monkeypatch.setattr(lstmn_window, "CHUNK", chunk)
    torch.manual_seed(1)
    layer = LSTMNLayer(6, 8, 5).double()
    x = torch.randn(3, 7, 6, dtype=torch.float64, requires_grad=True)
    tape = layer.empty_tape(x)
    if before:  # a tape carried in from earlier tokens, itself differentiable
        _, tape = layer(torch.randn(3, before, 6, dtype=torch.float64, requires_grad=True), tape)[:2]
    out, grown, _ = layer(x, tape)
    ref_out, ref_tape, ref_summary = _per_step_layer(layer, x, {k: tape[k] for k in ("h", "c", "keys")},
                                                     tape["summary"])
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(grown["summary"], ref_summary)
    for key in ("h", "c", "keys"):
        torch.testing.assert_close(grown[key], ref_tape[key])
    probe = [torch.randn_like(t) for t in (out, grown["c"], grown["keys"], grown["summary"])]
    wrt = [x, *layer.parameters()]

    def grads(o, c, keys, summary):
        loss = sum((a * b).sum() for a, b in zip((o, c, keys, summary), probe, strict=True))
        return torch.autograd.grad(loss, wrt, retain_graph=True)

    for got, expected in zip(grads(out, grown["c"], grown["keys"], grown["summary"]),
                             grads(ref_out, ref_tape["c"], ref_tape["keys"], ref_summary), strict=True):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("layers", [1, 2])
def test_never_looks_ahead(layers):
    model = lstmn(num_layers=layers)
    idx = torch.randint(0, V, (2, 12))
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % V
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7], atol=0, rtol=0)
    assert not torch.allclose(a[:, 7:], b[:, 7:])
    _, (weights, *_) = model(idx, return_weights=True)  # (B, 1, n, n)
    assert torch.all(weights.triu() == 0)  # row t sees only tokens j < t
    assert torch.all(weights.sum(-1) <= 1 + 1e-6)


@pytest.mark.parametrize("make", [lstmn, lstm], ids=["lstmn", "lstm"])
@pytest.mark.parametrize("layers", [1, 2])
def test_step_by_step_equals_the_whole_window(make, layers):
    model = make(num_layers=layers)
    idx = torch.randint(0, V, (3, 10))
    cache = model.new_cache()
    pieces = [idx[:, :1], idx[:, 1:2], idx[:, 2:3], idx[:, 3:]]  # one token at a time, then the rest
    steps = torch.cat([model(piece, cache=cache) for piece in pieces], 1)
    torch.testing.assert_close(steps, model(idx), atol=1e-5, rtol=1e-5)
    assert cache.offset == 10
    cached = greedy_search(model, prompt=idx[:, :4], max_new_tokens=30)
    assert cached == greedy_search(model, prompt=idx[:, :4], max_new_tokens=30, use_cache=False)


@pytest.mark.parametrize("make", [lstmn, lstm], ids=["lstmn", "lstm"])
def test_save_and_load_by_model_type(make, tmp_path):
    model = make(num_layers=2)
    model.save_pretrained(tmp_path / "m")
    loaded = load_pretrained(tmp_path / "m")
    assert type(loaded) is type(model)
    idx = torch.randint(0, V, (2, 9))
    torch.testing.assert_close(loaded(idx), model(idx))


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="attention_dim must be > 0, got 0"):
        LSTMNConfig(V, attention_dim=0)
    with pytest.raises(ValueError, match="dropout"):
        LSTMConfig(V, dropout=2.0)
    with pytest.raises(ValueError, match="idx must be token ids < vocab_size=20"):
        lstmn()(torch.tensor([[V]]))


@pytest.mark.skipif(not packing_available(torch.float32), reason="this torch has no oneDNN prepacked product")
def test_the_window_through_onednns_prepacked_products_equals_the_per_step_loop(monkeypatch):
    """In float32 the products by W_hh and the window's weight gradients go through oneDNN where
    it is worth it; packed at every size here, values and gradients match the per-step loop."""
    monkeypatch.setattr(linear_module, "worth_packing", lambda x, weights: True)
    packed = []
    monkeypatch.setattr(lstmn_window, "product",
                        lambda x, w, p: packed.append(p is not None) or linear_module.product(x, w, p))
    torch.manual_seed(2)
    layer = LSTMNLayer(6, 8, 5)
    x = torch.randn(4, 9, 6, requires_grad=True)
    out, grown, _ = layer(x, layer.empty_tape(x))
    tape = layer.empty_tape(x)
    ref_out, _, _ = _per_step_layer(layer, x, {k: tape[k] for k in ("h", "c", "keys")}, tape["summary"])
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-4)
    probe = torch.randn_like(out)
    wrt = [x, *layer.parameters()]
    for got, expected in zip(torch.autograd.grad((out * probe).sum(), wrt),
                             torch.autograd.grad((ref_out * probe).sum(), wrt), strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert packed and all(packed)  # every step's product by W_hh, forward and backward
