"""Cached decoding of the RNN translators (issue 19): what depends on the source alone is
computed once per sentence and equals its recomputation; the cached steps equal teacher forcing
in float64 (the GRU step against ``nn.GRUCell``, Cho's hoisted context terms, Bahdanau's projected
annotations); the cache follows beam reordering; a decoding loop checks its inputs and calls
dropout only where it must."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab.models.rnn as rnn
from attnlab.attention.alignment import SCORES
from attnlab.generation import beam_search, greedy_search
from attnlab.models import AttentionSeq2Seq, AttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnlab.models.rnn import gru_step

V, PAD, BOS, EOS = 40, 0, 1, 2
E, ENC, H = 12, 8, 16  # embedding, encoder width per direction (memory 2e = 16), decoder state


def attention_model(score: str = "additive", seed: int = 0) -> AttentionSeq2Seq:
    torch.manual_seed(seed)
    config = AttentionSeq2SeqConfig(
        V, score=score, embed_dim=E, encoder_dim=ENC, hidden_dim=H, attention_dim=10,
        location_filters=3, location_kernel=5, dropout=0.0,
    )
    return AttentionSeq2Seq(config).eval()


def cho_model(seed: int = 0, dropout: float = 0.0) -> RNNSeq2Seq:
    torch.manual_seed(seed)
    return RNNSeq2Seq(RNNSeq2SeqConfig(V, embed_dim=E, hidden_dim=H, dropout=dropout)).eval()


def source(rows: int, length: int, seed: int = 0, pad_last: int = 0) -> torch.Tensor:
    """``rows`` random sources ``(rows, length)``; the last row loses ``pad_last`` tokens."""
    src = torch.randint(3, V, (rows, length), generator=torch.Generator().manual_seed(seed))
    if pad_last:
        src[-1, length - pad_last :] = PAD
    return src


def stepwise(model, src: torch.Tensor, tgt: torch.Tensor, **kw):
    """Decode ``tgt`` one token at a time through a cache: ``(outputs, cache)``."""
    memory, mask = model.encode(src)
    cache = model.new_cache()
    outs = [model.decode(tgt[:, i : i + 1], memory, mask, cache=cache, **kw) for i in range(tgt.shape[1])]
    if kw.get("return_weights"):
        return (torch.cat([o[0] for o in outs], 1), torch.cat([o[1][0] for o in outs], 2)), cache
    return torch.cat(outs, 1), cache


# ----------------------------------------------------------------------------- the GRU step
def test_gru_step_equals_torch_gru_cell():
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(5, 7).double()
    x, s = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 7, dtype=torch.float64)
    gates = F.linear(x, cell.weight_ih, cell.bias_ih)  # W x + b_ih
    expected = cell(x, s)  # PyTorch's own GRU cell
    torch.testing.assert_close(gru_step(gates, s, cell.weight_hh, cell.bias_hh), expected, rtol=0, atol=1e-14)


# ----------------------------------------------------------------------------- one step function
@pytest.mark.parametrize("model", [attention_model(s) for s in SCORES] + [cho_model()], ids=[*SCORES, "cho"])
def test_teacher_forcing_and_every_decoding_path_run_one_step_function(model, monkeypatch):
    """One step function per decoder (``_step``): teacher forcing, decoding with the context and
    decoding over the projected annotations (Bahdanau's fast path, behind the step's read) all
    go through it, once a position, and agree."""
    calls = []
    step = type(model)._step
    monkeypatch.setattr(type(model), "_step", lambda self, *a: calls.append(1) or step(self, *a))
    tgt = torch.randint(3, V, (2, 5))
    for src, projected in ((source(2, 8, pad_last=3), True), (source(2, 9), False)):  # B·S vs 2e = 16
        full = model(src, tgt)
        assert len(calls) == 5
        steps, cache = stepwise(model, src, tgt)
        assert len(calls) == 10
        torch.testing.assert_close(steps, full, rtol=1e-5, atol=1e-6)
        assert ("projected" in cache) == (projected and isinstance(model, AttentionSeq2Seq))
        calls.clear()


def test_cho_decoder_equals_torch_gru_over_the_context_in_float64():
    """Cho et al.'s decoder against PyTorch's own ``nn.GRU`` with the cell's weights, run over
    ``[E y_{i-1}; c]`` from ``s_0 = tanh(V' c)``, then the deep output with the whole ``W_o``."""
    model = cho_model().double()
    src, tgt = source(3, 6, pad_last=2), torch.randint(3, V, (3, 5))
    memory, _ = model.encode(src)
    c = memory[:, 0]  # (B, H)
    gru = torch.nn.GRU(E + H, H, batch_first=True).double()
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        getattr(gru, f"{name}_l0").data.copy_(getattr(model.cell, name))
    y = model.tgt_embed(tgt)  # (B, T, E)
    contexts = c[:, None].expand(-1, 5, -1)  # (B, T, H)
    s0 = torch.tanh(model.bridge(c))
    states, _ = gru(torch.cat([y, contexts], -1), s0[None].contiguous())  # (B, T, H)
    deep = torch.tanh(model.deep_output(torch.cat([states, contexts, y], -1)))
    torch.testing.assert_close(model(src, tgt), model.output(deep), rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- Cho et al.
def test_cho_context_terms_are_computed_once_and_equal_their_recomputation():
    model = cho_model().double()
    src, tgt = source(3, 6, pad_last=2), torch.randint(3, V, (3, 5))
    calls = []
    model.bridge.register_forward_hook(lambda *_: calls.append(1))  # s_0 = tanh(V' c): once
    _, cache = stepwise(model, src, tgt)
    assert len(calls) == 1
    c = model.encode(src)[0][:, 0].detach().numpy()  # (B, H)
    w_ih, b_ih = model.cell.weight_ih.detach().numpy(), model.cell.bias_ih.detach().numpy()
    w_o, b_o = model.deep_output.weight.detach().numpy(), model.deep_output.bias.detach().numpy()
    torch.testing.assert_close(cache["context_gates"].detach().numpy(), c @ w_ih[:, E:].T + b_ih)
    torch.testing.assert_close(cache["context_output"].detach().numpy(), c @ w_o[:, H : 2 * H].T + b_o)


def test_cho_cached_steps_equal_teacher_forcing_in_float64():
    model = cho_model().double()
    src, tgt = source(3, 6, pad_last=2), torch.randint(3, V, (3, 7))
    steps, cache = stepwise(model, src, tgt)
    torch.testing.assert_close(steps, model(src, tgt), rtol=0, atol=1e-12)
    assert cache.offset == 7


# ----------------------------------------------------------------------------- Bahdanau et al.
@pytest.mark.parametrize("score", SCORES)
def test_projected_annotations_equal_the_context_path_in_float64(score):
    model = attention_model(score).double()
    src, tgt = source(2, 8, pad_last=3), torch.randint(3, V, (2, 6))  # B·S = 16 ≤ 2e: projected
    (steps, weights), cache = stepwise(model, src, tgt, return_weights=True)
    assert "projected" in cache
    full, (full_weights,) = model.decode(tgt, *model.encode(src), return_weights=True)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, full_weights, rtol=0, atol=1e-14)
    memory = model.encode(src)[0]
    w_ih, w_o = model.cell.weight_ih, model.deep_output.weight
    expected = torch.cat([memory @ w_ih[:, E:].T, memory @ w_o[:, H : H + 2 * ENC].T], -1)
    torch.testing.assert_close(cache["projected"], expected, rtol=0, atol=1e-14)


def test_more_rows_than_the_projection_pays_for_step_through_the_context():
    model = attention_model()
    _, cache = stepwise(model, source(3, 6), torch.randint(3, V, (3, 2)))  # B·S = 18 > 2e = 16
    assert "projected" not in cache and "keys" in cache


@pytest.mark.parametrize("score", SCORES)
def test_keys_are_prepared_once_and_follow_the_rows(score, monkeypatch):
    model = attention_model(score)
    calls = []
    prepare = model.alignment.prepare
    monkeypatch.setattr(model.alignment, "prepare", lambda keys: calls.append(1) or prepare(keys))
    src = source(4, 7, pad_last=3)
    (out,) = greedy_search(model, src[:1], max_new_tokens=6, bos_id=BOS, eos_id=EOS)
    assert len(calls) == 1 and len(out) > 0
    memory, mask = model.encode(src)
    _, cache = stepwise(model, src, torch.randint(3, V, (4, 3)))
    index = torch.tensor([3, 3, 0])
    cache.reorder(index)  # as beam search does
    torch.testing.assert_close(cache["keys"], prepare(memory[index]), rtol=0, atol=0)
    assert torch.equal(cache["mask"], mask[index])


def test_the_cache_keeps_a_mask_only_for_padded_sources():
    model = attention_model()
    _, unpadded = stepwise(model, source(2, 5), torch.randint(3, V, (2, 2)))
    _, padded = stepwise(model, source(2, 5, pad_last=2), torch.randint(3, V, (2, 2)))
    assert "mask" not in unpadded and "mask" in padded


@pytest.mark.parametrize("model", [attention_model(s) for s in SCORES] + [cho_model()], ids=[*SCORES, "cho"])
def test_beam_search_over_the_cache_equals_uncached_search(model):
    src = source(1, 5)  # beam 3 × 5 = 15 ≤ 2e: Bahdanau's cache projects and is reordered
    kw = dict(beam_size=3, max_new_tokens=6, bos_id=BOS, eos_id=EOS, n_best=3)
    cached, uncached = beam_search(model, src, **kw)[0], beam_search(model, src, use_cache=False, **kw)[0]
    assert [h.tokens for h in cached] == [h.tokens for h in uncached]
    assert [h.score for h in cached] == pytest.approx([h.score for h in uncached], abs=1e-5)


@pytest.mark.parametrize("model", [attention_model(), cho_model()], ids=["bahdanau (projected)", "cho"])
def test_cached_steps_run_under_bf16_autocast(model):
    src, tgt = source(1, 5), torch.randint(3, V, (1, 4))  # bf16 weights and fp32 biases mix here
    with torch.autocast("cpu", dtype=torch.bfloat16):
        steps, cache = stepwise(model, src, tgt)
    assert "projected" in cache or "context_gates" in cache
    torch.testing.assert_close(steps.float(), model(src, tgt), rtol=0, atol=0.05)  # bf16 rounding


# ----------------------------------------------------------------------------- validate once
@pytest.mark.parametrize("model", [attention_model(), cho_model()], ids=["bahdanau", "cho"])
def test_a_decoding_loop_checks_token_ids_on_its_first_step_only(model, monkeypatch):
    calls = []
    check_ids = rnn.check_ids
    monkeypatch.setattr(rnn, "check_ids", lambda *a: calls.append(a[0]) or check_ids(*a))
    greedy_search(model, source(2, 6), max_new_tokens=8, bos_id=BOS, eos_id=EOS)
    assert calls == ["src", "tgt"]  # encode, then the first decode step; 7 later steps trusted
    memory, mask = model.encode(source(1, 4))
    cache = model.new_cache()
    model.decode(torch.tensor([[BOS]]), memory, mask, cache=cache)
    with pytest.raises(ValueError, match="tgt must be token ids < vocab_size=40"):  # outside a loop
        model.decode(torch.tensor([[V]]), memory, mask, cache=cache)


@pytest.mark.parametrize("model", [attention_model(), cho_model()], ids=["bahdanau", "cho"])
def test_teacher_forcing_checks_each_input_once_and_decode_checks_unless_told(model, monkeypatch):
    calls = []
    check_ids = rnn.check_ids
    monkeypatch.setattr(rnn, "check_ids", lambda *a: calls.append(a[0]) or check_ids(*a))
    src, tgt = source(2, 6), torch.randint(3, V, (2, 4))
    model(src, tgt)
    assert calls == ["tgt_in", "src"]  # forward's own, encode's; decode is called with check=False
    memory, mask = model.encode(src)
    calls.clear()
    model.decode(tgt, memory, mask)
    model.decode(tgt, memory, mask, check=False)  # a caller that made tgt itself
    assert calls == ["tgt"]


def test_eval_decoding_calls_no_dropout():
    model = cho_model(dropout=0.3)
    calls = []
    model.dropout.register_forward_hook(lambda *_: calls.append(1))
    greedy_search(model, source(2, 6), max_new_tokens=4, bos_id=BOS, eos_id=EOS)
    assert calls == []
    model.train()(source(2, 6), torch.randint(3, V, (2, 3)))
    assert len(calls) == 3  # training: the source and target embeddings and the deep output
