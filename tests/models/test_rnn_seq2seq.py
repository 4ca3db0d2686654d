"""The RNN encoder-decoders (Cho et al. 2014; Bahdanau et al. 2015 with the additive, dot,
general and location scores): the alignment against the score modules it is made of, a
float64 re-computation of one decoder step, padding that never counts, step-by-step decoding
equal to teacher forcing, beam search independent of batch and padding, and the errors."""

from __future__ import annotations

import pytest
import torch

from attnlab.attention import AdditiveScore, BilinearScore, LocationAwareScore, dot_score, masked_softmax
from attnlab.attention.alignment import SCORES, Alignment
from attnlab.generation import beam_search, greedy_search
from attnlab.models import (
    AttentionSeq2Seq,
    AttentionSeq2SeqConfig,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
    load_pretrained,
)

V, PAD, BOS, EOS = 40, 0, 1, 2


def attention_model(score: str = "additive", seed: int = 0, **kw) -> AttentionSeq2Seq:
    torch.manual_seed(seed)
    config = AttentionSeq2SeqConfig(
        V, score=score, embed_dim=12, encoder_dim=8, hidden_dim=16, attention_dim=10,
        location_filters=3, location_kernel=5, dropout=0.0, **kw,
    )
    return AttentionSeq2Seq(config).eval()


def cho_model(seed: int = 0) -> RNNSeq2Seq:
    torch.manual_seed(seed)
    return RNNSeq2Seq(RNNSeq2SeqConfig(V, embed_dim=12, hidden_dim=16, dropout=0.0)).eval()


def ALL_MODELS():
    return [*(attention_model(s) for s in SCORES), cho_model()]


def padded_source(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (4, 9), generator=g)
    for row, length in enumerate([9, 6, 3, 1]):
        src[row, length:] = PAD
    return src  # (4, 9), right-padded


# ----------------------------------------------------------------------------- the alignment
@pytest.mark.parametrize("score", SCORES)
def test_alignment_equals_the_masked_softmax_of_its_score_module(score):
    torch.manual_seed(0)
    align = Alignment(score, 6, 6, 5, filters=2, kernel_size=3).double()
    q, keys = torch.randn(3, 6, dtype=torch.float64), torch.randn(3, 7, 6, dtype=torch.float64)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 4:] = False
    previous = masked_softmax(torch.randn(3, 7, dtype=torch.float64), mask)
    module = align.score if score != "dot" else dot_score
    if isinstance(module, LocationAwareScore):
        scores = module(q[:, None], keys, previous[:, None])
    else:
        assert isinstance(module, (AdditiveScore, BilinearScore)) or module is dot_score
        scores = module(q[:, None], keys)
    expected = masked_softmax(scores[:, 0], mask)  # (B, S)
    torch.testing.assert_close(align(q, align.prepare(keys), mask, previous), expected)


@pytest.mark.parametrize("score", SCORES)
def test_the_alignment_reads_every_score_through_the_score_api(score, monkeypatch):
    """One interface for the four scores: ``prepare`` once per source, ``score`` each step."""
    torch.manual_seed(0)
    align = Alignment(score, 6, 6, 5, filters=2, kernel_size=3).double()
    calls = []
    module = align.score
    for name in ("prepare", "score"):
        method = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, n=name, f=method: calls.append(n) or f(*a))
    keys = align.prepare(torch.randn(3, 7, 6, dtype=torch.float64))
    previous = torch.full((3, 7), 1 / 7, dtype=torch.float64)
    for _ in range(2):
        previous = align(torch.randn(3, 6, dtype=torch.float64), keys, None, previous)
    assert calls == ["prepare", "score", "score"]


def test_dot_score_needs_equal_widths():
    with pytest.raises(ValueError, match="dot score needs query_dim = key_dim, got 6 and 8"):
        Alignment("dot", 6, 8, 4)
    with pytest.raises(ValueError, match="score 'dot' needs hidden_dim = 2 \\* encoder_dim"):
        AttentionSeq2SeqConfig(V, score="dot", encoder_dim=8, hidden_dim=12)
    with pytest.raises(ValueError, match="score must be one of"):
        AttentionSeq2SeqConfig(V, score="cosine")


def test_one_decoder_step_equals_a_float64_recomputation_of_bahdanau_eqs_4_to_6():
    model = attention_model().double()
    src, tgt = padded_source()[1:2, :6], torch.tensor([[BOS]])
    memory, mask = model.encode(src)
    logits, (weights,) = model.decode(tgt, memory, mask, return_weights=True)
    s0 = torch.tanh(model.bridge(memory[0, 0, 8:]))  # tanh(W_s h←_1)
    sc = model.alignment.score
    e = torch.stack([sc.w_v(torch.tanh(sc.w_q(s0) + sc.w_k(h))).squeeze() for h in memory[0]])
    alpha = torch.softmax(e, 0)
    c = (alpha[:, None] * memory[0]).sum(0)
    y = model.tgt_embed.weight[BOS]
    cell = model.cell
    x = torch.cat([y, c])
    gi = (cell.weight_ih @ x + cell.bias_ih).split(16)  # r, z, n parts of W x + b
    gh = (cell.weight_hh @ s0 + cell.bias_hh).split(16)  # r, z, n parts of U s + b
    r, z = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
    n = torch.tanh(gi[2] + r * gh[2])
    s1 = (1 - z) * n + z * s0  # the GRU of Cho et al. 2014, eqs. 5-8
    t = torch.tanh(model.deep_output.weight @ torch.cat([s1, c, y]) + model.deep_output.bias)
    torch.testing.assert_close(weights[0, 0, 0], alpha)
    torch.testing.assert_close(logits[0, 0], model.output.weight @ t)


# ----------------------------------------------------------------------------- padding
@pytest.mark.parametrize("score", SCORES)
def test_weights_sum_to_one_over_real_tokens_and_are_exactly_zero_on_padding(score):
    model = attention_model(score)
    src = padded_source()
    tgt = torch.randint(3, V, (4, 5))
    _, (weights,) = model.decode(tgt, *model.encode(src), return_weights=True)  # (B, 1, T, S)
    real = (src != PAD)[:, None, None, :].expand_as(weights)
    assert torch.all(weights[~real] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 1, 5))


@pytest.mark.parametrize("model", ALL_MODELS(), ids=[*SCORES, "cho"])
def test_padding_changes_nothing(model):
    src = padded_source()
    tgt = torch.randint(3, V, (4, 5))
    batched = model(src, tgt)
    for row, length in enumerate([9, 6, 3, 1]):
        alone = model(src[row : row + 1, :length], tgt[row : row + 1])
        torch.testing.assert_close(batched[row : row + 1], alone, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- decoding
@pytest.mark.parametrize("model", ALL_MODELS(), ids=[*SCORES, "cho"])
def test_step_by_step_decoding_equals_teacher_forcing(model):
    src, tgt = padded_source(), torch.randint(3, V, (4, 7))
    memory, mask = model.encode(src)
    full = model.decode(tgt, memory, mask)
    cache = model.new_cache()
    steps = torch.cat([model.decode(tgt[:, i : i + 1], memory, mask, cache=cache) for i in range(7)], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    assert cache.offset == 7
    greedy = greedy_search(model, src, max_new_tokens=6, bos_id=BOS, eos_id=EOS)
    uncached = greedy_search(model, src, max_new_tokens=6, bos_id=BOS, eos_id=EOS, use_cache=False)
    assert greedy == uncached


@pytest.mark.parametrize("model", ALL_MODELS(), ids=[*SCORES, "cho"])
def test_beam_results_do_not_depend_on_batch_size_or_padding(model):
    src = padded_source(3)
    batched = beam_search(model, src, beam_size=3, max_new_tokens=8, bos_id=BOS, eos_id=EOS)
    for row, length in enumerate([9, 6, 3, 1]):
        (alone,) = beam_search(
            model, src[row : row + 1, :length], beam_size=3, max_new_tokens=8, bos_id=BOS, eos_id=EOS
        )
        assert alone[0].tokens == batched[row][0].tokens
        assert alone[0].score == pytest.approx(batched[row][0].score, abs=1e-4)


def test_location_with_zero_location_features_is_the_additive_model():
    additive, location = attention_model("additive"), attention_model("location", seed=1)
    state = additive.state_dict()
    with torch.no_grad():
        location.alignment.score.conv.weight.zero_()
        location.alignment.score.w_f.weight.zero_()
        location.alignment.score.w_f.bias.zero_()
    location.load_state_dict({**location.state_dict(), **state})
    src, tgt = padded_source(), torch.randint(3, V, (4, 6))
    torch.testing.assert_close(location(src, tgt), additive(src, tgt))


# ----------------------------------------------------------------------------- the seam
@pytest.mark.parametrize("model", ALL_MODELS(), ids=[*SCORES, "cho"])
def test_save_and_load_by_model_type(model, tmp_path):
    model.save_pretrained(tmp_path / "m")
    loaded = load_pretrained(tmp_path / "m")
    assert type(loaded) is type(model) and loaded.config == model.config
    src, tgt = padded_source(), torch.randint(3, V, (4, 5))
    torch.testing.assert_close(loaded(src, tgt), model(src, tgt))


def test_a_long_source_is_read_without_a_limit():
    src = torch.randint(3, V, (1, 400))
    for model in (attention_model(), cho_model()):
        (out,) = greedy_search(model, src, max_new_tokens=3, bos_id=BOS, eos_id=EOS)
        assert len(out) <= 3


def test_errors_name_the_bad_value():
    cho = cho_model()
    with pytest.raises(TypeError, match="return_weights"):  # no attention to return
        cho.decode(torch.tensor([[BOS]]), *cho.encode(padded_source()[:1]), return_weights=True)
    model = attention_model()
    with pytest.raises(ValueError, match="src must be token ids < vocab_size=40, got a maximum of 45"):
        model.encode(torch.tensor([[V + 5]]))
    with pytest.raises(ValueError, match="memory has batch size 4 but tgt has batch size 1"):
        model.decode(torch.tensor([[BOS]]), *model.encode(padded_source()))
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary"):
        RNNSeq2SeqConfig(10, 12, share_embeddings=True)
    with pytest.raises(ValueError, match="dropout"):
        RNNSeq2SeqConfig(10, dropout=1.5)
